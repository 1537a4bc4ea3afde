"""ONNX's optimizer steps (domain ai.onnx.preview.training: Adagrad, Momentum, Adam), which Cuvil writes out as
elementwise ops: several tensors per update, f32 and f64, the first update (T = 0, where Momentum and Adam differ)
and later ones, every attribute, outputs left off; against onnx's reference evaluator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import cuvil  # noqa: E402

rng = np.random.default_rng(11)
TRAINING = "ai.onnx.preview.training"
SHAPES = [(3, 5), (7,), (2, 1, 4)]


def optimizer_model(op, state, n, elem, attrs, outputs=None):
    groups = ["X", "G"] + state
    names = [f"{g}{i}" for g in groups for i in range(n)]
    outs = outputs or [f"{g}{i}_new" for g in ["X"] + state for i in range(n)]
    node = helper.make_node(op, ["R", "T"] + names, outs, domain=TRAINING, **attrs)
    shape = {f"{g}{i}": SHAPES[i] for g in groups for i in range(n)}
    inputs = [helper.make_tensor_value_info("R", elem, []), helper.make_tensor_value_info("T", TensorProto.INT64, [])]
    inputs += [helper.make_tensor_value_info(k, elem, shape[k]) for k in names]
    out_vi = [helper.make_tensor_value_info(o, elem, None) for o in outs if o]
    graph = helper.make_graph([node], op, inputs, out_vi)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(TRAINING, 1)])


def feeds_for(state, n, dtype, t):
    f = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    for g in ["X", "G"] + state:
        for i in range(n):
            v = rng.standard_normal(SHAPES[i]).astype(dtype)
            f[f"{g}{i}"] = np.abs(v) if g == "H" else v  # squared-gradient accumulators are >= 0
    return f


def check(m, feeds, tmp_path, rtol):
    """Cuvil's outputs have the tensors' type (the spec's T3) and the reference's values. (The reference itself
    returns f32 from a several-tensor Adam and f64 from a one-tensor f32 Adam after its first update.)"""
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = cuvil.load_onnx(str(path))(**feeds)
    got = got if isinstance(got, (tuple, list)) else [got]
    want = ReferenceEvaluator(m).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == feeds["X0"].dtype, (g.shape, w.shape, g.dtype)
        np.testing.assert_allclose(g, w.astype(g.dtype), rtol=rtol, atol=rtol)


DTYPES = [(TensorProto.FLOAT, np.float32, 1e-5), (TensorProto.DOUBLE, np.float64, 1e-12)]


@pytest.mark.parametrize("elem,dtype,rtol", DTYPES)
@pytest.mark.parametrize("t", [0, 7])
@pytest.mark.parametrize("n", [1, 3])
def test_adagrad(tmp_path, elem, dtype, rtol, t, n):
    m = optimizer_model("Adagrad", ["H"], n, elem, dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01))
    check(m, feeds_for(["H"], n, dtype, t), tmp_path, rtol)


@pytest.mark.parametrize("elem,dtype,rtol", DTYPES)
@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(tmp_path, elem, dtype, rtol, t, mode):
    m = optimizer_model("Momentum", ["V"], 2, elem, dict(alpha=0.9, beta=0.5, mode=mode, norm_coefficient=0.02))
    check(m, feeds_for(["V"], 2, dtype, t), tmp_path, rtol)


@pytest.mark.parametrize("elem,dtype,rtol", DTYPES)
@pytest.mark.parametrize("t", [0, 1, 20])
def test_adam(tmp_path, elem, dtype, rtol, t):
    n = 2 if dtype == np.float32 else 1  # (in f64 the reference's several-tensor Adam rounds to f32)
    m = optimizer_model("Adam", ["V", "H"], n, elem,
                        dict(alpha=0.85, beta=0.95, epsilon=1e-4, norm_coefficient=0.01, norm_coefficient_post=0.02))
    check(m, feeds_for(["V", "H"], n, dtype, t), tmp_path, rtol)


def test_adam_defaults_and_outputs_left_off(tmp_path):
    # Only the new X is asked for: the state's outputs are left off (empty names / trailing).
    m = optimizer_model("Adam", ["V", "H"], 1, TensorProto.FLOAT, {}, outputs=["X0_new", "", "H0_new"])
    check(m, feeds_for(["V", "H"], 1, np.float32, 5), tmp_path, 1e-5)


def test_bad_optimizer_nodes_are_clear_errors(tmp_path):
    m = optimizer_model("Momentum", ["V"], 1, TensorProto.FLOAT, dict(alpha=0.9, beta=0.5, mode="sideways",
                                                                      norm_coefficient=0.0))
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(Exception, match="mode 'sideways'"):
        cuvil.load_onnx(str(tmp_path / "m.onnx"))
    m = optimizer_model("Adagrad", ["H"], 2, TensorProto.FLOAT, {})
    m.graph.node[0].input.pop()  # 2 + 5 inputs: not three equal groups
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(Exception, match="groups of equally many tensors"):
        cuvil.load_onnx(str(tmp_path / "m.onnx"))
    m = optimizer_model("Momentum", ["V"], 1, TensorProto.FLOAT, dict(alpha=0.9, mode="standard",
                                                                      norm_coefficient=0.0))
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(Exception, match="'beta' is required"):
        cuvil.load_onnx(str(tmp_path / "m.onnx"))
