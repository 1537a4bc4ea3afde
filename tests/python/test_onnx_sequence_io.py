"""ONNX models whose graph inputs or outputs are sequences or optionals, called from Python as ONNX Runtime takes
them (python/cuvil/onnx_io.py): lists for sequence inputs, None for absent optionals; sequence outputs as lists.
Each binding (list lengths, absent optionals) compiles once; every result is checked against ONNX Runtime."""
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import cuvil  # noqa: E402
from onnx_build import vi  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64
rng = np.random.default_rng(11)


def model(nodes, inputs, outputs, opset=18):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def seq_vi(name, elem=F, shape=None):
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape)))


def opt_vi(name, elem=F, shape=None):
    return helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(elem, shape)))


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def save(m, tmp_path, name="m.onnx"):
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def concat_model():
    # y = concat(s) * w; n = len(s): the torch.onnx form of a forward(List[Tensor]).
    nodes = [helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
             helper.make_node("Mul", ["c", "w"], ["y"]),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    return model(nodes, [seq_vi("s", F, ["rows", 3]), vi("w", F, [3])], [vi("y", F, None), vi("n", I64, [])])


def test_sequence_input_binds_per_length(tmp_path):
    path = save(concat_model(), tmp_path)
    m = cuvil.load_onnx(path)
    assert m.input_names == ["s", "w"] and m.bindings == []
    w = randn(3)
    for lengths in ([2, 1, 4], [3, 3, 3], [5], [1, 1]):  # the second call reuses the first's binding
        s = [randn(r, 3) for r in lengths]
        got = m(s, w)
        want = ort_run(path, {"s": s, "w": w})
        assert_same(list(got), want)
    assert sorted(b[0]["s"] for b in m.bindings) == [1, 2, 3]
    # By keyword, and a tuple for the list.
    s = (randn(2, 3), randn(1, 3))
    assert_same(list(m(w=w, s=s)), ort_run(path, {"s": list(s), "w": w}))
    assert isinstance(m.compiled_for(s, w), cuvil.CompiledModule)


def test_sequence_input_read_by_a_loop(tmp_path):
    # A Loop over the list's length, as torch.onnx exports `for x in xs` in a scripted forward(List[Tensor]).
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("SequenceAt", ["xs", "i"], ["xi"]),
         helper.make_node("Add", ["acc_in", "xi"], ["acc_out"])],
        "body", [vi("i", I64, []), vi("c_in", TensorProto.BOOL, []), vi("acc_in", F, [4])],
        [vi("c_out", TensorProto.BOOL, []), vi("acc_out", F, [4])])
    nodes = [helper.make_node("SequenceLength", ["xs"], ["n"]),
             helper.make_node("Loop", ["n", "", "zero"], ["total"], body=body)]
    m = model(nodes, [seq_vi("xs", F, [4]), vi("zero", F, [4])], [vi("total", F, None)])
    path = save(m, tmp_path)
    compiled = cuvil.load_onnx(path)
    for k in (3, 1, 6):
        xs = [randn(4) for _ in range(k)]
        assert_same(compiled(xs, np.zeros(4, np.float32)),
                    ort_run(path, {"xs": xs, "zero": np.zeros(4, np.float32)})[0])


def test_sequence_output_is_a_list(tmp_path):
    nodes = [helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=0),
             helper.make_node("Relu", ["x"], ["r"])]
    m = model(nodes, [vi("x", F, [2, 3])], [seq_vi("parts", F, None), vi("r", F, None)])
    path = save(m, tmp_path)
    x = randn(2, 3)
    got = cuvil.load_onnx(path)(x)
    want = ort_run(path, {"x": x})
    assert isinstance(got, tuple) and len(got) == 2
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])
    # A single sequence output is that list.
    m = model(nodes[:1], [vi("x", F, [2, 3])], [seq_vi("parts", F, None)])
    path = save(m, tmp_path, "one.onnx")
    assert_same(cuvil.load_onnx(path)(x), ort_run(path, {"x": x})[0])


def optional_model():
    # has = o is present; y = (o if present else d) + 1.
    then = helper.make_graph([helper.make_node("OptionalGetElement", ["o"], ["v"])], "then", [], [vi("v", F, [3])])
    other = helper.make_graph([helper.make_node("Identity", ["d"], ["u"])], "other", [], [vi("u", F, [3])])
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("If", ["has"], ["picked"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["picked", "one"], ["y"]),
             helper.make_node("Constant", [], ["one"], value_float=1.0)]
    nodes = [nodes[3]] + nodes[:3]
    return model(nodes, [opt_vi("o", F, [3]), vi("d", F, [3])], [vi("has", TensorProto.BOOL, []), vi("y", F, None)])


def test_optional_input_present_absent_and_left_out(tmp_path):
    path = save(optional_model(), tmp_path)
    m = cuvil.load_onnx(path)
    o, d = randn(3), randn(3)
    has, y = m(o, d)
    assert bool(has) and np.allclose(y, o + 1)
    has, y = m(None, d)
    assert not bool(has) and np.allclose(y, d + 1)
    has, y = m(d=d)  # left out: absent, as in ONNX Runtime
    assert not bool(has) and np.allclose(y, d + 1)
    assert len(m.bindings) == 2
    assert_same(list(m(o, d)), ort_run(path, {"o": o, "d": d}))


def test_bad_bindings_are_clear_errors(tmp_path):
    m = cuvil.load_onnx(save(concat_model(), tmp_path))
    w = randn(3)
    with pytest.raises(cuvil.InputError, match="input 's' is a sequence: give a list"):
        m(randn(2, 3), w)
    with pytest.raises(cuvil.InputError, match="input 'w' is not optional"):
        m([randn(2, 3)], None)
    with pytest.raises(cuvil.InputError, match="input 'w' is a tensor, not a sequence"):
        m([randn(2, 3)], [w])
    with pytest.raises(cuvil.InputError, match="missing input 'w'"):
        m([randn(2, 3)])
    with pytest.raises(cuvil.InputError, match="unknown input"):
        m([randn(2, 3)], w, z=w)
    # Elements that do not fit the model: the bound module's own checks name the element's input.
    with pytest.raises(ValueError, match="s_1"):
        m([randn(2, 3), randn(2, 4)], w)
    # An empty list binds a sequence of length 0, which ConcatFromSequence refuses when the model compiles.
    with pytest.raises(cuvil.CompileError, match="ConcatFromSequence"):
        m([], w)


def test_threads_share_bindings(tmp_path):
    path = save(concat_model(), tmp_path)
    m = cuvil.load_onnx(path)
    w = randn(3)
    cases = [[randn(1 + (i % 3), 3) for _ in range(1 + i % 2)] for i in range(12)]
    results = [None] * len(cases)

    def work(i):
        results[i] = m(cases[i], w)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s, got in zip(cases, results):
        assert_same(list(got), ort_run(path, {"s": s, "w": w}))
    assert sorted(b[0]["s"] for b in m.bindings) == [1, 2]


def test_if_of_a_constant_condition_converts_only_its_taken_branch(tmp_path):
    # The untaken branch splits x into parts its shape cannot give; converting it would fail (as it did), but a
    # condition known while importing means it never runs. (ONNX Runtime's checker refuses this model outright.)
    then = helper.make_graph([helper.make_node("Split", ["x"], ["a", "b", "c", "d"], axis=0, num_outputs=4)],
                             "then", [], [vi(n, F, None) for n in "abcd"][:1])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "other", [], [vi("n", F, None)])
    for cond, want in ((False, lambda x: -x), (True, None)):
        nodes = [helper.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(np.array(cond))),
                 helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="pick")]
        path = save(model(nodes, [vi("x", F, [2])], [vi("y", F, None)]), tmp_path, f"if_{cond}.onnx")
        x = randn(2)
        if want is None:  # taken: the branch's own error, naming its node
            with pytest.raises(cuvil.CompileError, match="Split"):
                cuvil.load_onnx(path)
        else:
            np.testing.assert_array_equal(cuvil.load_onnx(path)(x), want(x))
