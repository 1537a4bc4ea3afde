"""Where one model's time goes in Cuvil beside OpenVINO (fp32, or both bf16), for any model of bench/torch2_bench.py: Cuvil's
profile (`compiled.profile`) and OpenVINO's own counters (PERF_COUNT, `request.profiling_info`), medians over --iters
profiled runs each, alternated; totals per op / implementation for each engine (with node counts), and the end to
end time of each (CPU time with --cpu-time: robust on a loaded machine, use --threads 1).

    $(scripts/python_env.sh)/bin/python bench/layers_vs_openvino.py whisper_encoder [--threads 1] [--iters 5]
        [--cpu-time] [--nodes] [--precision bf16]

Per-kernel times are wall times: on a loaded machine they are inflated alike for both engines, so compare shares
and ratios, not milliseconds. --nodes also lists every node of both in execution order. Not a test: nothing
asserts. (bench/precision_layers.py does the same for ResNet-50 across precisions.)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")
os.environ.setdefault("CUVIL_MODEL_CACHE", "off")

import torch  # noqa: E402

import cuvil  # noqa: E402
from peers import export_onnx  # noqa: E402
from torch2_bench import model_and_inputs  # noqa: E402


def totals(rows) -> list[tuple[str, float, int]]:
    """(key, summed ms, count) per key, largest first."""
    ms: dict[str, float] = {}
    count: dict[str, int] = {}
    for key, v in rows:
        ms[key] = ms.get(key, 0.0) + v
        count[key] = count.get(key, 0) + 1
    return sorted(((k, v, count[k]) for k, v in ms.items()), key=lambda r: -r[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a model name of bench/torch2_bench.py (whisper_encoder, bert, timm/resnet50, ...)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true", help="end-to-end times as this process's CPU time")
    ap.add_argument("--nodes", action="store_true", help="also every node of both engines in order")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="both engines' (Cuvil's precision=, OpenVINO's INFERENCE_PRECISION_HINT)")
    a = ap.parse_args()
    import openvino as ov
    torch.set_num_threads(a.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model, inputs = model_and_inputs(a.model)
    positional = list(inputs) == ["x"]
    args = tuple(inputs.values())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        if not export_onnx(model, args, inputs, positional, path):
            raise SystemExit("ONNX export failed")
        c = cuvil.compile(model, args if positional else (), None if positional else inputs, threads=a.threads,
                          precision=a.precision)
        cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": str(a.threads), "NUM_STREAMS": "1",
                                                   "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": "YES",
                                                   "INFERENCE_PRECISION_HINT": a.precision.replace("fp", "f")})
    req = cm.create_infer_request()
    names = {i.get_any_name() for i in cm.inputs}
    feed = {k: v.numpy() for k, v in inputs.items() if k in names}
    run_cuvil = (lambda: c(*args)) if positional else (lambda: c(**inputs))
    profile = (lambda: c.profile(*args)) if positional else (lambda: c.profile(**inputs))
    clock = time.process_time if a.cpu_time else time.perf_counter
    for _ in range(2):
        run_cuvil()
        req.infer(feed)
    cu_runs, ov_runs, cu_total, ov_total = [], [], [], []
    for _ in range(a.iters):
        t = clock()
        run_cuvil()
        cu_total.append(clock() - t)
        t = clock()
        req.infer(feed)
        ov_total.append(clock() - t)
        cu_runs.append([(r.op, r.ms, r.impl) for r in profile().nodes])
        req.infer(feed)
        ov_runs.append([(p.node_name, p.node_type, p.exec_type, p.real_time.total_seconds() * 1e3)
                        for p in req.profiling_info if p.status == p.Status.EXECUTED])
    cu = [(op, statistics.median(run[i][1] for run in cu_runs), impl) for i, (op, _, impl) in enumerate(cu_runs[0])]
    ovr = [(name, kind, impl, statistics.median(run[i][3] for run in ov_runs))
           for i, (name, kind, impl, _) in enumerate(ov_runs[0])]
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"== {a.model} {a.precision}, {a.threads} threads, {a.iters} runs, load {load}: end to end "
          f"({'CPU' if a.cpu_time else 'wall'}) cuvil {statistics.median(cu_total) * 1e3:.2f} ms, openvino "
          f"{statistics.median(ov_total) * 1e3:.2f} ms; kernels summed (wall) cuvil {sum(r[1] for r in cu):.2f} ms, "
          f"openvino {sum(r[3] for r in ovr):.2f} ms")
    for title, rows in (("cuvil by op / implementation", [(f"{r[0]} {r[2]}", r[1]) for r in cu]),
                        ("openvino by type / implementation", [(f"{r[1]} {r[2]}", r[3]) for r in ovr])):
        print(title)
        for key, ms, n in totals(rows):
            print(f"  {ms:9.3f} ms  x{n:<3d} {key}")
    if a.nodes:
        print("cuvil nodes")
        for op, ms, impl in cu:
            print(f"  {ms:8.3f} {op} {impl}")
        print("openvino nodes")
        for name, kind, impl, ms in ovr:
            print(f"  {ms:8.3f} {kind} {impl} {name[:60]}")


if __name__ == "__main__":
    main()
