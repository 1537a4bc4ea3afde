"""Errors traced to the source: cuvil's exception hierarchy, run-time errors that name the IR node, the kernel, the
fused kernel and the user's Python call chain (or the ONNX node), in Python and in the CLI; fallback reasons in the
profile."""
import inspect
import os
import subprocess

import numpy as np
import pytest

import cuvil
from cuvil import _C

torch = pytest.importorskip("torch")
nn = torch.nn

THIS_FILE = os.path.basename(__file__)


def test_hierarchy():
    assert issubclass(cuvil.Error, RuntimeError)
    for cls in (cuvil.CompileError, cuvil.InputError, cuvil.RunError, cuvil.InternalError,
                cuvil.RunCancelled, cuvil.RunLimitExceeded, cuvil.CheckFailed):
        assert issubclass(cls, cuvil.Error), cls
    assert issubclass(cuvil.InputError, ValueError)  # (kept: callers catch ValueError for bad inputs)
    for cls in (cuvil.RunCancelled, cuvil.RunLimitExceeded, cuvil.CheckFailed):
        assert issubclass(cls, cuvil.RunError), cls
    assert not issubclass(cuvil.InternalError, (cuvil.CompileError, cuvil.InputError, cuvil.RunError, ValueError))
    assert cuvil.errors.UnsupportedError.__mro__[1] is cuvil.CompileError


def test_internal_error_is_not_a_user_error():
    b = _C.GraphBuilder("g")
    x = b.add_input("x", "f32", [2])
    with pytest.raises(cuvil.InternalError, match=r"^internal error: no op 'NoSuchOp' in the op table \(.*\.cpp:\d+\)"):
        b.add_node("NoSuchOp", [x])


def _line_of(fn, text: str) -> int:
    """The line of `fn`'s source holding `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 3)

    def forward(self, idx):
        return scale(self.emb(idx))  # THE LOOKUP


def scale(x):
    return x * 2.0


@pytest.mark.parametrize("capture", ["torchscript", "export"])
def test_gather_out_of_range_names_the_users_line_and_kernel(capture):
    model = Lookup().eval()
    compiled = cuvil.compile(model, (torch.tensor([1, 2, 3]),), capture=capture)
    np.testing.assert_allclose(compiled(torch.tensor([4, 0, 1])).numpy(),
                               model(torch.tensor([4, 0, 1])).detach().numpy(), rtol=1e-6)
    with pytest.raises(cuvil.RunError) as info:
        compiled(torch.tensor([1, 7, 2]))
    e = info.value
    line = _line_of(Lookup.forward, "THE LOOKUP")
    where = f"{THIS_FILE}:{line} in forward"
    assert where in e.source, e.source  # the user's line, not torch/nn/functional.py's
    assert "torch/nn/functional.py" not in str(e)
    assert where in str(e)
    assert e.node.startswith("Gather"), e.node
    assert e.kernel, str(e)
    assert "7" in e.detail and "out of range" in e.detail, e.detail
    assert isinstance(e, cuvil.Error) and not isinstance(e, ValueError)


def test_call_chain_lists_each_user_frame():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Lookup()

        def forward(self, idx):
            return self.inner(idx) + 1.0  # OUTER CALL

    compiled = cuvil.compile(Outer().eval(), (torch.tensor([1, 2]),), capture="torchscript")
    with pytest.raises(cuvil.RunError) as info:
        compiled(torch.tensor([9, 0]))
    outer = f"{__file__}:{_line_of(Outer.forward, 'OUTER CALL')} in forward"
    inner = f"{__file__}:{_line_of(Lookup.forward, 'THE LOOKUP')} in forward"
    assert info.value.source == f"{outer} -> {inner}", info.value.source


def _fused_int_division():
    """x // y + 1 on int32 (of 300 elements: fewer would be shape arithmetic, left unfused), one kernel at -O1."""
    b = _C.GraphBuilder("g")
    x = b.add_input("x", "i32", [300])
    y = b.add_input("y", "i32", [300])
    q = b.add_node("Div", [x, y], file="model.py", line=3, name="div", stack="app.py:10 in main\nmodel.py:3 in f")[0]
    one = b.add_constant("one", np.array(1, np.int32))
    r = b.add_node("Add", [q, one], file="model.py", line=4, name="add")[0]
    b.set_outputs([r])
    return b.build(1)


def test_division_by_zero_names_the_fused_kernel():
    m = _fused_int_division()
    x = np.arange(300, dtype=np.int32) * 5
    y = np.arange(300, dtype=np.int32) % 7 + 1
    np.testing.assert_array_equal(m.run([x, y])[0], x // y + 1)
    y[123] = 0
    with pytest.raises(cuvil.RunError) as info:
        m.run([x, y])
    e = info.value
    assert e.node.startswith("Div"), e.node
    assert e.fused_kernel.startswith("FusedKernel"), str(e)  # the body ran op by op inside the fused kernel
    assert e.source == "app.py:10 in main -> model.py:3 in f"
    assert "division by zero" in e.detail or "divides by zero" in e.detail or "zero" in e.detail, e.detail


def test_profile_records_fallback_reasons():
    m = _fused_int_division()
    compiled = cuvil.CompiledModule(m)
    x = np.arange(300, dtype=np.int32)
    prof = compiled.profile(x, np.full(300, 3, np.int32))
    assert any(row.impl.startswith("jit:") for row in prof.nodes), prof.nodes
    assert prof.nodes
    for row in prof.nodes:
        if row.impl.startswith("ref:"):
            assert row.fallback, row  # every reference kernel says why nothing faster ran
        if row.impl.startswith("jit:"):
            assert not row.fallback, row


def _onnx_gather(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    node = helper.make_node("Gather", ["data", "idx"], ["y"], name="lookup_table", axis=0)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 2]),
                                         helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_onnx_run_error_names_the_onnx_node(tmp_path, cuvil_bin):
    path = str(tmp_path / "gather.onnx")
    _onnx_gather(path)
    m = cuvil.load_onnx(path)
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(cuvil.RunError) as info:
        m(data, np.array([0, 4, 1], np.int64))
    assert info.value.source == "ONNX node 'lookup_table'"
    assert "lookup_table" in str(info.value)
    # The CLI prints the same message.
    np.save(tmp_path / "data.npy", data)
    np.save(tmp_path / "idx.npy", np.array([0, 4, 1], np.int64))
    r = subprocess.run([cuvil_bin, "run", path, "--input", f"data={tmp_path / 'data.npy'}", "--input",
                        f"idx={tmp_path / 'idx.npy'}", "--output-dir", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r
    assert "lookup_table" in r.stderr and "run-time error in node Gather" in r.stderr, r.stderr
