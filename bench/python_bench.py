"""cuvil.compile'd models against PyTorch eager and TorchScript (frozen + optimize_for_inference), batch 1.

    PYTHONPATH=python /usr/bin/python3 bench/python_bench.py [--models resnet50,mobilenet_v2,bert,mlp]
                                                            [--iters N] [--quick]

Runs are alternated (eager, TorchScript, Cuvil, eager, ...) so that drift in machine load hits all three alike;
the table shows medians and Cuvil's time relative to each peer (ratio > 1: Cuvil is slower). Every Cuvil output is
also checked against eager (relative L2 error). A second table measures the Python call overhead on the MLP:
the time of compiled(x) minus its kernels' own time from compiled.profile(x), next to an estimate of PyTorch
eager's overhead (the call time of the same modules made 1 wide, whose kernels take next to nothing).

Not a test: nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
import warnings

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import cuvil  # noqa: E402

# Compile times here are real compiles: the compiled-model cache (cuvil.cache) stays out unless asked for.
os.environ.setdefault("CUVIL_MODEL_CACHE", "off")


# ---- models (fixed seeds, random weights: nothing is downloaded)


def build_resnet50():
    import models  # scripts/models.py: torchvision models with randomized BatchNorm statistics
    return models.build("resnet50"), torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))


def build_mobilenet_v2():
    import models
    return models.build("mobilenet_v2"), torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))


def build_bert():
    """A BERT-base-like encoder: 12 post-norm layers, hidden 768, 12 heads, FFN 3072, GELU; sequence 128."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, dropout=0.1,
                                             activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False).eval()
    return model, torch.randn(1, 128, 768, generator=torch.Generator().manual_seed(2))


def build_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    return model, torch.randn(1, 784, generator=torch.Generator().manual_seed(2))


MODELS = {"resnet50": build_resnet50, "mobilenet_v2": build_mobilenet_v2, "bert": build_bert, "mlp": build_mlp}
# Timed runs per model by default and with --quick (eager BERT takes seconds per call on Debian's BLAS).
DEFAULT_ITERS = {"resnet50": 20, "mobilenet_v2": 30, "bert": 3, "mlp": 500}
QUICK_ITERS = {"resnet50": 3, "mobilenet_v2": 5, "bert": 1, "mlp": 50}


# ---- runners


def torchscript_runner(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            scripted = torch.jit.script(model)
        except Exception:  # noqa: BLE001 - fall back like cuvil.compile does
            with torch.no_grad():
                scripted = torch.jit.trace(model, (x,), check_trace=False)
        opt = torch.jit.optimize_for_inference(torch.jit.freeze(scripted.eval()))
    return lambda: opt(x)


def first_tensor(y):
    while isinstance(y, (tuple, list)):
        y = y[0]
    return y


def time_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def short_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:160]


def bench_model(name: str, iters: int, warmup: int) -> dict:
    model, x = MODELS[name]()
    row = {"model": name, "iters": iters, "eager": None, "torchscript": None, "cuvil": None, "err": None,
           "notes": []}
    runners = {"eager": lambda: model(x)}
    with torch.no_grad():
        try:
            runners["torchscript"] = torchscript_runner(model, x)
        except Exception as e:  # noqa: BLE001
            row["notes"].append(f"TorchScript: {short_error(e)}")
        try:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = cuvil.compile(model, (x,))
            row["compile_s"] = time.perf_counter() - t0
            runners["cuvil"] = lambda: compiled(x)
        except Exception as e:  # noqa: BLE001
            row["notes"].append(f"Cuvil: {short_error(e)}")
        ref = first_tensor(model(x))
        if "cuvil" in runners:
            try:
                got = first_tensor(runners["cuvil"]())
                row["err"] = float(torch.linalg.norm((got - ref).double()) / torch.linalg.norm(ref.double()))
            except Exception as e:  # noqa: BLE001
                row["notes"].append(f"Cuvil run: {short_error(e)}")
                del runners["cuvil"]
        for _ in range(warmup):
            for fn in runners.values():
                fn()
        times: dict[str, list[float]] = {k: [] for k in runners}
        for _ in range(iters):
            for k, fn in runners.items():  # alternated
                times[k].append(time_call(fn))
    for k, ts in times.items():
        row[k] = statistics.median(ts)
    return row


def fmt_ms(v) -> str:
    return "n/a" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}")


def fmt_ratio(a, b) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}x"


def print_table(rows: list[dict]) -> None:
    head = (f"{'model':<13} {'iters':>5} {'eager ms':>10} {'TS ms':>10} {'cuvil ms':>10} {'cuvil/eager':>11} "
            f"{'cuvil/TS':>9} {'rel L2 err':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        err = "n/a" if r["err"] is None else f"{r['err']:.1e}"
        print(f"{r['model']:<13} {r['iters']:>5} {fmt_ms(r['eager']):>10} {fmt_ms(r['torchscript']):>10} "
              f"{fmt_ms(r['cuvil']):>10} {fmt_ratio(r['cuvil'], r['eager']):>11} "
              f"{fmt_ratio(r['cuvil'], r['torchscript']):>9} {err:>10}")
    for r in rows:
        if "compile_s" in r:
            print(f"  {r['model']}: cuvil.compile took {r['compile_s']:.1f} s")
        for n in r["notes"]:
            print(f"  {r['model']}: {n}")


# ---- Python call overhead (MLP, batch 1)


def median_ms(fn, calls: int) -> float:
    return statistics.median(time_call(fn) for _ in range(calls))


def call_overhead(calls: int) -> None:
    model, x = build_mlp()
    compiled = cuvil.compile(model, (x,))
    xn = x.numpy()
    for _ in range(50):
        compiled(x)
    call = median_ms(lambda: compiled(x), calls)
    call_np = median_ms(lambda: compiled(xn), calls)
    native = median_ms(lambda: compiled._model.run([xn]), calls)
    kernels = statistics.median(compiled.profile(x).total_ms for _ in range(max(calls // 10, 20)))

    # PyTorch has no per-kernel timer without the profiler's own (larger) overhead, so eager's overhead is
    # estimated on the same three modules made 1 wide, whose kernels take next to nothing.
    torch.manual_seed(0)
    tiny = torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.ReLU(), torch.nn.Linear(1, 1)).eval()
    xt = torch.randn(1, 1)
    tiny_c = cuvil.compile(tiny, (xt,))
    with torch.no_grad():
        for _ in range(50):
            model(x)
            tiny(xt)
        eager = median_ms(lambda: model(x), calls)
        eager_tiny = median_ms(lambda: tiny(xt), calls)
    tiny_call = median_ms(lambda: tiny_c(xt), calls)
    tiny_kernels = statistics.median(tiny_c.profile(xt).total_ms for _ in range(max(calls // 10, 20)))

    us = 1e3
    print(f"\nPython call overhead, MLP 784-128-10, batch 1 (medians of {calls} calls)")
    print(f"  cuvil  compiled(x), torch in/out     {call * us:8.1f} us")
    print(f"  cuvil  compiled(x), numpy in/out     {call_np * us:8.1f} us")
    print(f"  cuvil  _C.Model.run (bindings only)  {native * us:8.1f} us")
    print(f"  cuvil  kernels (profile() total)     {kernels * us:8.1f} us")
    print(f"  => cuvil overhead per call: {(call - kernels) * us:.1f} us with torch tensors, "
          f"{(call_np - kernels) * us:.1f} us with numpy (Python layer {(call - native) * us:.1f} us, "
          f"bindings + executor {(native - kernels) * us:.1f} us)")
    print(f"  eager  model(x)                      {eager * us:8.1f} us")
    print(f"  same modules 1 wide (Linear(1,1)-ReLU-Linear(1,1)), kernels ~0:")
    print(f"  eager  tiny(x)                       {eager_tiny * us:8.1f} us  => eager overhead estimate")
    print(f"  cuvil  compiled_tiny(x), torch       {tiny_call * us:8.1f} us  (kernels {tiny_kernels * us:.1f} us: "
          f"overhead {(tiny_call - tiny_kernels) * us:.1f} us)")


def python_vs_cli(iters: int) -> None:
    """The same ONNX file timed through cuvil.load_onnx from Python and through `cuvil bench` (C++), alternating:
    Python should add only its call overhead on top of the same executor."""
    import json
    import subprocess
    import tempfile

    import models  # scripts/models.py
    cli = os.path.join(ROOT, "build", "bin", "cuvil")
    with tempfile.TemporaryDirectory() as d:
        paths = models.export("mobilenet_v2", d)
        compiled = cuvil.load_onnx(paths["onnx"])
        x = np.load(paths["input.npy"])
        compiled(x)
        py, cpp = [], []
        for _ in range(iters):
            compiled(x)  # one warm-up call per turn, as `cuvil bench --warmup 1` gets (the subprocess cools caches)
            py.append(time_call(lambda: compiled(x)))
            r = subprocess.run([cli, "bench", paths["onnx"], "--input", f"input={paths['input.npy']}", "--iters", "1",
                                "--warmup", "1", "--json"], capture_output=True, text=True, check=True)
            cpp.append(json.loads(r.stdout)["median_ms"])
    p, c = statistics.median(py), statistics.median(cpp)
    print(f"\nPython vs CLI, mobilenet_v2 ONNX, batch 1 ({iters} alternating runs each)")
    print(f"  cuvil.load_onnx(...)(x)  {p:9.3f} ms")
    print(f"  cuvil bench (C++)        {c:9.3f} ms")
    print(f"  Python / C++: {p / c:.3f}x")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--iters", type=int, default=None, help="timed runs per model (default: per model, small)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per runner first")
    p.add_argument("--quick", action="store_true", help="fewest runs: a smoke check of the numbers")
    p.add_argument("--overhead-calls", type=int, default=None, help="calls for the overhead medians")
    a = p.parse_args(argv)
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s): {', '.join(unknown)} (choose from {', '.join(MODELS)})")

    blas = next((part.split("=", 1)[1] for part in torch.__config__.show().replace(",", " ").split()
                 if part.startswith("BLAS_INFO=")), "?")
    print(f"cuvil {cuvil.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads, BLAS {blas}), "
          f"numpy {np.__version__}, batch 1")
    print()
    rows = []
    for name in names:
        iters = a.iters or (QUICK_ITERS if a.quick else DEFAULT_ITERS)[name]
        print(f"running {name} ({iters} timed runs each)...", flush=True)
        try:
            rows.append(bench_model(name, iters, a.warmup))
        except Exception as e:  # noqa: BLE001 - report and go on with the next model
            traceback.print_exc()
            rows.append({"model": name, "iters": iters, "eager": None, "torchscript": None, "cuvil": None,
                         "err": None, "notes": [f"failed: {short_error(e)}"]})
    print()
    print_table(rows)
    if "mlp" in names:
        call_overhead(a.overhead_calls or (300 if a.quick else 2000))
    if "mobilenet_v2" in names:
        python_vs_cli(3 if a.quick else 10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
