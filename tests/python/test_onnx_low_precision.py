"""The low-precision element types (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz, float4e2m1, int4/uint4, int2/uint2)
through Cast, CastLike, QuantizeLinear and DequantizeLinear, against onnx's reference evaluator (ml_dtypes) on
random values, every code of each type, ties and special values. Graph inputs and outputs stay f32, so each model
converts into the type and back; initializers of the types check the importer's unpacking (raw_data and
int32_data, odd counts)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import cuvil  # noqa: E402
from onnx_build import model, vi  # noqa: E402

F, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
FLOAT8 = {TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, TensorProto.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
          TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2, TensorProto.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz}
SMALL = {TensorProto.FLOAT4E2M1: ml_dtypes.float4_e2m1fn, TensorProto.INT4: ml_dtypes.int4,
         TensorProto.UINT4: ml_dtypes.uint4, TensorProto.INT2: ml_dtypes.int2, TensorProto.UINT2: ml_dtypes.uint2}
ALL = {**FLOAT8, **SMALL}
rng = np.random.default_rng(7)


def run_both(m, feeds, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = cuvil.load_onnx(str(path))(**feeds)
    got = [np.asarray(g) for g in (got if isinstance(got, (tuple, list)) else [got])]
    want = ReferenceEvaluator(m).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w).astype(g.dtype)
        assert g.shape == w.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(g[~np.isnan(g)], w[~np.isnan(w)])  # exact: one rounding each way


def inputs_for(np_t, n=400):
    """Random values over the type's range and beyond, every representable value, the midpoints between
    neighbours (ties), and the special values."""
    codes = np.arange(256 if np_t in FLOAT8.values() else 16 if "4" in np_t.__name__ else 4, dtype=np.uint8)
    reps = codes.view(np_t) if np_t in FLOAT8.values() else None
    if np_t is ml_dtypes.float4_e2m1fn:  # its 16 values (a sub-byte type: no view of the codes)
        pos = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
        reps = np.concatenate([pos, -pos])
    hi = float(ml_dtypes.finfo(np_t).max if np_t in FLOAT8.values() or np_t is ml_dtypes.float4_e2m1fn
               else ml_dtypes.iinfo(np_t).max)
    vals = [rng.uniform(-1.3 * hi, 1.3 * hi, n), rng.standard_normal(n) * hi / 64,
            [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30]]
    if reps is not None:
        r = np.sort(reps.astype(np.float64)[np.isfinite(reps.astype(np.float64))])
        vals += [r, (r[1:] + r[:-1]) / 2]
    else:
        grid = np.arange(-2 * hi - 2, 2 * hi + 3) / 2  # integers and halves: ties for the quantizer
        vals += [grid]
    return np.concatenate([np.asarray(v, np.float64) for v in vals]).astype(np.float32)


@pytest.mark.parametrize("to", list(ALL), ids=[TensorProto.DataType.Name(t) for t in ALL])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_round_trip(tmp_path, to, saturate):
    x = inputs_for(ALL[to])
    if to in SMALL and to != TensorProto.FLOAT4E2M1:
        x = x[np.isfinite(x)]  # numpy's float -> int of inf/NaN is platform-defined
    attrs = {"saturate": saturate} if to in FLOAT8 else {}
    m = model([helper.make_node("Cast", ["x"], ["q"], to=to, **attrs), helper.make_node("Cast", ["q"], ["y"], to=F)],
              [vi("x", F, [x.size])], [vi("y", F, [x.size])], opset=23)
    run_both(m, {"x": x}, tmp_path)


@pytest.mark.parametrize("to", list(FLOAT8), ids=[TensorProto.DataType.Name(t) for t in FLOAT8])
def test_cast_like_from_float16(tmp_path, to):
    with np.errstate(over="ignore"):  # e5m2's range passes f16's: those inputs are infinities
        x = inputs_for(FLOAT8[to]).astype(np.float16)
    like = onnx.numpy_helper.from_array(np.zeros(1, FLOAT8[to]), "like")
    m = model([helper.make_node("CastLike", ["x", "like"], ["q"]), helper.make_node("Cast", ["q"], ["y"], to=F16)],
              [vi("x", F16, [x.size])], [vi("y", F16, [x.size])], opset=23, initializers=[like])
    run_both(m, {"x": x}, tmp_path)


@pytest.mark.parametrize("t", [TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2,
                               TensorProto.FLOAT4E2M1, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2],
                         ids=lambda t: TensorProto.DataType.Name(t))
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize(tmp_path, t, per_axis):
    np_t = ALL[t]
    shape = [3, 7]
    n = 3 if per_axis else 1
    scale = rng.uniform(0.05, 0.6, n).astype(np.float32)
    if t in FLOAT8 or t == TensorProto.FLOAT4E2M1:
        zp = np.zeros(n, np.float32).astype(np_t)  # float8 zero points must be 0
        if t == TensorProto.FLOAT4E2M1:
            zp = np.array([0.5, -1.0, 0.0][:n], np.float32).astype(np_t)
    else:
        info = ml_dtypes.iinfo(np_t)
        zp = rng.integers(int(info.min), int(info.max) + 1, n).astype(np_t)
    inits = [onnx.numpy_helper.from_array(scale.reshape([n] if per_axis else []), "s"),
             onnx.numpy_helper.from_array(zp.reshape([n] if per_axis else []), "zp")]
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x.flat[:4] = [0.5 * scale[0], 1.5 * scale[0], 2.5 * scale[0], -0.5 * scale[0]]  # ties
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=0),
               helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=0)],
              [vi("x", F, shape)], [vi("y", F, shape)], opset=23, initializers=inits)
    run_both(m, {"x": x}, tmp_path)


@pytest.mark.parametrize("t", list(ALL), ids=[TensorProto.DataType.Name(t) for t in ALL])
@pytest.mark.parametrize("raw", [True, False])
def test_initializer_of_every_code(tmp_path, t, raw):
    """Every code of the type as an initializer (an odd count, so packed types end in a half-filled byte),
    stored as raw_data or int32_data, cast to f32."""
    np_t = ALL[t]
    count = 256 if t in FLOAT8 else 16 if "4" in np_t.__name__ else 4
    codes = np.arange(count, dtype=np.uint8)
    codes = np.concatenate([codes, codes[:3]])  # odd length
    if t in FLOAT8:
        vals = codes.view(np_t)
        tp = helper.make_tensor("c", t, [codes.size], vals.tobytes() if raw else codes.astype(np.int32).tolist(),
                                raw=raw)
    else:
        per = 2 if count == 16 else 4
        padded = np.concatenate([codes, np.zeros(-codes.size % per, np.uint8)]).reshape(-1, per)
        packed = np.zeros(padded.shape[0], np.uint8)
        for k in range(per):
            packed |= (padded[:, k] << np.uint8(k * 8 // per)).astype(np.uint8)
        tp = helper.make_tensor("c", t, [codes.size], packed.tobytes(), raw=True)
        if not raw:  # int32_data, which make_tensor packs from the values itself
            tp = helper.make_tensor("c", t, [codes.size], onnx.numpy_helper.to_array(tp), raw=False)
    m = model([helper.make_node("Cast", ["c"], ["y"], to=F)], [], [vi("y", F, [codes.size])], opset=23,
              initializers=[tp])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = np.asarray(cuvil.load_onnx(str(path))())
    want = onnx.numpy_helper.to_array(tp).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_arithmetic_on_a_storage_type_is_a_clear_error(tmp_path):
    m = model([helper.make_node("Cast", ["x"], ["q"], to=TensorProto.FLOAT8E4M3FN),
               helper.make_node("Add", ["q", "q"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=F)],
              [vi("x", F, [4])], [vi("y", F, [4])], opset=23)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    with pytest.raises(Exception, match="f8e4m3fn"):
        cuvil.load_onnx(str(path))(x=np.ones(4, np.float32))


def test_truncated_packed_initializer_is_a_clear_error(tmp_path):
    tp = TensorProto(name="c", data_type=TensorProto.INT4, dims=[5], raw_data=b"\x12")  # 5 codes need 3 bytes
    m = model([helper.make_node("Cast", ["c"], ["y"], to=F)], [], [vi("y", F, [5])], opset=23, initializers=[tp])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    with pytest.raises(Exception, match="packs into 3 bytes"):
        cuvil.load_onnx(str(path))


def test_inputs_and_outputs_cross_as_uint8_codes(tmp_path):
    """A float8 graph input takes its codes as a uint8 array, a float8 output returns them likewise (as bf16
    crosses as uint16 bits)."""
    t = TensorProto.FLOAT8E5M2
    m = model([helper.make_node("Cast", ["q"], ["y"], to=F), helper.make_node("Cast", ["x"], ["r"], to=t)],
              [vi("q", t, [256]), vi("x", F, [64])], [vi("y", F, [256]), vi("r", t, [64])], opset=23)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    codes = np.arange(256, dtype=np.uint8)
    x = (rng.standard_normal(64) * 1000).astype(np.float32)
    y, r = cuvil.load_onnx(str(path))(q=codes, x=x)
    want = codes.view(ml_dtypes.float8_e5m2).astype(np.float32)
    y = np.asarray(y)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(y[~np.isnan(y)], want[~np.isnan(want)])
    assert np.asarray(r).dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(r), x.astype(ml_dtypes.float8_e5m2).view(np.uint8))


@pytest.mark.parametrize("t", [TensorProto.INT4, TensorProto.UINT4, TensorProto.UINT2, TensorProto.FLOAT4E2M1,
                               TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2FNUZ],
                         ids=lambda t: TensorProto.DataType.Name(t))
@pytest.mark.parametrize("saturate", [1, 0])
def test_blocked_quantize_dequantize(tmp_path, t, saturate):
    """Blocked quantization (opset 21, the int4 weight-only form LLM exports use): scale and zero point with
    ceil(n / block) entries along the axis, the last block short."""
    np_t = ALL[t]
    shape, block, axis = [4, 11], 3, 1
    nb = -(-shape[axis] // block)
    scale = rng.uniform(0.05, 0.5, [4, nb]).astype(np.float32)
    if t in FLOAT8:
        zp = np.zeros([4, nb], np.float32).astype(np_t)
    elif t == TensorProto.FLOAT4E2M1:
        zp = rng.choice([0.0, 0.5, -1.0], [4, nb]).astype(np.float32).astype(np_t)
    else:
        info = ml_dtypes.iinfo(np_t)
        zp = rng.integers(int(info.min), int(info.max) + 1, [4, nb]).astype(np_t)
    inits = [onnx.numpy_helper.from_array(scale, "s"), onnx.numpy_helper.from_array(zp, "zp")]
    x = (rng.standard_normal(shape) * (40 if t in FLOAT8 else 2)).astype(np.float32)
    attrs = {"saturate": saturate} if t in FLOAT8 else {}
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=axis, block_size=block, **attrs),
               helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=axis, block_size=block)],
              [vi("x", F, shape)], [vi("y", F, shape)], opset=23, initializers=inits)
    run_both(m, {"x": x}, tmp_path)
