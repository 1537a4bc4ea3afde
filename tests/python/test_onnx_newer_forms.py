"""Forms of ops that onnx 1.23's node suite checks (opsets 19-28), each against ONNX Runtime on random inputs with
odd sizes: blocked and 16-bit (De)QuantizeLinear, Resize over a subset of axes and half_pixel_symmetric, float Mod
with fmod=0, LpNormalization of a zero vector, dilated AveragePool."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import cuvil  # noqa: E402
from onnx_build import init, model, vi  # noqa: E402,F401

F = TensorProto.FLOAT
rng = np.random.default_rng(23)


def check(m, feeds, tmp_path, rtol=1e-5, atol=1e-6):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = cuvil.load_onnx(str(path))(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("zp_type", [TensorProto.UINT8, TensorProto.INT8])
def test_blocked_quantize_dequantize(tmp_path, zp_type):
    # x [3, 5] in blocks of 2 along axis 1: 3 blocks, the last one short.
    np_zp = np.uint8 if zp_type == TensorProto.UINT8 else np.int8
    scale = rng.uniform(0.05, 0.5, (3, 3)).astype(np.float32)
    zp = rng.integers(0, 20, (3, 3)).astype(np_zp)
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2),
               helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2)],
              [vi("x", F, [3, 5])], [vi("q", zp_type, [3, 5]), vi("y", F, [3, 5])], opset=21,
              initializers=[init("s", scale), init("z", zp)])
    check(m, {"x": rng.uniform(-40, 40, (3, 5)).astype(np.float32)}, tmp_path)


@pytest.mark.parametrize("zp_type,np_zp", [(TensorProto.UINT16, np.uint16), (TensorProto.INT16, np.int16)])
def test_16bit_quantize_dequantize(tmp_path, zp_type, np_zp):
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
               helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
              [vi("x", F, [7, 9])], [vi("q", zp_type, [7, 9]), vi("y", F, [7, 9])], opset=21,
              initializers=[init("s", np.float32(0.25)), init("z", np_zp(300))])
    check(m, {"x": rng.uniform(-9000, 20000, (7, 9)).astype(np.float32)}, tmp_path)


@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1]])
def test_resize_axes_subset(tmp_path, axes):
    sizes = {2: 7, 3: 4}
    sz = np.array([sizes[a % 4] for a in axes], dtype=np.int64)
    out = [2, 3, 5, 6]
    for a in axes:
        out[a % 4] = sizes[a % 4]
    m = model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], axes=axes, mode="linear")],
              [vi("x", F, [2, 3, 5, 6])], [vi("y", F, out)], opset=19, initializers=[init("sizes", sz)])
    check(m, {"x": rng.standard_normal((2, 3, 5, 6)).astype(np.float32)}, tmp_path)


def test_resize_half_pixel_symmetric(tmp_path):
    m = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                                coordinate_transformation_mode="half_pixel_symmetric")],
              [vi("x", F, [1, 2, 9, 7])], [vi("y", F, None)], opset=19,
              initializers=[init("scales", np.array([1, 1, 0.6, 1.7], dtype=np.float32))])
    check(m, {"x": rng.standard_normal((1, 2, 9, 7)).astype(np.float32)}, tmp_path)


def test_float_mod_fmod0(tmp_path):
    m = model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=0)], [vi("a", F, [4, 9]), vi("b", F, [9])],
              [vi("y", F, [4, 9])], opset=28)  # ONNX Runtime takes float fmod=0 from opset 28
    b = rng.uniform(-3, 3, 9).astype(np.float32)
    b[b == 0] = 1
    check(m, {"a": rng.uniform(-20, 20, (4, 9)).astype(np.float32), "b": b}, tmp_path)


def test_lp_normalization_zero_vector(tmp_path):
    m = model([helper.make_node("LpNormalization", ["x"], ["y"], axis=0, p=2)], [vi("x", F, [3, 5])],
              [vi("y", F, [3, 5])], opset=13)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[:, 2] = 0
    check(m, {"x": x}, tmp_path)


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_dilated_average_pool(tmp_path, count_include_pad):
    m = model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], dilations=[2, 2],
                                pads=[1, 1, 0, 1], count_include_pad=count_include_pad)],
              [vi("x", F, [1, 2, 9, 8])], [vi("y", F, None)], opset=19)
    check(m, {"x": rng.standard_normal((1, 2, 9, 8)).astype(np.float32)}, tmp_path)


def test_qlinear_matmul_f16_scales(tmp_path):
    H, U8 = TensorProto.FLOAT16, TensorProto.UINT8
    m = model([helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
              [vi("a", U8, [3, 5]), vi("b", U8, [5, 7])], [vi("y", U8, [3, 7])], opset=21,
              initializers=[init("as", np.float16(0.02)), init("az", np.uint8(120)), init("bs", np.float16(0.01)),
                            init("bz", np.uint8(130)), init("ys", np.float16(0.05)), init("yz", np.uint8(128))])
    check(m, {"a": rng.integers(0, 256, (3, 5)).astype(np.uint8), "b": rng.integers(0, 256, (5, 7)).astype(np.uint8)},
          tmp_path, rtol=0, atol=1)


def test_ml_only_model(tmp_path):
    # A model that imports only ai.onnx.ml is valid while it uses no ai.onnx op (onnx 1.23's ml node tests).
    g = helper.make_graph([helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.3)], "g",
                          [vi("x", F, [3, 5])], [vi("y", F, [3, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 9
    check(m, {"x": rng.standard_normal((3, 5)).astype(np.float32)}, tmp_path)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [vi("x", F, [3])], [vi("y", F, [3])])
    bad = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    bad.ir_version = 9
    path = tmp_path / "bad.onnx"
    onnx.save(bad, str(path))
    with pytest.raises(cuvil.CompileError, match="does not import the default"):
        cuvil.load_onnx(str(path))
