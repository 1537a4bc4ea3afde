"""The Python half of bench/run_models.sh (run with Debian's /usr/bin/python3, which has torch).

    bench_models.py export OUT_DIR             writes OUT_DIR/<model>.onnx for every benchmark model (kept if present)
    bench_models.py table RESULTS.jsonl [--iters-big N] [--iters-small N]
                                               times PyTorch eager on the same models and prints one table next to
                                               the ORT / Cuvil results of build/bin/cuvil_bench_models --json

Models (batch 1, fixed seeds, random weights): ResNet-50, ResNet-18, MobileNetV2 (scripts/models.py), a
BERT-base-like encoder (nn.TransformerEncoder: 12 layers, hidden 768, 12 heads, FFN 3072, GELU, seq 128; input is
the embedded sequence [1, 128, 768]) and the MLP Linear(784,128)-ReLU-Linear(128,10).
Not a test: nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import models  # noqa: E402  (scripts/models.py)

VISION = ["resnet50", "resnet18", "mobilenet_v2"]
ORDER = VISION + ["bert_base", "mlp"]


def build_bert() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, dropout=0.0,
                                             activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False).eval()
    # TransformerEncoder deep-copies one layer, so every layer would hold the same weights (and the exporter would
    # store them once): give each its own, BERT-style N(0, 0.02); LayerNorms stay at 1 / 0.
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" not in pname:
                p.normal_(0.0, 0.02)
    return model


def build_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()


def build(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    if name in VISION:
        return models.build(name), torch.randn(1, 3, 224, 224, generator=g)
    if name == "bert_base":
        return build_bert(), torch.randn(1, 128, 768, generator=g)
    if name == "mlp":
        return build_mlp(), torch.randn(1, 784, generator=g)
    raise KeyError(name)


def export_all(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for name in ORDER:
        path = os.path.join(out_dir, f"{name}.onnx")
        if os.path.exists(path):
            print(f"{path} (kept)")
            continue
        if name in VISION:
            models.export(name, out_dir)
        else:
            model, x = build(name)
            # Autograd stays enabled: under no_grad nn.MultiheadAttention takes a fused fast path that
            # torch.onnx.export cannot export.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"],
                                  opset_version=14, dynamo=False)
        print(path)


def time_torch(name: str, iters: int, warmup: int, torchscript: bool) -> tuple[float, float]:
    """PyTorch eager, or TorchScript traced + frozen + optimize_for_inference (PyTorch's own inference path)."""
    model, x = build(name)
    with torch.no_grad():
        if torchscript:
            model = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, x).eval()))
        for _ in range(warmup):
            model(x)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(x)
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def table(results_path: str, iters_big: int, iters_small: int) -> None:
    torch.set_num_threads(2)
    rows = {}
    with open(results_path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                rows[r["model"]] = r
    version = next((r["ort_version"] for r in rows.values() if "ort_version" in r), "?")
    print(f"\nbatch 1; ms (median / min); ORT {version} via C API (2 intra-op threads, opt level all); "
          f"Cuvil -O1 (2 threads), alternated with ORT in blocks; then PyTorch {torch.__version__} "
          f"({torch.get_num_threads()} threads, no_grad): eager and TorchScript (trace, freeze, optimize_for_inference)")
    hdr = (f"{'model':<13} {'iters':>5} {'rel_l2':>9} {'ORT':>17} {'Cuvil':>19} {'cuvil/ort':>9} "
           f"{'torch eager':>17} {'TorchScript':>17} {'cuvil/ts':>9}")
    print(hdr)
    print("-" * len(hdr))
    for name in ORDER:
        r = rows.get(name)
        if r is None:
            print(f"{name:<13} (not run)")
            continue
        big = name != "mlp"
        timed = {}
        for ts in (False, True):
            try:
                timed[ts] = time_torch(name, iters_big if big else iters_small, 1 if big else 20, ts)
            except Exception as e:  # noqa: BLE001  (report and go on)
                timed[ts] = e
        cell = {ts: (f"{v[0]:8.3f} /{v[1]:8.3f}" if isinstance(v, tuple) else f"error: {v}") for ts, v in timed.items()}
        if "error" in r:
            print(f"{name:<13} harness error: {r['error']}   torch eager {cell[False]}   TorchScript {cell[True]}")
            continue
        ts_ratio = f"{r['cuvil_median_ms'] / timed[True][0]:8.2f}x" if isinstance(timed[True], tuple) else "-"
        print(f"{name:<13} {r['iters']:>5} {r['rel_l2']:9.2e} {r['ort_median_ms']:8.3f} /{r['ort_min_ms']:8.3f} "
              f"{r['cuvil_median_ms']:9.3f} /{r['cuvil_min_ms']:9.3f} {r['ratio']:8.2f}x {cell[False]} {cell[True]} "
              f"{ts_ratio}")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("out_dir")
    t = sub.add_parser("table")
    t.add_argument("results")
    t.add_argument("--iters-big", type=int, default=20)
    t.add_argument("--iters-small", type=int, default=500)
    a = p.parse_args()
    if a.cmd == "export":
        export_all(a.out_dir)
    else:
        table(a.results, a.iters_big, a.iters_small)


if __name__ == "__main__":
    main()
