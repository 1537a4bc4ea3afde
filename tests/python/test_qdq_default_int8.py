"""ONNX models quantized to QDQ form run their quantized layers int8 at the default precision (issues 23, 28):
the model asks for int8 there, so it is not a silent lowering, and each such layer's reason says
"int8: QDQ in the model". Layers the model did not quantize stay f32; a model without QDQ runs f32 throughout.
precision="fp32" asked explicitly computes the QDQ graph exactly in f32 (as ONNX Runtime does with its graph
optimizations off). Checked against ONNX Runtime's int8 run within twice ORT's own difference to fp32 (the
tolerance of tests/python/test_int8.py), for u8 and s8 activations, per-channel and per-tensor weights, a CNN and
a transformer-like block; the .cuv artifact, the compile cache and the CLI keep the distinction."""
import os
import subprocess

import numpy as np
import pytest
import torch

import cuvil
from precision_util import machine_has_vnni, ort_qdq_model, rel_l2  # noqa: E402

ort = pytest.importorskip("onnxruntime")
ort_q = pytest.importorskip("onnxruntime.quantization")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QDQ_REASON = "int8: QDQ in the model"
F32_REASON = "fp32 asked: the model's QDQ layer computed in f32"
LAYERS = ("Conv", "FusedConv", "MatMul", "Gemm", "FusedMatMul")


def session(path, optimized=True):
    so = ort.SessionOptions()
    if not optimized:  # the QDQ graph as written: QuantizeLinear/DequantizeLinear in f32, no int8 kernels
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


class ConvNet(torch.nn.Module):
    """Odd sizes, a residual, a depthwise layer (kept f32 by the int8 kernels, with a reason), a classifier."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 24, 3, padding=1)
        self.c2 = torch.nn.Conv2d(24, 24, 3, padding=1)
        self.dw = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24)
        self.c3 = torch.nn.Conv2d(24, 40, 1, stride=2)
        self.fc = torch.nn.Linear(40, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y) + y)
        y = torch.relu(self.dw(y))
        y = torch.relu(self.c3(y))
        return self.fc(y.mean((2, 3)))


class Block(torch.nn.Module):
    """A transformer-like block: QKV-style products, softmax attention, LayerNorm, a GELU MLP."""

    def __init__(self, d=48):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.o = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)
        self.f1 = torch.nn.Linear(d, 4 * d)
        self.f2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) / 7.0, dim=-1) @ v
        y = self.ln(x + self.o(a))
        return y + self.f2(torch.nn.functional.gelu(self.f1(y)))


def quantized(tmp_path, net, shape, act, per_channel, name="net"):
    """(fp32 path, QDQ path) of `net` exported and quantized by ORT's quantize_static on random samples."""
    return ort_qdq_model(tmp_path, net, shape, act, per_channel, name)[:2]


def layer_rows(report):
    return [r for r in report if r["op"] in LAYERS]


def check_default_against_ort(f32, qdq, x, min_int8):
    ref32 = session(f32).run(None, {"x": x})[0]
    ref8 = session(qdq).run(None, {"x": x})[0]
    ort_err = rel_l2(ref8, ref32)
    m = cuvil.load_onnx(qdq, cache=False)
    got = np.asarray(m(x))
    report = m.precision_report(x)
    marked = [r for r in layer_rows(report) if r["reason"].startswith(QDQ_REASON)]
    assert len(marked) >= min_int8, report
    if machine_has_vnni():
        assert sum(r["precision"] == "int8" for r in marked) >= min_int8, report
    # nothing the model did not quantize runs int8
    assert all(r["precision"] != "int8" or r["reason"].startswith(QDQ_REASON) for r in report), report
    assert all(r["precision"] in ("fp32", "int8") for r in report), report
    err = rel_l2(got, ref8)
    print(f"{os.path.basename(qdq)}: ORT int8 vs fp32 {ort_err:.4f}, Cuvil default vs ORT int8 {err:.4f}")
    assert 0 < ort_err < 0.2
    assert err <= 2 * ort_err and rel_l2(got, ref32) <= 2 * ort_err
    # the same model at precision="int8": the same layers, the same arithmetic
    m8 = cuvil.load_onnx(qdq, precision="int8", cache=False)
    assert np.array_equal(np.asarray(m8(x)), got)
    return m, got, ref32, ort_err


@pytest.mark.parametrize("act,per_channel", [("QUInt8", True), ("QInt8", True), ("QUInt8", False),
                                             ("QInt8", False)])
def test_cnn_qdq_runs_int8_by_default(tmp_path, act, per_channel):
    f32, qdq = quantized(tmp_path, ConvNet(), (1, 3, 19, 21), act, per_channel)
    x = np.random.default_rng(7).standard_normal((1, 3, 19, 21)).astype(np.float32)
    # c1, c2 (with its residual), c3 and fc; the depthwise layer too where its u8 activations link (on VNNI), else
    # f32 with the reason after the model's
    m, got, ref32, ort_err = check_default_against_ort(f32, qdq, x, min_int8=4)
    rows = layer_rows(m.precision_report(x))
    assert len(rows) == 5 and all(r["reason"].startswith(QDQ_REASON) for r in rows), rows
    assert all(r["precision"] == "int8" or r["reason"].startswith(QDQ_REASON + "; ") for r in rows), rows
    if machine_has_vnni():
        assert all(r["precision"] == "int8" for r in rows), rows

    # precision="fp32" asked: every layer f32 with the reason, the QDQ graph as ORT computes it unoptimized
    m32 = cuvil.load_onnx(qdq, precision="fp32", cache=False)
    rows = layer_rows(m32.precision_report(x))
    assert rows and all(r["precision"] == "fp32" for r in rows), rows
    assert sum(r["reason"] == F32_REASON for r in rows) >= 4, rows
    exact = session(qdq, optimized=False).run(None, {"x": x})[0]
    got32 = np.asarray(m32(x))
    assert rel_l2(got32, exact) < 1e-3  # (a Q rounding flipped by f32 summation order moves one grid step)
    assert rel_l2(got32, ref32) <= 2 * ort_err


@pytest.mark.parametrize("act,per_channel", [("QUInt8", False), ("QInt8", True)])
def test_transformer_block_qdq_runs_int8_by_default(tmp_path, act, per_channel):
    f32, qdq = quantized(tmp_path, Block(), (1, 13, 48), act, per_channel, name="block")
    x = np.random.default_rng(3).standard_normal((1, 13, 48)).astype(np.float32)
    # the four weight products (qkv, o, f1, f2); activation x activation products stay f32
    check_default_against_ort(f32, qdq, x, min_int8=4)


def test_fp32_models_still_lower_nothing(tmp_path):
    f32, _ = quantized(tmp_path, ConvNet(), (1, 3, 12, 12), "QUInt8", True)
    x = np.random.default_rng(0).standard_normal((1, 3, 12, 12)).astype(np.float32)
    m = cuvil.load_onnx(f32, cache=False)
    report = m.precision_report(x)
    assert report and all(r["precision"] == "fp32" and r["reason"] == "" for r in report), report
    assert rel_l2(m(x), session(f32).run(None, {"x": x})[0]) < 1e-5


@pytest.mark.parametrize("precision", [None, "fp32"])
def test_artifact_round_trip(tmp_path, precision):
    _, qdq = quantized(tmp_path, ConvNet(), (1, 3, 12, 12), "QUInt8", True)
    x = np.random.default_rng(0).standard_normal((1, 3, 12, 12)).astype(np.float32)
    m = cuvil.load_onnx(qdq, cache=False, **({} if precision is None else {"precision": precision}))  # None: left out
    want = np.asarray(m(x))
    path = tmp_path / "m.cuv"
    m.save(path)
    loaded = cuvil.load(path)
    assert np.array_equal(np.asarray(loaded(x)), want)
    rows = lambda c: [(r["op"], r["precision"], r["reason"]) for r in layer_rows(c.precision_report(x))]  # noqa
    assert rows(loaded) == rows(m)
    reason = QDQ_REASON if precision is None else F32_REASON
    assert sum(r[2].startswith(reason) for r in rows(loaded)) >= 4


def test_compile_cache_keeps_default_and_fp32_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUVIL_MODEL_CACHE", "on")
    _, qdq = quantized(tmp_path, ConvNet(), (1, 3, 12, 12), "QUInt8", True)
    x = np.random.default_rng(0).standard_normal((1, 3, 12, 12)).astype(np.float32)
    kw = lambda p: {} if p is None else {"precision": p}  # noqa: E731 (None: the default, left out)
    fresh = {p: np.asarray(cuvil.load_onnx(qdq, cache=False, **kw(p))(x)) for p in (None, "fp32")}
    # each order of first compiles: the second load of each is a hit and computes as a fresh compile
    for p in ("fp32", None, "fp32", None):
        c = cuvil.load_onnx(qdq, **kw(p))
        assert np.array_equal(np.asarray(c(x)), fresh[p]), p
        reasons = [r["reason"] for r in layer_rows(c.precision_report(x))]
        assert any(r.startswith(QDQ_REASON if p is None else F32_REASON) for r in reasons), reasons


def test_cli_profile_shows_the_reason(tmp_path):
    cli = os.path.join(ROOT, "build", "bin", "cuvil")
    if not os.path.exists(cli):
        pytest.skip("no CLI built")
    _, qdq = quantized(tmp_path, ConvNet(), (1, 3, 12, 12), "QUInt8", True)
    run = lambda *a: subprocess.run([cli, "profile", qdq, *a], capture_output=True, text=True, timeout=300)  # noqa
    default, fp32 = run(), run("--precision", "fp32")
    assert default.returncode == 0 and fp32.returncode == 0, default.stderr + fp32.stderr
    assert QDQ_REASON in default.stdout and F32_REASON not in default.stdout
    assert F32_REASON in fp32.stdout and QDQ_REASON not in fp32.stdout
    if machine_has_vnni():
        assert "[int8" in default.stdout and "[int8" not in fp32.stdout
    inspect = subprocess.run([cli, "inspect", qdq], capture_output=True, text=True, timeout=300)
    assert inspect.returncode == 0 and "QDQ layers: 5 (int8: QDQ in the model" in inspect.stdout, \
        inspect.stdout + inspect.stderr
    # compile at the default: the artifact runs its QDQ layers int8 (run/profile of the .cuv)
    cuv = str(tmp_path / "m.cuv")
    out = subprocess.run([cli, "compile", qdq, "-o", cuv], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    prof = subprocess.run([cli, "profile", cuv], capture_output=True, text=True, timeout=300)
    assert prof.returncode == 0 and QDQ_REASON in prof.stdout, prof.stdout + prof.stderr


def test_explicit_bf16_and_auto_take_the_users_word(tmp_path):
    """precision="bf16" replaces the model's int8 with bf16 (never lower than asked); precision="auto" measures
    against the float model (the QDQ layers in f32), so a budget of 0 leaves the QDQ graph computed in f32."""
    f32, qdq = quantized(tmp_path, ConvNet(), (1, 3, 12, 12), "QUInt8", True)
    x = np.random.default_rng(0).standard_normal((1, 3, 12, 12)).astype(np.float32)
    bf = cuvil.load_onnx(qdq, precision="bf16", cache=False)
    assert all(r["precision"] != "int8" for r in bf.precision_report(x))
    auto = cuvil.load_onnx(qdq, precision="auto", accuracy={"metric": "rel_l2", "budget": 0.0, "data": [x]},
                           cache=False)
    exact = cuvil.load_onnx(qdq, precision="fp32", cache=False)
    assert all(r["precision"] == "fp32" for r in auto.precision_report(x))
    assert rel_l2(auto(x), exact(x)) < 1e-6
