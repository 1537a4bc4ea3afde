"""ONNX forms that real models bring, each checked against ONNX Runtime on the same model and inputs: opsets 18-24
(ops ONNX defines as functions, Split/Pad/Scatter forms, bitwise ops), ONNX Runtime's contrib ops
(com.microsoft), ai.onnx.ml ops, unknown ranks resolved at run time, unsorted graphs, and clear errors."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import cuvil  # noqa: E402
from onnx_build import check_against_ort  # noqa: E402

F = TensorProto.FLOAT
MS = "com.microsoft"


def model(nodes, inputs, outputs, opset=18, initializers=(), extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, v) for d, v in extra_opsets])
    m.ir_version = 9 if opset <= 21 else 10
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, arr):
    return onnx.numpy_helper.from_array(np.asarray(arr), name)


def check(m, feeds, tmp_path, rtol=1e-4, atol=1e-5):
    check_against_ort(m, feeds, tmp_path, rtol=rtol, atol=atol)


rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- ops ONNX defines as functions


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(tmp_path, opset):
    c, g = 6, 3
    pshape = [g] if opset < 21 else [c]
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=g, epsilon=1e-3)],
              [vi("x", F, [2, c, 4, 5])], [vi("y", F, [2, c, 4, 5])], opset=opset,
              initializers=[init("s", randn(*pshape)), init("b", randn(*pshape))])
    check(m, {"x": randn(2, c, 4, 5)}, tmp_path)


def test_rms_normalization_and_swish(tmp_path):
    m = model([helper.make_node("RMSNormalization", ["x", "s"], ["r"], epsilon=1e-5),
               helper.make_node("Swish", ["r"], ["y"], alpha=0.7)],
              [vi("x", F, [3, 4, 8])], [vi("y", F, [3, 4, 8])], opset=24, initializers=[init("s", randn(8))])
    check(m, {"x": randn(3, 4, 8)}, tmp_path)


@pytest.mark.parametrize("window", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows(tmp_path, window):
    m = model([helper.make_node(window, ["n"], ["y"], periodic=0)], [vi("n", TensorProto.INT64, [])],
              [vi("y", F, [None])], opset=17)
    check(m, {"n": np.array(10, dtype=np.int64)}, tmp_path)


def test_center_crop_pad(tmp_path):
    m = model([helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[1, 2])],
              [vi("x", F, [2, 7, 4]), vi("s", TensorProto.INT64, [2])], [vi("y", F, [2, None, None])])
    check(m, {"x": randn(2, 7, 4), "s": np.array([4, 9], dtype=np.int64)}, tmp_path)


def test_opset18_split_pad_scatter_forms(tmp_path):
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
             helper.make_node("Pad", ["a", "pads", "", "axes"], ["pa"], mode="wrap"),
             helper.make_node("ScatterElements", ["x", "idx", "upd"], ["sc"], axis=1, reduction="max"),
             helper.make_node("ReduceMean", ["x", "raxes"], ["rm"], keepdims=0)]
    m = model(nodes, [vi("x", F, [2, 7])],
              [vi("a", F, [2, 3]), vi("b", F, [2, 3]), vi("c", F, [2, 1]), vi("pa", F, [2, 6]), vi("sc", F, [2, 7]),
               vi("rm", F, [2])], opset=19,
              initializers=[init("pads", np.array([1, 2], dtype=np.int64)), init("axes", np.array([1], dtype=np.int64)),
                            init("idx", np.array([[0, 0, 6], [1, 1, 2]], dtype=np.int64)),
                            init("upd", randn(2, 3)), init("raxes", np.array([1], dtype=np.int64))])
    check(m, {"x": randn(2, 7)}, tmp_path)


def test_bitwise(tmp_path):
    i32 = TensorProto.INT32
    nodes = [helper.make_node("BitwiseAnd", ["a", "b"], ["x"]), helper.make_node("BitwiseOr", ["x", "b"], ["y"]),
             helper.make_node("BitwiseXor", ["y", "a"], ["z"]), helper.make_node("BitwiseNot", ["z"], ["w"])]
    m = model(nodes, [vi("a", i32, [5]), vi("b", i32, [5])], [vi("w", i32, [5])])
    a = rng.integers(-1000, 1000, 5).astype(np.int32)
    check(m, {"a": a, "b": rng.integers(-1000, 1000, 5).astype(np.int32)}, tmp_path)


# ---- com.microsoft contrib ops


def test_contrib_elementwise_and_fused_matmul(tmp_path):
    nodes = [helper.make_node("FusedMatMul", ["x", "w"], ["mm"], domain=MS, alpha=0.5, transB=1),
             helper.make_node("BiasGelu", ["mm", "bias"], ["g1"], domain=MS),
             helper.make_node("FastGelu", ["g1", "bias"], ["g2"], domain=MS),
             helper.make_node("QuickGelu", ["g2"], ["g3"], domain=MS, alpha=1.5),
             helper.make_node("Gelu", ["g3"], ["y"], domain=MS)]
    m = model(nodes, [vi("x", F, [2, 3, 8])], [vi("y", F, [2, 3, 6])], opset=17,
              initializers=[init("w", randn(6, 8)), init("bias", randn(6))], extra_opsets=[(MS, 1)])
    check(m, {"x": randn(2, 3, 8)}, tmp_path)


def test_contrib_bias_add(tmp_path):
    # ONNX Runtime has BiasAdd for CUDA only: checked against its definition, X + bias + skip.
    m = model([helper.make_node("BiasAdd", ["x", "bias", "skip"], ["y"], domain=MS)],
              [vi("x", F, [2, 3, 4]), vi("skip", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=17,
              initializers=[init("bias", np.arange(4, dtype=np.float32))], extra_opsets=[(MS, 1)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x, skip = randn(2, 3, 4), randn(2, 3, 4)
    np.testing.assert_allclose(cuvil.load_onnx(str(path))(x=x, skip=skip), x + np.arange(4) + skip, rtol=1e-6)


def test_contrib_skip_layer_norm_and_embed(tmp_path):
    h, vocab = 16, 50
    nodes = [helper.make_node("EmbedLayerNormalization",
                              ["ids", "seg", "word", "pos", "segemb", "gamma", "beta", "mask"], ["emb", "mask_index"],
                              domain=MS, epsilon=1e-5),
             helper.make_node("SkipLayerNormalization", ["emb", "skip", "gamma", "beta", "bias"],
                              ["y", "", "", "sum"], domain=MS, epsilon=1e-5)]
    i32 = TensorProto.INT32
    m = model(nodes, [vi("ids", i32, [2, 5]), vi("seg", i32, [2, 5]), vi("mask", i32, [2, 5]), vi("skip", F, [2, 5, h])],
              [vi("y", F, [2, 5, h]), vi("mask_index", i32, [2]), vi("sum", F, [2, 5, h])], opset=17,
              initializers=[init("word", randn(vocab, h)), init("pos", randn(8, h)), init("segemb", randn(2, h)),
                            init("gamma", randn(h)), init("beta", randn(h)), init("bias", randn(h))],
              extra_opsets=[(MS, 1)])
    feeds = {"ids": rng.integers(0, vocab, (2, 5)).astype(np.int32), "seg": rng.integers(0, 2, (2, 5)).astype(np.int32),
             "mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int32), "skip": randn(2, 5, h)}
    check(m, feeds, tmp_path)


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_contrib_attention(tmp_path, unidirectional):
    h, heads = 16, 4
    m = model([helper.make_node("Attention", ["x", "w", "b", "mask"], ["y"], domain=MS, num_heads=heads,
                                unidirectional=unidirectional)],
              [vi("x", F, [2, 5, h]), vi("mask", TensorProto.INT32, [2, 5])], [vi("y", F, [2, 5, h])], opset=17,
              initializers=[init("w", randn(h, 3 * h)), init("b", randn(3 * h))], extra_opsets=[(MS, 1)])
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    check(m, {"x": randn(2, 5, h), "mask": mask}, tmp_path)


def test_contrib_multi_head_attention(tmp_path):
    h, heads = 16, 2
    m = model([helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias"], ["y"], domain=MS, num_heads=heads)],
              [vi("q", F, [2, 3, h]), vi("k", F, [2, 6, h]), vi("v", F, [2, 6, h])], [vi("y", F, [2, 3, h])],
              opset=17, initializers=[init("bias", randn(3 * h))], extra_opsets=[(MS, 1)])
    check(m, {"q": randn(2, 3, h), "k": randn(2, 6, h), "v": randn(2, 6, h)}, tmp_path)


def test_contrib_qlinear_add(tmp_path):
    u8 = TensorProto.UINT8
    m = model([helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain=MS)],
              [vi("a", u8, [4, 5]), vi("b", u8, [4, 5])], [vi("c", u8, [4, 5])], opset=17,
              initializers=[init("as", np.float32(0.05)), init("az", np.uint8(120)), init("bs", np.float32(0.03)),
                            init("bz", np.uint8(128)), init("cs", np.float32(0.07)), init("cz", np.uint8(125))],
              extra_opsets=[(MS, 1)])
    feeds = {"a": rng.integers(0, 255, (4, 5)).astype(np.uint8), "b": rng.integers(0, 255, (4, 5)).astype(np.uint8)}
    check(m, feeds, tmp_path, rtol=0, atol=1)  # ONNX Runtime's table-driven kernel may round one step apart


# ---- ai.onnx.ml


def test_ml_linear_classifier_pipeline(tmp_path):
    f, k = 4, 3
    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml", offset=[0.1] * f, scale=[2.0] * f),
             helper.make_node("LinearClassifier", ["s"], ["label", "p"], domain="ai.onnx.ml",
                              coefficients=list(randn(f * k).astype(float)), intercepts=[0.1, -0.2, 0.3],
                              classlabels_ints=[10, 20, 30], post_transform="SOFTMAX")]
    m = model(nodes, [vi("x", F, [6, f])], [vi("label", TensorProto.INT64, [6]), vi("p", F, [6, k])], opset=17,
              extra_opsets=[("ai.onnx.ml", 1)])
    check(m, {"x": randn(6, f)}, tmp_path)


# ---- hygiene and run-time ranks


def test_unknown_rank_from_if_runs_at_run_time(tmp_path):
    # then: Squeeze to [N, 8]; else: Identity [1, N, 8]. A MatMul after the If sees an unknown rank at import.
    then = helper.make_graph([helper.make_node("Squeeze", ["x", "ax"], ["t"])], "then", [], [vi("t", F, None)],
                             initializer=[init("ax", np.array([0], dtype=np.int64))])
    els = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("If", ["c"], ["h"], then_branch=then, else_branch=els),
             helper.make_node("MatMul", ["h", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    m = model(nodes, [vi("c", TensorProto.BOOL, []), vi("x", F, [1, "n", 8])], [vi("y", F, None)], opset=17,
              initializers=[init("w", randn(8, 3))])
    for c in (True, False):
        check(m, {"c": np.array(c), "x": randn(1, 4, 8)}, tmp_path)


def test_float16_model_with_casts_after_their_users(tmp_path):
    pytest.importorskip("onnxconverter_common")
    from onnxconverter_common import float16

    m = model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
              [vi("x", F, [2, 8])], [vi("y", F, [2, 4])], opset=17, initializers=[init("w", randn(8, 4))])
    half = float16.convert_float_to_float16(m, keep_io_types=True)
    # As the converter writes the Casts it adds for blocked ops and for graph outputs: after their users.
    nodes = list(half.graph.node)
    del half.graph.node[:]
    half.graph.node.extend(reversed(nodes))
    check(half, {"x": randn(2, 8)}, tmp_path, rtol=1e-2, atol=1e-2)


def test_unsupported_ops_name_op_domain_and_node(tmp_path):
    for domain, op in [(MS, "NotARealOp"), ("ai.onnx.ml", "SVMRegressor"), ("", "ImageDecoder")]:
        m = model([helper.make_node(op, ["x"], ["y"], name="the_node", domain=domain)], [vi("x", F, [2])],
                  [vi("y", F, [2])], opset=20, extra_opsets=[(domain, 1)] if domain else [])
        path = tmp_path / "bad.onnx"
        onnx.save(m, str(path))
        with pytest.raises(Exception) as err:
            cuvil.load_onnx(str(path))
        msg = str(err.value)
        assert f"'{op}'" in msg and "the_node" in msg and f"domain '{domain or 'ai.onnx'}'" in msg, msg
