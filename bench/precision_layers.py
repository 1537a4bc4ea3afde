"""Per-layer times of a model (ResNet-50 by default; --model as bench/precision_bench.py's) in Cuvil against
OpenVINO at one precision (issue 28): Cuvil's profile
(`compiled.profile`) beside OpenVINO's own counters (PERF_COUNT, `request.profiling_info`), medians over
--iters profiled runs each, alternated; totals per op/implementation, then the convolutions and the classifier
side by side in execution order (both run them in the model's order), then the rest.

    $(scripts/python_env.sh)/bin/python bench/precision_layers.py [--precision int8|bf16|fp32] [--threads 2]
                                                                  [--iters 10] [--model resnet50|mobilenet_v2|
                                                                                bert_base|minilm]

int8: Cuvil calibrated by cuvil.compile on 8 random samples, OpenVINO quantized by NNCF on the same samples
(as bench/precision_bench.py). CUVIL_IGNORE_LOAD=1 is set (both engines on exactly --threads threads). Per-layer
wall times on a loaded machine mean little at two threads: run it when the load allows, and report the load it
prints. Not a test: nothing asserts.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")

import torch  # noqa: E402

import cuvil  # noqa: E402
from peers import export_onnx  # noqa: E402
from precision_bench import calibration_samples, model_and_inputs  # noqa: E402

PRODUCTS_CUVIL = ("Conv", "FusedConv", "MatMul", "Gemm", "FusedMatMul")
PRODUCTS_OV = ("Convolution", "GroupConvolution", "FullyConnected", "FullyConnectedQuantizedLegacy", "MatMul")


def load() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def openvino_request(path, calib, precision, threads):
    import openvino as ov
    core = ov.Core()
    model = core.read_model(path)
    cfg = {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
           "PERF_COUNT": "YES", "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"}
    if precision == "int8":
        import nncf
        names = {i.get_any_name() for i in model.inputs}
        data = nncf.Dataset([{k: v.numpy() for k, v in s.items() if k in names} for s in calib])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = nncf.quantize(model, data, subset_size=len(calib))
    cm = core.compile_model(model, "CPU", cfg)
    return cm, cm.create_infer_request()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", default="int8", choices=("fp32", "bf16", "int8"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--stat", default="median", choices=("median", "min"),
                    help="per layer over the runs; min is steadier on a loaded machine (preemption only adds)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, inputs = model_and_inputs(a.model)
    positional = list(inputs) == ["x"]
    args = tuple(inputs.values())
    calib = calibration_samples(inputs, 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{a.model}.onnx")
        if not export_onnx(model, args, inputs, positional, path):
            raise SystemExit("ONNX export failed")
        extra = {"calibration": [tuple(s.values()) for s in calib]} if a.precision == "int8" else {}
        c = cuvil.compile(model, args if positional else (), None if positional else inputs, threads=a.threads,
                          precision=a.precision, **extra)
        cm, req = openvino_request(path, calib, a.precision, a.threads)
    names = {i.get_any_name() for i in cm.inputs}
    feed = {k: v.numpy() for k, v in inputs.items() if k in names}

    def run():
        return c(*args) if positional else c(**inputs)

    def profile():
        return c.profile(*args) if positional else c.profile(**inputs)

    for _ in range(3):
        run()
        req.infer(feed)
    cu_runs, ov_runs, cu_total, ov_total = [], [], [], []
    for _ in range(a.iters):
        t = time.perf_counter()
        run()
        cu_total.append(time.perf_counter() - t)
        t = time.perf_counter()
        req.infer(feed)
        ov_total.append(time.perf_counter() - t)
        cu_runs.append([(r.op, r.ms, r.impl) for r in profile().nodes])
        req.infer(feed)
        ov_runs.append([(p.node_name, p.node_type, p.exec_type, p.real_time.total_seconds() * 1e3)
                        for p in req.profiling_info if p.status == p.Status.EXECUTED])
    stat = min if a.stat == "min" else statistics.median
    cu = [(op, stat(run[i][1] for run in cu_runs), impl) for i, (op, _, impl) in enumerate(cu_runs[0])]
    ovr = [(name, kind, impl, stat(run[i][3] for run in ov_runs))
           for i, (name, kind, impl, _) in enumerate(ov_runs[0])]
    print(f"== {a.model} {a.precision}, {a.threads} threads, {a.iters} runs: end to end cuvil "
          f"{stat(cu_total) * 1e3:.2f} ms, openvino {stat(ov_total) * 1e3:.2f} ms ({a.stat}s); "
          f"kernels summed cuvil {sum(r[1] for r in cu):.2f} ms, openvino {sum(r[3] for r in ovr):.2f} ms "
          f"(load {load()})")
    for title, rows in (("cuvil by op / implementation", [(f"{r[0]} {r[2]}", r[1]) for r in cu]),
                        ("openvino by type / implementation", [(f"{r[1]} {r[2]}", r[3]) for r in ovr])):
        totals: dict[str, float] = {}
        for k, v in rows:
            totals[k] = totals.get(k, 0.0) + v
        print(title)
        for k, v in sorted(totals.items(), key=lambda kv: -kv[1]):
            print(f"  {v:8.3f} ms  {k}")
    cuc = [r for r in cu if r[0] in PRODUCTS_CUVIL]
    ovc = [r for r in ovr if r[1] in PRODUCTS_OV]
    print(f"convolutions and products in order (cuvil {len(cuc)}, openvino {len(ovc)}): ms, and cuvil / openvino")
    for i in range(max(len(cuc), len(ovc))):
        cu_ms, cu_impl = (cuc[i][1], cuc[i][2]) if i < len(cuc) else (0.0, "")
        ov_ms, ov_impl, name = (ovc[i][3], ovc[i][2], ovc[i][0]) if i < len(ovc) else (0.0, "", "")
        ratio = f"{cu_ms / ov_ms:5.2f}" if ov_ms > 0 else "    -"
        print(f"  {i:2d} {cu_ms:7.3f} {cu_impl[:40]:40s} | {ov_ms:7.3f} {ov_impl[:28]:28s} {ratio}  {name[:48]}")
    print("other cuvil kernels")
    for op, ms, impl in cu:
        if op not in PRODUCTS_CUVIL:
            print(f"  {ms:7.3f} {op} {impl}")
    print("other openvino nodes")
    for name, kind, impl, ms in ovr:
        if kind not in PRODUCTS_OV:
            print(f"  {ms:7.3f} {kind} {impl} {name[:60]}")


if __name__ == "__main__":
    main()
