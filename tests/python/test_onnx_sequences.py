"""ONNX sequence and optional values, resolved when the graph is built (src/frontend/onnx/static_sequences.h):
each model is checked against ONNX Runtime on the same inputs, and what cannot be resolved statically must fail
with an error naming the op, the node and why."""
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import cuvil  # noqa: E402
from onnx_build import check_against_ort, vi  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64
rng = np.random.default_rng(7)


def model(nodes, inputs, outputs, opset=17, initializers=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def seq_vi(name, elem, shape):
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape)))


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(arr), name))


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(m, feeds, tmp_path):
    check_against_ort(m, feeds, tmp_path, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis,new_axis", [(0, 0), (1, 0), (-1, 0), (0, 1), (2, 1), (-1, 1), (-3, 1)])
def test_construct_then_concat(tmp_path, axis, new_axis):
    shape = [2, 3] if new_axis else [2, 3, 5]
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)]
    m = model(nodes, [vi(n, F, shape) for n in "abc"], [vi("y", F, None)])
    check(m, {n: randn(*shape) for n in "abc"}, tmp_path)


def test_insert_erase_at_length(tmp_path):
    # Constant positions, negative ones included; the sequence's elements have different shapes.
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
             const("p0", np.array(0, np.int64)), const("pm1", np.array(-1, np.int64)),
             helper.make_node("SequenceInsert", ["s0", "c", "p0"], ["s1"]),  # c, a, b
             helper.make_node("SequenceInsert", ["s1", "a"], ["s2"]),  # c, a, b, a
             helper.make_node("SequenceErase", ["s2", "pm1"], ["s3"]),  # c, a, b
             helper.make_node("SequenceErase", ["s3"], ["s4"]),  # c, a
             helper.make_node("SequenceAt", ["s4", "pm1"], ["last"]),
             helper.make_node("SequenceAt", ["s3", "p0"], ["first"]),
             helper.make_node("SequenceLength", ["s2"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=0)]
    m = model(nodes, [vi("a", F, [2, 4]), vi("b", F, [3, 4]), vi("c", F, [1, 4])],
              [vi("last", F, None), vi("first", F, None), vi("n", I64, []), vi("cat", F, None)])
    check(m, {"a": randn(2, 4), "b": randn(3, 4), "c": randn(1, 4)}, tmp_path)


@pytest.mark.parametrize("split,keepdims", [(None, 1), (None, 0), (np.array(2, np.int64), 1),
                                            (np.array([1, 4, 2], np.int64), 1), (np.array(1, np.int64), 0),
                                            (np.array(1, np.int64), 1)])
def test_split_to_sequence(tmp_path, split, keepdims):
    nodes, ins = [], ["x"]
    if split is not None:
        nodes.append(const("split", split))
        ins.append("split")
    nodes += [helper.make_node("SplitToSequence", ins, ["s"], axis=1, keepdims=keepdims),
              helper.make_node("SequenceLength", ["s"], ["n"]),
              const("p", np.array(-2, np.int64)),
              helper.make_node("SequenceAt", ["s", "p"], ["e"]),
              helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1 if keepdims else 0,
                               new_axis=0 if keepdims else 1)]
    m = model(nodes, [vi("x", F, [3, 7])], [vi("n", I64, []), vi("e", F, None), vi("y", F, None)])
    check(m, {"x": randn(3, 7)}, tmp_path)


def test_split_to_sequence_after_shape_inference(tmp_path):
    # The split axis's size is known only from inference over the nodes before (Transpose of [7, 3]).
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("SplitToSequence", ["t"], ["s"], axis=1, keepdims=0),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=-1, new_axis=1)]
    m = model(nodes, [vi("x", F, [7, 3])], [vi("y", F, None)])
    check(m, {"x": randn(7, 3)}, tmp_path)


def loop_body(scan_output=True):
    # (i, cond, seq) -> (cond, SequenceInsert(seq, x[i] * i), [x[i]])
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("SequenceAt", ["xs", "i"], ["xi"]),
             helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Mul", ["xi", "fi"], ["yi"]),
             helper.make_node("SequenceInsert", ["seq_in", "yi"], ["seq_out"])]
    outs = [vi("cond_out", TensorProto.BOOL, []),
            seq_vi("seq_out", F, None)]
    if scan_output:
        nodes.append(helper.make_node("Identity", ["xi"], ["scan"]))
        outs.append(vi("scan", F, None))
    return helper.make_graph(nodes, "body", [vi("i", I64, []), vi("cond_in", TensorProto.BOOL, []),
                                             seq_vi("seq_in", F, None)], outs)


@pytest.mark.parametrize("rows,scan_output", [(8, True), (7, False)])  # (7: chunks of unequal size, no stack)
def test_loop_carrying_a_sequence_is_unrolled(tmp_path, rows, scan_output):
    # The torch.onnx pattern for a Python loop over a list: trip count = SequenceLength of a static sequence.
    nodes = [const("two", np.array(2, np.int64)),
             helper.make_node("SplitToSequence", ["x", "two"], ["xs"], axis=0),
             helper.make_node("SequenceLength", ["xs"], ["n"]),
             const("true", np.array(True)),
             helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["n", "true", "empty"], ["seq"] + ["scans"] * scan_output,
                              body=loop_body(scan_output)),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0)]
    m = model(nodes, [vi("x", F, [rows, 3])], [vi("y", F, None)] + [vi("scans", F, None)] * scan_output)
    check(m, {"x": randn(rows, 3)}, tmp_path)


def test_sequence_map(tmp_path):
    body = helper.make_graph([helper.make_node("Add", ["e", "t"], ["o"]),
                              helper.make_node("Shape", ["e"], ["sh"])], "map_body",
                             [vi("e", F, None), vi("t", F, None)], [vi("o", F, None), vi("sh", I64, None)])
    nodes = [const("split", np.array([1, 3, 2], np.int64)),
             helper.make_node("SplitToSequence", ["x", "split"], ["xs"], axis=0),
             helper.make_node("SequenceMap", ["xs", "t"], ["os", "shapes"], body=body),
             helper.make_node("ConcatFromSequence", ["os"], ["y"], axis=0),
             helper.make_node("ConcatFromSequence", ["shapes"], ["s"], axis=0, new_axis=1)]
    m = model(nodes, [vi("x", F, [6, 4]), vi("t", F, [4])], [vi("y", F, None), vi("s", I64, None)])
    check(m, {"x": randn(6, 4), "t": randn(4)}, tmp_path)


@pytest.mark.parametrize("cond", [True, False])
def test_if_yielding_sequences_of_one_length(tmp_path, cond):
    def branch(name, op):
        return helper.make_graph([helper.make_node(op, ["a", "b"], [name + "_t"]),
                                  helper.make_node("SequenceConstruct", [name + "_t", "a"], [name + "_s"])],
                                 name, [], [seq_vi(name + "_s", F, None)])
    nodes = [helper.make_node("If", ["c"], ["s"], then_branch=branch("then", "Add"),
                              else_branch=branch("else", "Sub")),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    m = model(nodes, [vi("c", TensorProto.BOOL, []), vi("a", F, [2, 3]), vi("b", F, [2, 3])], [vi("y", F, None)])
    check(m, {"c": np.array(cond), "a": randn(2, 3), "b": randn(2, 3)}, tmp_path)


def test_optional_of_a_tensor(tmp_path):
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["e"]),
             helper.make_node("Relu", ["e"], ["y"])]
    m = model(nodes, [vi("x", F, [4])], [vi("has", TensorProto.BOOL, []), vi("y", F, None)], opset=18)
    check(m, {"x": randn(4)}, tmp_path)


def test_torch_exported_list_loop(tmp_path):
    """torch.jit.script over a Python list exports SplitToSequence -> Loop(SequenceInsert) -> ConcatFromSequence."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            out = []
            for p in torch.split(x, 2, dim=1):
                out.append(torch.relu(p) * 2)
            return torch.cat(out, dim=1)

    f = io.BytesIO()
    torch.onnx.export(torch.jit.script(M()), (torch.randn(3, 7),), f, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(f.getvalue())
    ops = {n.op_type for n in m.graph.node}
    assert {"SplitToSequence", "Loop", "ConcatFromSequence"} <= ops, ops
    x = randn(3, 7)
    check(m, {"x": x}, tmp_path)
    np.testing.assert_allclose(np.asarray(cuvil.load_onnx(str(tmp_path / "m.onnx"))(x=x)),
                               np.maximum(x, 0) * 2, rtol=1e-6)


def test_errors_name_op_node_and_why(tmp_path):
    # A split computed at run time: the sequence's length is not known when the graph is built.
    m = model([helper.make_node("SplitToSequence", ["x", "k"], ["s"], name="splitter", axis=0),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
              [vi("x", F, [6]), vi("k", I64, [])], [vi("y", F, None)])
    onnx.save(m, str(tmp_path / "split.onnx"))
    with pytest.raises(cuvil.Error, match=r"SplitToSequence node 'splitter'.*computed at run time"):
        cuvil.load_onnx(str(tmp_path / "split.onnx"))
    # A Loop carrying a sequence with a run-time trip count cannot be unrolled, and its body reads the sequence
    # (its length) besides appending to it, so it is no scan output either.
    body = loop_body(scan_output=False)
    body.node.append(helper.make_node("SequenceLength", ["seq_in"], ["len"]))
    body.node.append(helper.make_node("Cast", ["len"], ["flen"], to=F))
    body.output.append(vi("flen", F, []))
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["xs"]),
             helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["n", "", "empty"], ["seq", "lens"], body=body, name="lp"),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0)]
    m = model(nodes, [vi("x", F, [6]), vi("n", I64, [])], [vi("y", F, None), vi("lens", F, None)])
    onnx.save(m, str(tmp_path / "loop.onnx"))
    with pytest.raises(cuvil.Error, match=r"Loop node 'lp'.*computed at run time.*only append one tensor"):
        cuvil.load_onnx(str(tmp_path / "loop.onnx"))
    # A sequence of run-time length as a graph output has no fixed list of tensors to become.
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["xs"]),
             helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["n", "", "empty"], ["seq"], body=loop_body(scan_output=False), name="lp")]
    m = model(nodes, [vi("x", F, [6]), vi("n", I64, [])], [seq_vi("seq", F, None)])
    onnx.save(m, str(tmp_path / "loop_out.onnx"))
    with pytest.raises(cuvil.Error, match=r"output 'seq' is a sequence whose length is known only at run time"):
        cuvil.load_onnx(str(tmp_path / "loop_out.onnx"))
    # A constant position out of range is the model's error.
    m = model([helper.make_node("SequenceConstruct", ["x"], ["xs"]), const("p", np.array(3, np.int64)),
               helper.make_node("SequenceAt", ["xs", "p"], ["y"], name="at")],
              [vi("x", F, [6])], [vi("y", F, None)])
    onnx.save(m, str(tmp_path / "at.onnx"))
    with pytest.raises(cuvil.Error, match=r"SequenceAt node 'at'.*position 3 is out of range"):
        cuvil.load_onnx(str(tmp_path / "at.onnx"))
    # (A sequence graph input is bound at call time from the list given: test_onnx_sequence_io.py.)


@pytest.mark.parametrize("pos", [0, 2, 3, -1, -3])
def test_positions_computed_at_run_time(tmp_path, pos):
    # The length stays static (3 elements of one shape); which element goes where is picked at run time.
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "t", "p"], ["ins"]),
             helper.make_node("ConcatFromSequence", ["ins"], ["y_ins"], axis=0, new_axis=1),
             helper.make_node("Clip", ["p", "lo", "hi"], ["q"]),  # a position valid for erase and at too
             helper.make_node("SequenceErase", ["s", "q"], ["er"]),
             helper.make_node("ConcatFromSequence", ["er"], ["y_er"], axis=0, new_axis=1),
             helper.make_node("SequenceAt", ["s", "q"], ["y_at"])]
    m = model(nodes, [vi(n, F, [2, 3]) for n in "abct"] + [vi("p", I64, []), vi("lo", I64, []), vi("hi", I64, [])],
              [vi("y_ins", F, None), vi("y_er", F, None), vi("y_at", F, None)])
    feeds = {n: randn(2, 3) for n in "abct"}
    feeds.update(p=np.array(pos, np.int64), lo=np.array(-3, np.int64), hi=np.array(2, np.int64))
    check(m, feeds, tmp_path)
    # Out of range: the run fails, naming the node (ONNX Runtime fails too).
    feeds["p"] = np.array(4, np.int64)
    with pytest.raises(Exception, match=r"SequenceInsert node 'ins'.*out of range"):
        cuvil.load_onnx(str(tmp_path / "m.onnx"))(**feeds)


def test_loop_reading_a_sequence_by_iteration(tmp_path):
    # A Loop with a run-time trip count (not unrolled) that reads an outer sequence at its iteration number.
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("SequenceAt", ["xs", "i"], ["xi"]),
                              helper.make_node("Add", ["acc_in", "xi"], ["acc_out"])], "body",
                             [vi("i", I64, []), vi("c_in", TensorProto.BOOL, []), vi("acc_in", F, [2])],
                             [vi("c_out", TensorProto.BOOL, []), vi("acc_out", F, [2])])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["xs"], axis=0, keepdims=0),
             helper.make_node("Loop", ["n", "", "zero"], ["y"], body=body)]
    m = model(nodes, [vi("x", F, [5, 2]), vi("n", I64, []), vi("zero", F, [2])], [vi("y", F, None)])
    check(m, {"x": randn(5, 2), "n": np.array(3, np.int64), "zero": np.zeros(2, np.float32)}, tmp_path)


def test_split_inside_nested_regions(tmp_path):
    # A SplitToSequence in an If branch inside a Loop body: the split axis's size comes from inference over the
    # main graph, the body (its declared input type) and the branch, none of them finished yet.
    branch = helper.make_graph([helper.make_node("SplitToSequence", ["r"], ["rs"], axis=0, keepdims=0),
                                helper.make_node("ConcatFromSequence", ["rs"], ["rc"], axis=0, new_axis=1)],
                               "then", [], [vi("rc", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["acc_in"], ["ng"])], "else", [], [vi("ng", F, None)])
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Relu", ["acc_in"], ["r"]),  # typed by inference of the body
                              helper.make_node("If", ["c_in"], ["b"], then_branch=branch, else_branch=other),
                              helper.make_node("Add", ["b", "t"], ["acc_out"])], "body",
                             [vi("i", I64, []), vi("c_in", TensorProto.BOOL, []), vi("acc_in", F, [3, 2])],
                             [vi("c_out", TensorProto.BOOL, []), vi("acc_out", F, None)])
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Loop", ["n", "", "t"], ["y"], body=body)]
    m = model(nodes, [vi("x", F, [2, 3]), vi("n", I64, [])], [vi("y", F, None)])
    check(m, {"x": randn(2, 3), "n": np.array(3, np.int64)}, tmp_path)


def test_tensor_op_given_a_sequence_is_refused(tmp_path):
    m = model([helper.make_node("SequenceConstruct", ["x"], ["s"]), helper.make_node("Relu", ["s"], ["y"], name="r")],
              [vi("x", F, [6])], [vi("y", F, None)])
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(cuvil.Error, match=r"Relu node 'r': input 0 \('s'\) is a sequence, which this op cannot take"):
        cuvil.load_onnx(str(tmp_path / "m.onnx"))


@pytest.mark.parametrize("axis,new_axis", [(0, 1), (1, 1), (-1, 1), (0, 0), (1, 0), (-1, 0)])
def test_loop_appending_with_run_time_trip_count(tmp_path, axis, new_axis):
    # Not unrollable (n is an input): the appended list becomes the Loop's scan output, read by
    # ConcatFromSequence, SequenceLength and SequenceAt.
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Cast", ["i"], ["fi"], to=F),
                              helper.make_node("Mul", ["x", "fi"], ["v"]),
                              helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"]),
                              helper.make_node("Add", ["acc_in", "v"], ["acc_out"])], "body",
                             [vi("i", I64, []), vi("c_in", TensorProto.BOOL, []), seq_vi("seq_in", F, None),
                              vi("acc_in", F, None)],
                             [vi("c_out", TensorProto.BOOL, []), seq_vi("seq_out", F, None), vi("acc_out", F, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["n", "", "empty", "zero"], ["seq", "acc"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=axis, new_axis=new_axis),
             helper.make_node("SequenceLength", ["seq"], ["len"]),
             const("last", np.array(-1, np.int64)),
             helper.make_node("SequenceAt", ["seq", "last"], ["at"])]
    m = model(nodes, [vi("x", F, [2, 3]), vi("n", I64, []), vi("zero", F, [2, 3])],
              [vi("y", F, None), vi("acc", F, None), vi("len", I64, []), vi("at", F, None)])
    for n in (1, 4):
        check(m, {"x": randn(2, 3), "n": np.array(n, np.int64), "zero": np.zeros((2, 3), np.float32)}, tmp_path)


@pytest.mark.parametrize("stack", [True, False])
def test_torch_exported_list_append_in_dynamic_loop(tmp_path, stack):
    """A scripted loop over a dynamic dim appending to a list, then torch.stack / torch.cat."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def __init__(self, stack: bool):
            super().__init__()
            self.stack = stack

        def forward(self, x):
            outs = []
            for i in range(x.size(0)):
                outs.append(torch.relu(x[i]) * 2 + float(i))
            return torch.stack(outs, dim=1) if self.stack else torch.cat(outs, dim=1)

    f = io.BytesIO()
    torch.onnx.export(torch.jit.script(M(stack)), (torch.randn(4, 3, 5),), f, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}})
    m = onnx.load_from_string(f.getvalue())
    assert "Loop" in {n.op_type for n in m.graph.node}
    for n in (4, 1, 6):
        check(m, {"x": randn(n, 3, 5)}, tmp_path)


def test_loop_too_long_to_unroll_appends_as_scan_output(tmp_path):
    # A constant trip count above the unrolling limit (4096): the appended list becomes a scan output instead.
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Cast", ["i"], ["fi"], to=F),
                              helper.make_node("Mul", ["x", "fi"], ["v"]),
                              helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"])], "body",
                             [vi("i", I64, []), vi("c_in", TensorProto.BOOL, []), seq_vi("seq_in", F, None)],
                             [vi("c_out", TensorProto.BOOL, []), seq_vi("seq_out", F, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F), const("n", np.array(5000, np.int64)),
             helper.make_node("Loop", ["n", "", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0)]
    m = model(nodes, [vi("x", F, [2])], [vi("y", F, None)])
    check(m, {"x": randn(2)}, tmp_path)


@pytest.mark.parametrize("axis,keepdims", [(1, 0), (0, 0), (-1, 1), (1, 1)])
def test_unbind_along_a_dim_of_run_time_size(tmp_path, axis, keepdims):
    # SplitToSequence without split along a symbolic dim, read back in a Loop (SequenceAt at the iteration number,
    # appended), by SequenceLength and by ConcatFromSequence.
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("SequenceAt", ["xs", "i"], ["xi"]),
                              helper.make_node("Relu", ["xi"], ["v"]),
                              helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"])], "body",
                             [vi("i", I64, []), vi("c_in", TensorProto.BOOL, []), seq_vi("seq_in", F, None)],
                             [vi("c_out", TensorProto.BOOL, []), seq_vi("seq_out", F, None)])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["xs"], axis=axis, keepdims=keepdims),
             helper.make_node("SequenceLength", ["xs"], ["n"]),
             helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["n", "", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=axis, new_axis=1 - keepdims),
             helper.make_node("ConcatFromSequence", ["xs"], ["z"], axis=0, new_axis=0)]
    m = model(nodes, [vi("x", F, ["a", "b", "c"])], [vi("n", I64, []), vi("y", F, None), vi("z", F, None)])
    for shape in [(2, 3, 4), (3, 1, 2)]:
        check(m, {"x": randn(*shape)}, tmp_path)


def test_torch_exported_unbind_loop(tmp_path):
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            outs = []
            for t in x.unbind(1):
                outs.append(torch.tanh(t))
            return torch.stack(outs, dim=0)

    f = io.BytesIO()
    torch.onnx.export(torch.jit.script(M()), (torch.randn(2, 5, 3),), f, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b", 1: "t"}})
    m = onnx.load_from_string(f.getvalue())
    for shape in [(2, 5, 3), (1, 7, 3)]:
        check(m, {"x": randn(*shape)}, tmp_path)
