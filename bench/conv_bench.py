"""Convolutional models against ONNX Runtime and OpenVINO fp32, alternated call by call in one process.
Batch 1. Two measures: wall-clock medians at --threads (the machine must be quiet; CUVIL_IGNORE_LOAD=1 keeps
Cuvil's load check out), and with --cpu-time, per-call process CPU time at 1 thread (robust on a loaded machine:
Cuvil and ORT then run on the calling thread alone; OpenVINO, which runs on its own worker, is left out). Prints ratios to ORT and OpenVINO per model and their
geometric mean.

    $(scripts/python_env.sh)/bin/python bench/conv_bench.py [--models mobilenet_v2,...] [--iters 30]
        [--threads 2] [--cpu-time]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import cuvil  # noqa: E402
from peers import openvino_runner, ort_runner  # noqa: E402

os.environ.setdefault("CUVIL_MODEL_CACHE", "off")

TORCHVISION = ["mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "shufflenet_v2_x1_0", "densenet121",
               "squeezenet1_1", "efficientnet_b0", "resnet18", "regnet_y_400mf"]


def export(name: str, path: str) -> dict:
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)().eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), path, input_names=["x"], opset_version=17, dynamo=False)
    return {"x": x.numpy()}


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def measure(fns: dict, iters: int, cpu: bool) -> dict:
    # The calling thread's CPU time: at one thread Cuvil and ORT compute on it, and another engine's idle workers
    # (OpenVINO's) cannot add to it; OpenVINO computes on its own thread, so --cpu-time leaves it out.
    clock = time.thread_time if cpu else time.perf_counter
    times = {k: [] for k in fns}
    for f in fns.values():
        for _ in range(3):
            f()
    for _ in range(iters):
        for k, f in fns.items():
            t = clock()
            f()
            times[k].append(clock() - t)
    return {k: 1e3 * statistics.median(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(TORCHVISION))
    ap.add_argument("--onnx", default="", help="extra ONNX files, PATH[:NxCxHxW] comma-separated (one float input each)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cpu-time", action="store_true", help="1 thread, per-call CPU time of the calling thread (no OpenVINO)")
    ap.add_argument("--no-openvino", action="store_true")
    args = ap.parse_args()
    threads = 1 if args.cpu_time else args.threads
    cache = os.path.expanduser("~/.cache/cuvil/conv-bench")
    os.makedirs(cache, exist_ok=True)
    items = []
    for name in filter(None, args.models.split(",")):
        path = os.path.join(cache, f"{name}.onnx")
        feeds_path = path + ".x.npy"
        if not os.path.exists(path) or not os.path.exists(feeds_path):
            np.save(feeds_path, export(name, path)["x"])
        items.append((name, path, {"x": np.load(feeds_path)}))
    for spec in filter(None, args.onnx.split(",")):
        import onnx
        path, _, shape = spec.partition(":")  # PATH[:1x3x96x160], the shape of an input with open dims
        g = onnx.load(path).graph
        init = {i.name for i in g.initializer}
        rng = np.random.default_rng(0)
        feeds = {}
        for i in g.input:
            if i.name in init:
                continue
            dims = [int(d) for d in shape.split("x")] if shape else [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
        items.append((os.path.splitext(os.path.basename(path))[0], path, feeds))
    mode = "1-thread CPU time of the calling thread" if args.cpu_time else f"wall time, {threads} threads"
    print(f"batch 1, {mode}, {args.iters} alternated rounds, medians in ms; load {os.getloadavg()[0]:.1f}")
    print("| model | cuvil | ORT | OpenVINO | cuvil/ORT | cuvil/OV | rel. L2 vs ORT |")
    print("|---|---|---|---|---|---|---|")
    ratios_ort, ratios_ov = [], []
    for name, path, feeds in items:
        cu = cuvil.load_onnx(path, threads=threads)
        names = list(feeds)
        fns = {"cuvil": lambda cu=cu, f=feeds, n=names: cu(*[f[k] for k in n]),
               "ort": ort_runner(path, feeds, threads)}
        if not args.no_openvino and not args.cpu_time:
            try:
                fns["ov"] = openvino_runner(path, feeds, threads)
            except Exception as e:  # noqa: BLE001
                print(f"  OpenVINO cannot run {name}: {e}")
        got = fns["cuvil"]()
        got = got[0] if isinstance(got, (tuple, list)) else got
        err = rel_l2(got, fns["ort"]()[0])
        med = measure(fns, args.iters, args.cpu_time)
        r_ort = med["cuvil"] / med["ort"]
        ratios_ort.append(r_ort)
        ov = med.get("ov", float("nan"))
        r_ov = med["cuvil"] / ov if "ov" in med else float("nan")
        if "ov" in med:
            ratios_ov.append(r_ov)
        print(f"| {name} | {med['cuvil']:.2f} | {med['ort']:.2f} | {ov:.2f} | {r_ort:.2f} | {r_ov:.2f} | {err:.1e} |",
              flush=True)

    def gm(v):
        return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")
    print(f"geometric mean: cuvil/ORT {gm(ratios_ort):.3f}, cuvil/OpenVINO {gm(ratios_ov):.3f}; "
          f"load at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
