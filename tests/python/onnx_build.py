"""Small ONNX models built in tests: a graph of the given nodes at one opset, its value infos and initializers."""
import numpy as np
import onnx
from onnx import helper


def model(nodes, inputs, outputs, opset, initializers=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9 if opset <= 21 else 10 if opset <= 24 else 11  # the oldest IR that has the opset
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, arr):
    return onnx.numpy_helper.from_array(np.asarray(arr), name)


def check_against_ort(m, feeds, tmp_path, rtol=1e-4, atol=1e-5):
    """Saves `m`, runs it on `feeds` in ONNX Runtime and in Cuvil, and compares every output: shape, dtype and
    values within rtol/atol."""
    import cuvil
    import onnxruntime as ort

    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = cuvil.load_onnx(str(path))(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
