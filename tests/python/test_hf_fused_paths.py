"""Hugging Face models compiled for one static shape take the fast paths (fused Attention, with its bool padding or
causal mask, FusedMatMul, 1-D convolutions channels-last) and still match PyTorch. Small configs from each family
of the issue-26 set, odd sequence lengths, odd head counts (3 heads of 16), a padded batch entry."""
import os
import re

import pytest
import torch

import cuvil

transformers = pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUVIL_MODEL_CACHE", "off")


def rel_l2(a, b) -> float:
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def text_inputs(batch: int, seq: int, vocab: int, padded: bool = True):
    g = torch.Generator().manual_seed(seq)
    ids = torch.randint(3, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if padded:
        mask[0, seq - seq // 3:] = 0  # padding at the end of the first sequence
    return {"input_ids": ids, "attention_mask": mask}


def build(name: str):
    torch.manual_seed(0)
    t = transformers
    small = dict(hidden_size=48, num_attention_heads=3, intermediate_size=96, num_hidden_layers=2)
    if name == "bert":
        return t.BertModel(t.BertConfig(vocab_size=300, **small)).eval(), text_inputs(2, 13, 300), 2
    if name == "roberta":
        return t.RobertaModel(t.RobertaConfig(vocab_size=300, **small)).eval(), text_inputs(2, 11, 300), 2
    if name == "distilbert":
        cfg = t.DistilBertConfig(vocab_size=300, dim=48, n_heads=3, hidden_dim=96, n_layers=2)
        return t.DistilBertModel(cfg).eval(), text_inputs(2, 9, 300), 2
    if name == "gpt2":  # causal mask built in forward, and padding
        cfg = t.GPT2Config(vocab_size=300, n_embd=48, n_head=3, n_layer=2, use_cache=False)
        return t.GPT2Model(cfg).eval(), text_inputs(2, 11, 300), 2
    if name == "t5_encoder":  # relative position bias: a float mask added to the scores
        cfg = t.T5Config(vocab_size=300, d_model=48, d_kv=16, num_heads=3, d_ff=96, num_layers=2)
        return t.T5EncoderModel(cfg).eval(), text_inputs(2, 13, 300), 2
    if name == "vit":
        cfg = t.ViTConfig(image_size=40, patch_size=8, **small)  # 25 patches + CLS: sequence 26
        return t.ViTModel(cfg).eval(), {"pixel_values": torch.randn(2, 3, 40, 40)}, 2
    if name == "whisper_encoder":  # 1-D convolutions in front
        cfg = t.WhisperConfig(d_model=48, encoder_attention_heads=3, encoder_ffn_dim=96, encoder_layers=2,
                              num_mel_bins=16, max_source_positions=25)
        return t.WhisperModel(cfg).get_encoder().eval(), {"input_features": torch.randn(1, 16, 50)}, 2
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["bert", "roberta", "distilbert", "gpt2", "t5_encoder", "vit", "whisper_encoder"])
def test_static_shapes_fuse_attention_and_match_pytorch(name):
    m, inputs, layers = build(name)
    c = cuvil.compile(m, kwargs=inputs)
    ir = c.ir()
    assert len(re.findall(r"= Attention\(", ir)) == layers, ir
    assert not re.search(r"= Softmax\(", ir)  # no unfused attention left
    with torch.no_grad():
        ref = m(**inputs).last_hidden_state
    got = c(**inputs).last_hidden_state
    assert got.shape == ref.shape
    assert rel_l2(got, ref) < 1e-4
    if name == "whisper_encoder":
        assert "channels_last = 1" in ir  # the 1-D convolutions run [N, W, C]


def test_bool_padding_mask_changes_only_the_padded_sequence():
    """The fused kernel applies the mask: unmasking the padding changes sequence 0 and leaves sequence 1 alone."""
    m, inputs, _ = build("bert")
    c = cuvil.compile(m, kwargs=inputs)
    unmasked = dict(inputs, attention_mask=torch.ones_like(inputs["attention_mask"]))
    a, b = c(**inputs).last_hidden_state, c(**unmasked).last_hidden_state
    assert rel_l2(a[0], b[0]) > 1e-3
    assert rel_l2(a[1], b[1]) < 1e-6
    with torch.no_grad():
        assert rel_l2(b, m(**unmasked).last_hidden_state) < 1e-4


def test_gpt2_gelu_new_and_qkv_split_fold_into_products():
    """GPT-2's gelu_new (tanh GELU, after a Reshape) becomes the FC product's activation, and its c_attn Split into
    Q, K, V becomes three products: no Split, Pow or Tanh left."""
    m, inputs, _ = build("gpt2")
    c = cuvil.compile(m, kwargs=inputs)
    ir = c.ir()
    assert 'activation = "GeluTanh"' in ir
    for op in ("Split", "Pow", "Tanh"):
        assert not re.search(rf"= {op}\(", ir), op
    with torch.no_grad():
        assert rel_l2(c(**inputs).last_hidden_state, m(**inputs).last_hidden_state) < 1e-4


@pytest.mark.parametrize("name", ["bert", "gpt2", "t5_encoder"])
def test_symbolic_batch_and_sequence_fuse_attention_and_match_pytorch(name):
    """One compilation with symbolic batch and sequence dims fuses attention like a static shape (the kernel is
    prepared per shape signature) and matches PyTorch at several lengths, padded or not, on the same object."""
    m, inputs, layers = build(name)
    dyn = {k: {0: "batch", 1: "seq"} for k in inputs}
    c = cuvil.compile(m, kwargs=inputs, dynamic_shapes=dyn)
    ir = c.ir()
    assert len(re.findall(r"= Attention\(", ir)) == layers, ir
    assert not re.search(r"= Softmax\(", ir)
    for batch, seq, padded in [(2, 13, True), (1, 5, False), (3, 22, True), (2, 13, False)]:
        x = text_inputs(batch, seq, 300, padded)
        with torch.no_grad():
            ref = m(**x).last_hidden_state
        got = c(**x).last_hidden_state
        assert got.shape == ref.shape
        assert rel_l2(got, ref) < 1e-4, (batch, seq, padded)


@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_onnx_exports_fuse_attention_and_match_onnx_runtime(name, tmp_path):
    # torch.onnx's default (dynamo) exporter writes SDPA out: q and k^T each scaled by 1 / sqrt(sqrt(d)), k^T as
    # Reshape-Transpose-Reshape around a dropped batch dim, the mask as Where(mask, 0, -inf) added, and the safe
    # softmax Where(IsNaN(P), 0, P). All of it becomes one Attention per layer. GPT-2's first sequence is padded on
    # the left, so its first queries see no key at all: rows that the safe softmax makes 0.
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    m, inputs, layers = build(name)
    if name == "gpt2":
        inputs["attention_mask"][0] = 1
        inputs["attention_mask"][0, :3] = 0
    path = str(tmp_path / f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (), path, kwargs=inputs, dynamo=True, external_data=False)
    c = cuvil.load_onnx(path)
    ir = c.ir()
    assert len(re.findall(r"= Attention\(", ir)) == layers, ir
    assert not re.search(r"= (Softmax|IsNaN)\(", ir), ir
    assert len(re.findall(r"= Transpose\(", ir)) == (1 if name == "vit" else 0), ir  # (ViT: the image, to NHWC)
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[i.name].numpy() for i in s.get_inputs()}
    want = s.run(None, feeds)[0]
    got = c(**feeds)
    got = got[0] if isinstance(got, (list, tuple)) else got
    assert rel_l2(got, want) < 1e-4
