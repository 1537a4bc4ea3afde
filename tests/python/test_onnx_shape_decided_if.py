"""An If whose condition the input shapes decide (frontend/onnx/shape_decided_ifs.h): `if x.dim() == 4` exported as
If(Equal(Size(Shape(x)), 4)), the expanded AffineGrid's 2-D / 3-D test. The branch not taken is written for other
shapes and cannot even be typed at these; it must not be converted at all. Conditions that depend on data keep
their If."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import cuvil  # noqa: E402
from onnx_build import model, vi  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(5)


def split_in_four():
    """A branch valid only for a channel count divisible by 4 (and it declares a value of its own)."""
    return helper.make_graph([helper.make_node("Split", ["x"], ["a", "b", "c", "d"], axis=1, num_outputs=4)],
                             "split4", [], [vi("a", F, None)], value_info=[vi("b", F, None)])


def rank_test(rank, then_branch, else_branch, x_shape, y_shape=None):
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Size", ["shape"], ["rank"]),
             helper.make_node("Constant", [], ["four"], value=onnx.numpy_helper.from_array(np.array(rank))),
             helper.make_node("Equal", ["rank", "four"], ["is_4d"]),
             helper.make_node("If", ["is_4d"], ["y"], then_branch=then_branch, else_branch=else_branch,
                              name="by_rank")]
    m = model(nodes, [vi("x", F, x_shape)], [vi("y", F, y_shape)], 18)
    m.graph.value_info.append(vi("is_4d", TensorProto.BOOL, []))
    return m


def save(m, tmp_path, name):
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def test_untaken_branch_invalid_for_the_shapes_is_never_converted(tmp_path):
    neg = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "neg", [], [vi("n", F, None)])
    path = save(rank_test(4, split_in_four(), neg, ["batch", 3, 5], ["batch", 3, 5]), tmp_path, "rank3.onnx")
    m = cuvil.load_onnx(path)
    assert "If" not in m.ir(), m.ir()
    for batch in (2, 5):  # one compiled object over a symbolic batch
        x = rng.standard_normal((batch, 3, 5)).astype(np.float32)
        np.testing.assert_array_equal(m(x), -x)


def test_taken_then_branch(tmp_path):
    relu = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "relu", [], [vi("r", F, None)])
    # Rank 4 with 3 channels: the else branch (split in four) is the invalid one now.
    path = save(rank_test(4, relu, split_in_four(), ["batch", 3, 4, 4]), tmp_path, "rank4.onnx")
    m = cuvil.load_onnx(path)
    assert "If" not in m.ir(), m.ir()
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(m(x), np.maximum(x, 0))


def test_declared_output_type_still_checked_after_inlining(tmp_path):
    neg = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "neg", [], [vi("n", F, None)])
    # The graph output (the If's) declared with rank 2: the model computes rank 3, and the error says so.
    path = save(rank_test(4, split_in_four(), neg, ["batch", 3, 5], ["batch", 15]), tmp_path, "declared.onnx")
    with pytest.raises(cuvil.CompileError, match="graph output 'y' is declared with rank 2"):
        cuvil.load_onnx(path)


def test_condition_on_data_keeps_the_if(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    neg = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "neg", [], [vi("n", F, None)])
    relu = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "relu", [], [vi("r", F, None)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Constant", [], ["zero"], value=onnx.numpy_helper.from_array(np.array(0, np.float32))),
             helper.make_node("Greater", ["s", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], then_branch=relu, else_branch=neg)]
    path = save(model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], 18), tmp_path, "data.onnx")
    m = cuvil.load_onnx(path)
    assert "If" in m.ir()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for sign in (1, -1):
        x = (sign * np.abs(rng.standard_normal((2, 3)))).astype(np.float32)
        np.testing.assert_array_equal(m(x), sess.run(None, {"x": x})[0])
