"""Integer / QOperator ONNX models (issue 23) on Cuvil beside ONNX Runtime: the corpus' resnet18_int8_qoperator
(quantize_static QOperator) and minilm_int8_dynamic (quantize_dynamic), and torchvision ResNet-18 with its
convolutions quantized by quantize_dynamic (ConvInteger; built here). Each round calls Cuvil then ORT once; the
time is the calling thread's CPU time (robust on a loaded machine), medians after two warm-up rounds, and the
ratio Cuvil / ORT. Also prints each model's output difference to ORT and Cuvil's per-op kernel times.

    $(scripts/python_env.sh)/bin/python bench/integer_ops_bench.py [--threads 1] [--rounds 30] [--models r18,mini,conv]

Not a test: nothing asserts (tests/python/test_integer_ops.py does).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def corpus_model(name):
    import model_corpus

    root = model_corpus.build(name, verbose=False)
    import json

    item = json.loads((root / "manifest.json").read_text())[name]
    feeds, _ = model_corpus.load_io(item)
    return item["model"], feeds


def conv_dynamic(tmp):
    import torch
    import torchvision
    from onnxruntime.quantization import QuantType, quantize_dynamic

    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)
    src, dst = os.path.join(tmp, "r18.onnx"), os.path.join(tmp, "r18_conv_dynamic.onnx")
    torch.onnx.export(torchvision.models.resnet18().eval(), x, src, opset_version=13, input_names=["input"],
                      dynamo=False)
    quantize_dynamic(src, dst, op_types_to_quantize=["Conv", "MatMul", "Gemm"], weight_type=QuantType.QInt8)
    return dst, {"input": x.numpy()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--models", default="r18,mini,conv")
    args = ap.parse_args()
    import onnxruntime as ort

    import cuvil

    with tempfile.TemporaryDirectory() as tmp:
        makers = {"r18": lambda: corpus_model("resnet18_int8_qoperator"),
                  "mini": lambda: corpus_model("minilm_int8_dynamic"), "conv": lambda: conv_dynamic(tmp)}
        for name in args.models.split(","):
            path, feeds = makers[name]()
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            model = cuvil.load_onnx(str(path), threads=args.threads)
            want = sess.run(None, feeds)[0]
            got = model(**feeds)
            got = np.asarray(got[0] if isinstance(got, (list, tuple)) else got)
            diff = np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-30)
            cu, ot = [], []
            for _ in range(args.rounds + 2):
                t = time.thread_time(); model(**feeds); cu.append(time.thread_time() - t)
                t = time.thread_time(); sess.run(None, feeds); ot.append(time.thread_time() - t)
            c, o = 1e3 * np.median(cu[2:]), 1e3 * np.median(ot[2:])
            print(f"{name}: cuvil {c:.2f} ms, onnxruntime {o:.2f} ms, ratio {c / o:.2f}; rel L2 to ORT {diff:.1e}; "
                  f"load {open('/proc/loadavg').read().split()[0]}")
            per_op = {}
            for r in model.profile(**feeds).nodes:
                key = (r.op, r.impl.split(":")[0] + ":" + r.impl.split(":")[1] if ":" in r.impl else r.impl)
                per_op[key] = per_op.get(key, 0.0) + r.ms
            for (op, impl), ms in sorted(per_op.items(), key=lambda kv: -kv[1])[:6]:
                print(f"    {ms:7.3f} ms  {op:28s} {impl}")


if __name__ == "__main__":
    main()
