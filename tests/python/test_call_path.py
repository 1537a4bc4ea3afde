"""The per-call path of a compiled module (python/cuvil/compiled.py `_arrays`/`_to_array`, the binding's
`numpy_dtype`): the fast path for aligned, C-contiguous, native arrays given by keyword, and everything it must not
swallow (other layouts, byte orders, wrong names), for every dtype an output can have."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
          np.float32, np.float64]


def identity_model(tmp_path, dtype, shape=(3, 5)):
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", et, list(shape))],
                          [helper.make_tensor_value_info("y", et, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / f"id_{np.dtype(dtype).name}.onnx"
    path.write_bytes(m.SerializeToString())
    return cuvil.load_onnx(str(path))


def sample(dtype, shape=(3, 5), seed=0):
    r = np.random.default_rng(seed)
    if dtype == np.bool_:
        return r.random(shape) > 0.5
    if np.dtype(dtype).kind == "f":
        return (r.standard_normal(shape) * 10).astype(dtype)
    info = np.iinfo(dtype)
    return r.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(tmp_path, dtype):
    m = identity_model(tmp_path, dtype)
    x = sample(dtype)
    for y in (m(x=x), m(x)):
        assert y.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(y, x)


def test_layouts_and_byte_orders_besides_the_fast_path(tmp_path):
    m = identity_model(tmp_path, np.float32)
    x = sample(np.float32, (5, 3))
    np.testing.assert_array_equal(m(x=x.T), x.T)                          # strided view
    np.testing.assert_array_equal(m(x=np.asfortranarray(x.T)), x.T)       # Fortran order
    swapped = x.T.astype(x.dtype.newbyteorder(">"))
    np.testing.assert_array_equal(m(x=swapped), x.T)                      # big-endian
    raw = np.zeros(x.nbytes + 1, np.uint8)
    mis = np.frombuffer(raw.data, dtype=np.float32, count=x.size, offset=1).reshape(3, 5)
    assert not mis.flags.aligned
    np.testing.assert_array_equal(m(x=mis), np.zeros((3, 5), np.float32))  # misaligned
    np.testing.assert_array_equal(m(x=np.float32(2) * np.ones((3, 5), np.float32)), np.full((3, 5), 2, np.float32))


def test_keyword_errors_still_reported(tmp_path):
    m = identity_model(tmp_path, np.float32)
    x = sample(np.float32)
    with pytest.raises(cuvil.InputError, match="missing input"):
        m(y=x)
    with pytest.raises(cuvil.InputError, match="unknown input"):
        m(x=x, z=x)
    with pytest.raises(cuvil.InputError, match="both by position and by keyword"):
        m(x, x=x)
    with pytest.raises(ValueError):
        m(x=x.astype(np.float64))  # dtype checked by the core
    with pytest.raises(ValueError):
        m(x=sample(np.float32, (3, 6)))  # static dim
