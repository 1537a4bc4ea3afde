"""Performance regression check: a fixed set of single-op and small-chain ONNX models run on Cuvil and on ONNX
Runtime alternately in one process, compared as ratios (Cuvil time / ONNX Runtime time) with a stored baseline
for this kind of machine. Ratios, not times: load on a shared machine slows both alike.

    python bench/regress.py                       # compare with the baseline; exit 1 on a regression
    python bench/regress.py --update-baseline     # measure and store the baseline for this machine
    python bench/regress.py --inject matmul=15    # slow one case's Cuvil calls by 15 % (to check the check)
    python bench/regress.py --html history.html   # plot this machine's history (and exit)

Per case, `--rounds` rounds each time `--calls` calls of Cuvil then as many of ONNX Runtime; the case's ratio is
the median of the rounds' ratios; its spread is the rounds' median absolute deviation relative to the median
(times 1.4826: a standard deviation for normal noise), and the median's own error 1.2533 x spread / sqrt(rounds).
A case regresses when its ratio exceeds the baseline's by more than threshold = max(--min-threshold,
3 x sqrt(error_baseline^2 + error_now^2)): three standard deviations of the difference of the two medians, so an
unchanged build fails about 1 case in 700 by chance. The report prints each case's spread and threshold.
`--baseline-from-history N` makes the baseline from the last N unchanged runs instead (their median, and the spread
between runs, which the threshold then includes). A case over its threshold is measured once more with twice the rounds (`--confirm`, on by default) and fails only
if that confirms it: a real slowdown persists, a burst of load on a shared machine rarely does.
Baselines: bench/regress/baseline-<machine>.json; each run is appended to bench/regress/history-<machine>.jsonl.
Cases: single ops and small chains built here, and two whole models (ResNet-18, MobileNetV2: scripts/models.py,
exported once into ~/.cache/cuvil/regress-models).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "regress")
SCALE = 1.4826  # MAD -> standard deviation for normal noise

# Both engines run on exactly --threads threads. Cuvil's load-aware thread count (kernels use only the cores other
# runnable tasks leave free) would otherwise turn a burst of load into a change of Cuvil's thread count that ONNX
# Runtime does not make, and the ratio would move by up to 2x (seen: conv3x3 once 38 % off its baseline).
os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")


# ---- the decision (pure: tested on synthetic numbers in tests/python/test_regress.py)
def summarize(ratios: list[float]) -> dict:
    """A case's rounds -> its median ratio and relative spread."""
    med = statistics.median(ratios)
    mad = statistics.median(abs(r - med) for r in ratios)
    return {"ratio": med, "spread": SCALE * mad / med if med > 0 else 0.0, "rounds": len(ratios)}


def median_error(c: dict) -> float:
    """The relative standard error of a case's median ratio (1.2533 sigma / sqrt(n) for normal noise)."""
    return 1.2533 * c["spread"] / math.sqrt(max(c.get("rounds", 1), 1))


def threshold(base: dict, now: dict, min_threshold: float) -> float:
    """Three standard deviations of the change: the two medians' errors and, for a baseline made of several
    runs, the spread between runs (a process's thread placement and memory layout move a whole run)."""
    return max(min_threshold, 3.0 * math.sqrt(median_error(base) ** 2 + median_error(now) ** 2 +
                                              base.get("run_spread", 0.0) ** 2))


def baseline_from_runs(runs: list[dict]) -> dict:
    """A baseline from several unchanged runs: per case the median of their ratios, their median within-run
    spread, and the spread between runs (1.4826 x their MAD relative to the median)."""
    out = {}
    for name in sorted({c for r in runs for c in r["cases"]}):
        cs = [r["cases"][name] for r in runs if name in r["cases"]]
        ratios = [c["ratio"] for c in cs]
        med = statistics.median(ratios)
        mad = statistics.median(abs(x - med) for x in ratios)
        out[name] = {"ratio": med, "spread": statistics.median(c["spread"] for c in cs),
                     "rounds": min(c.get("rounds", 1) for c in cs), "runs": len(cs),
                     "run_spread": SCALE * mad / med if med > 0 else 0.0}
    return out


def compare(baseline: dict, current: dict, min_threshold: float = 0.05) -> list[dict]:
    """Per case of `current`: its change against `baseline` (relative), the threshold, and whether it regressed
    (or 'new' when the baseline lacks it)."""
    out = []
    for name, now in sorted(current.items()):
        base = baseline.get(name)
        if base is None:
            out.append({"case": name, "status": "new", "ratio": now["ratio"], "spread": now["spread"]})
            continue
        change = now["ratio"] / base["ratio"] - 1
        t = threshold(base, now, min_threshold)
        out.append({"case": name, "status": "regressed" if change > t else "ok", "change": change, "threshold": t,
                    "ratio": now["ratio"], "base_ratio": base["ratio"], "spread": now["spread"],
                    "base_spread": base["spread"]})
    return out


# ---- the cases
def _models():
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)

    def f32(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    def const(name, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), name)

    def model(nodes, inputs, outputs, inits=()):
        g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    yield "matmul", model([helper.make_node("MatMul", ["x", "w"], ["y"])], [f32("x", [128, 768])],
                          [f32("y", [128, 768])], [const("w", rng.standard_normal((768, 768)) * 0.05)]), \
        {"x": rng.standard_normal((128, 768)).astype(np.float32)}
    yield "conv3x3", model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                            helper.make_node("Relu", ["c"], ["y"])], [f32("x", [1, 32, 56, 56])],
                           [f32("y", [1, 32, 56, 56])],
                           [const("w", rng.standard_normal((32, 32, 3, 3)) * 0.05), const("b", np.zeros(32))]), \
        {"x": rng.standard_normal((1, 32, 56, 56)).astype(np.float32)}
    yield "softmax", model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [f32("x", [12, 128, 128])],
                           [f32("y", [12, 128, 128])]), {"x": rng.standard_normal((12, 128, 128)).astype(np.float32)}
    yield "add_relu_4m", model([helper.make_node("Add", ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                               [f32("x", [1024, 4096])], [f32("y", [1024, 4096])], [const("b", np.ones(4096))]), \
        {"x": rng.standard_normal((1024, 4096)).astype(np.float32)}


MODEL_CASES = ("resnet18", "mobilenet_v2")


def _model_cases(only: "set | None"):
    """The whole-model cases as (name, ONNX path, feeds): exported once (random weights, fixed seeds) into a cache
    directory that a fresh clone finds again."""
    wanted = [m for m in MODEL_CASES if not only or m in only]
    if not wanted:
        return
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
    import models  # scripts/models.py
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "cuvil", "regress-models")
    for name in wanted:
        paths = {k: os.path.join(cache, f"{name}.{k}") for k in ("onnx", "input.npy")}
        if not all(os.path.exists(p) for p in paths.values()):
            paths = models.export(name, cache)
        yield name, paths["onnx"], {"input": np.load(paths["input.npy"])}


def machine_key(threads: int) -> str:
    """The kind of machine a baseline holds for: the CPU's model name, a hash of its feature flags (virtual
    machines often report a bare "AMD EPYC": the flags tell one generation from another) and the threads."""
    import hashlib
    cpu, flags = platform.processor() or "cpu", ""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
        flags = next(line.split(":", 1)[1].strip() for line in info if line.startswith("flags"))
    except (OSError, StopIteration):
        pass
    tag = hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9]+", "_", cpu).strip("_") + f"-{tag}-t{threads}"


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def measure(rounds: int, calls: int, threads: int, inject: dict[str, float], only: "set | None" = None) -> dict:
    import onnx
    import onnxruntime as ort

    import cuvil
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for name, m, feeds in _models():
            if only and name not in only:
                continue
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(m, path)
            cases.append((name, path, feeds))
        for name, path, feeds in cases + list(_model_cases(only)):
            cv = cuvil.load_onnx(path, threads=threads)
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            # ONNX Runtime's workers spin after each call by default: on a small machine they would still hold the
            # cores during Cuvil's next calls (and Cuvil's, through GOMP_SPINCOUNT, spin only briefly).
            so.add_session_config_entry("session.intra_op.allow_spinning", os.environ.get("CUVIL_BENCH_ORT_SPIN", "0"))
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            args = list(feeds.values())
            for _ in range(3):
                cv(*args)
                sess.run(None, feeds)
            extra = 0.0
            if name in inject:  # a slowdown of this case's Cuvil calls, as a fraction of their time
                t0 = time.perf_counter()
                for _ in range(calls):
                    cv(*args)
                extra = inject[name] * (time.perf_counter() - t0) / calls
            ratios = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                for _ in range(calls):
                    cv(*args)
                    if extra:
                        _spin(extra)
                t1 = time.perf_counter()
                for _ in range(calls):
                    sess.run(None, feeds)
                t2 = time.perf_counter()
                ratios.append((t1 - t0) / (t2 - t1))
            out[name] = summarize(ratios)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--min-threshold", type=float, default=0.05)
    ap.add_argument("--update-baseline", action="store_true")
    ap.add_argument("--baseline-from-history", type=int, metavar="N",
                    help="write the baseline from this machine's last N runs without --inject (no measuring)")
    ap.add_argument("--inject", action="append", default=[], metavar="CASE=PERCENT")
    ap.add_argument("--only", action="append", default=[], metavar="CASE")
    ap.add_argument("--data-dir", default=DATA, help="where baselines and history live (default bench/regress)")
    ap.add_argument("--report-only", action="store_true", help="print the comparison, exit 0 even on regressions")
    ap.add_argument("--no-confirm", dest="confirm", action="store_false",
                    help="fail on the first measurement (default: measure a regressed case again to confirm)")
    ap.add_argument("--if-baseline", action="store_true",
                    help="on a machine without a baseline, report the measurement and exit 0 (CI on other machines)")
    ap.add_argument("--html", metavar="PATH", help="write this machine's history as an HTML chart and exit")
    a = ap.parse_args(argv)
    key = machine_key(a.threads)
    os.makedirs(a.data_dir, exist_ok=True)
    base_path = os.path.join(a.data_dir, f"baseline-{key}.json")
    hist_path = os.path.join(a.data_dir, f"history-{key}.jsonl")
    if a.html:
        import regress_html
        regress_html.write(a.html, key, _read_history(hist_path),
                           json.load(open(base_path))["cases"] if os.path.exists(base_path) else {})
        print(f"history chart written: {a.html}")
        return 0
    if a.baseline_from_history:
        runs = [r for r in _read_history(hist_path) if not r.get("inject")][-a.baseline_from_history:]
        if not runs:
            print(f"no unchanged runs in {hist_path}", file=sys.stderr)
            return 2
        cases = baseline_from_runs(runs)
        with open(base_path, "w") as f:
            json.dump({"machine": key, "runs": len(runs), "cases": cases}, f, indent=1)
        for name, c in cases.items():
            print(f"{name:14s} ratio {c['ratio']:.3f}  spread {100 * c['spread']:.1f} %  between runs "
                  f"{100 * c['run_spread']:.1f} % ({c['runs']} runs)")
        print(f"baseline written: {base_path}")
        return 0
    inject = {k: float(v) / 100 for k, v in (s.split("=", 1) for s in a.inject)}
    current = measure(a.rounds, a.calls, a.threads, inject, set(a.only) or None)
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "inject": a.inject, "cases": current}
    if a.update_baseline:
        _append(hist_path, dict(record, baseline=True))
        with open(base_path, "w") as f:
            json.dump({"machine": key, "cases": current}, f, indent=1)
        for name, c in current.items():
            print(f"{name:14s} ratio {c['ratio']:.3f}  spread {100 * c['spread']:.1f} %")
        print(f"baseline written: {base_path}")
        return 0
    if not os.path.exists(base_path):
        for name, c in current.items():
            print(f"{name:14s} ratio {c['ratio']:.3f}  spread {100 * c['spread']:.1f} %")
        print(f"no baseline for this machine ({base_path}): run with --update-baseline first", file=sys.stderr)
        return 0 if a.if_baseline else 2
    with open(base_path) as f:
        baseline = json.load(f)["cases"]
    rows = compare(baseline, current, a.min_threshold)
    _print(rows)
    bad = [r["case"] for r in rows if r["status"] == "regressed"]
    if bad and a.confirm:  # once more, with twice the rounds: only a slowdown that persists fails
        print(f"confirming {', '.join(bad)} with {2 * a.rounds} rounds")
        again = measure(2 * a.rounds, a.calls, a.threads, inject, set(bad))
        current.update(again)
        rows = compare(baseline, again, a.min_threshold)
        _print(rows)
        bad = [r["case"] for r in rows if r["status"] == "regressed"]
    _append(hist_path, dict(record, regressed=bad))
    if bad:
        print(f"REGRESSED: {', '.join(bad)}")
    return 1 if bad and not a.report_only else 0


def _print(rows: list[dict]) -> None:
    print(f"{'case':14s} {'ratio':>7s} {'base':>7s} {'change':>8s} {'thresh':>7s} {'spread':>7s}  status")
    for r in rows:
        if r["status"] == "new":
            print(f"{r['case']:14s} {r['ratio']:7.3f} {'-':>7s} {'-':>8s} {'-':>7s} {100 * r['spread']:6.1f}%  new")
            continue
        print(f"{r['case']:14s} {r['ratio']:7.3f} {r['base_ratio']:7.3f} {100 * r['change']:+7.1f}% "
              f"{100 * r['threshold']:6.1f}% {100 * r['spread']:6.1f}%  {r['status']}")


def _append(path: str, record: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _read_history(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
