"""Front-end reliability: in-place writes (refused on inputs and state by both capture paths, modelled on
intermediates), guards the trace fall-back would drop, and compile errors that name the model's path once and the
ATen op with the user's line."""
import os
import re
import warnings

import numpy as np
import pytest
import torch

import cuvil

HERE = os.path.basename(__file__)


def line_of(tag: str) -> int:
    """The line of this file that ends with `# tag`."""
    return next(i for i, s in enumerate(open(__file__), 1) if s.rstrip().endswith(f"# {tag}"))


def eager(model, *args):
    """The model's eager result on copies of the inputs (eager in-place ops may write into them)."""
    with torch.no_grad():
        return model(*[a.clone() for a in args])


# ---- in-place writes to inputs and state: both capture paths refuse them, naming the op and the line.
# Eager PyTorch writes into the caller's tensors (or the module's buffers); a compiled model returns fresh outputs
# and never writes to its inputs, so it would silently compute something else.


class AddInPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1)  # W-ADD
        return x * 2


class ReluInPlace(torch.nn.Module):
    def forward(self, x):
        y = torch.relu_(x)  # W-RELU
        return y + x


class WriteThroughSelect(torch.nn.Module):
    def forward(self, x):
        x[0].add_(1)  # W-SELECT
        return x * 2


class WriteThroughView(torch.nn.Module):
    def forward(self, x):
        x.view(-1).relu_()  # W-VIEW
        return x + 1


class OutArgument(torch.nn.Module):
    def forward(self, x):
        torch.add(x, 1, out=x)  # W-OUT
        return x * 2


class SameDtypeConversion(torch.nn.Module):
    """x.float() of a float tensor is x itself."""

    def forward(self, x):
        y = x.float()
        y.div_(255)  # W-FLOAT
        return y


class BufferUpdate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3, 4))

    def forward(self, x):
        self.total.add_(x)  # W-BUFFER
        return x * 2


INPUT_WRITES = [
    (AddInPlace, "W-ADD", "input 'x'", r"aten::add_;"),
    (ReluInPlace, "W-RELU", "input 'x'", r"aten::relu_;"),
    (WriteThroughSelect, "W-SELECT", "input 'x'", r"aten::add_ on a view of it \(aten::select\)"),
    (WriteThroughView, "W-VIEW", "input 'x'", r"aten::relu_ on a view of it \(aten::view\)"),
    (OutArgument, "W-OUT", "input 'x'", r"aten::add \(its out= argument\)"),
    (SameDtypeConversion, "W-FLOAT", "input 'x'", r"aten::div_"),
    (BufferUpdate, "W-BUFFER", "buffer 'total'", r"aten::add_;"),
]


@pytest.mark.parametrize("capture", ["auto", "torchscript", "export"])
@pytest.mark.parametrize("cls, tag, what, op", INPUT_WRITES, ids=[c[1] for c in INPUT_WRITES])
def test_writes_to_inputs_and_state_are_refused_alike_by_both_paths(cls, tag, what, op, capture):
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cuvil.CaptureWarning)  # refused where found, not passed to another path
        with pytest.raises(cuvil.CompileError) as e:
            cuvil.compile(cls(), (x,), capture=capture)
    msg = str(e.value)
    assert re.search(rf"forward\(\) mutates {what} in place \(at [^()]*{HERE}:{line_of(tag)}\) with {op}", msg), msg
    assert "never writes to its inputs or state" in msg


class UnscriptableWrite(torch.nn.Module):
    def forward(self, x):
        double = lambda t: t * 2  # noqa: E731 - TorchScript has no lambdas: traced
        x.mul_(3)  # W-TRACED
        return double(x)


def test_traced_write_to_an_input_is_refused():
    with pytest.warns(cuvil.CaptureWarning, match="torch.jit.trace"):
        with pytest.raises(cuvil.CompileError, match=rf"mutates input 'x' in place \(at [^()]*{HERE}:"
                                                     rf"{line_of('W-TRACED')}\) with aten::mul_"):
            cuvil.compile(UnscriptableWrite(), (torch.randn(4),))


# ---- in-place writes to intermediate tensors: compiled through TorchScript (no fall-back), as eager computes


class Intermediate(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y.add_(1)
        return y


class ViewTakenBefore(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        v = y.view(-1)
        y.add_(1)  # v sees the write
        return v


class SelectTakenBefore(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        row = y[0]
        y.mul_(3)
        return row + 1


class TransposeTakenBefore(torch.nn.Module):
    def forward(self, x):
        y = x - 0.5
        t = y.t()
        y.relu_()
        return t * 1.0, y


class IntermediateOut(torch.nn.Module):
    def forward(self, x):
        y = x * 0
        torch.mul(x, 3, out=y)
        return y + 1


class ResultAliases(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        z = y.add_(1)
        return z * y


class CastThenWrite(torch.nn.Module):
    """uint8 -> float is a copy: writing it leaves the input alone."""

    def forward(self, x):
        y = x.float()
        y.div_(255)
        return y


class WriteInBranch(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if bool(x.sum() > 0):
            y.add_(1)
        return y - x


class WriteInLoop(torch.nn.Module):
    def forward(self, x):
        y = x.abs() + 1
        while bool(y.sum() < 100):
            y.mul_(2)
        return y


class WriteInUnrolledLoop(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        for _ in range(3):
            y.add_(1)
        return y


class WriteThroughViewNothingElseReads(torch.nn.Module):
    def forward(self, x):
        v = (x * 2).view(-1)
        v.relu_()  # writes (x * 2) too, which nothing reads
        return v * 3


class WriteAfterReshapeNothingElseReads(torch.nn.Module):
    def forward(self, x):
        y = (x - 0.5).t().reshape(-1)  # a copy or a view: the same here, as nothing else reads it
        y.relu_()
        return y


INTERMEDIATE = [Intermediate, ViewTakenBefore, SelectTakenBefore, TransposeTakenBefore, IntermediateOut,
                ResultAliases, CastThenWrite, WriteInBranch, WriteInLoop, WriteInUnrolledLoop,
                WriteThroughViewNothingElseReads, WriteAfterReshapeNothingElseReads]
DATA_DEPENDENT = {WriteInBranch, WriteInLoop}  # torch.export cannot capture these


def _example(cls):
    if cls is CastThenWrite:
        return torch.randint(0, 255, (3, 4), dtype=torch.uint8)
    return torch.randn(3, 4)


@pytest.mark.parametrize("cls", INTERMEDIATE, ids=[c.__name__ for c in INTERMEDIATE])
def test_writes_to_intermediates_compile_through_torchscript_as_eager_computes(cls):
    x = _example(cls)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cuvil.CaptureWarning)  # no fall-back: TorchScript's capture models it
        c = cuvil.compile(cls(), (x,))
    inputs = [x, -x, x * 3] if x.dtype.is_floating_point else [x, 255 - x]
    for a in inputs:
        before = a.clone()
        got, ref = c(a), eager(cls(), a)
        for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            assert g.dtype == r.dtype and g.shape == r.shape
            assert torch.allclose(g, r, atol=1e-6), (cls.__name__, g, r)
        assert torch.equal(a, before)  # the compiled model never writes to its inputs


@pytest.mark.parametrize("cls", [c for c in INTERMEDIATE if c not in DATA_DEPENDENT],
                         ids=[c.__name__ for c in INTERMEDIATE if c not in DATA_DEPENDENT])
def test_writes_to_intermediates_through_export_agree(cls):
    x = _example(cls)
    c = cuvil.compile(cls(), (x,), capture="export")
    got, ref = c(x), eager(cls(), x)
    for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
        assert torch.allclose(g, r, atol=1e-6)


class WriteThroughIntermediateView(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y[0].add_(1)  # W-INNER-VIEW
        return y


class WriteAfterReshape(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        z = y.reshape(-1)  # a view here, a copy for other strides: TorchScript's graph cannot tell
        y.add_(1)  # W-RESHAPE
        return z


class WriteThroughViewInLoop(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        row = y[0]
        total = x.sum() * 0
        for _ in range(3):
            total = total + y.sum()  # the next iteration reads what the write below changed
            row.add_(1)  # W-LOOP-VIEW
        return total


@pytest.mark.parametrize("cls, tag, pattern", [
    (WriteThroughIntermediateView, "W-INNER-VIEW", r"writes in place through a view \(aten::select\)"),
    (WriteThroughViewInLoop, "W-LOOP-VIEW", r"through a view \(aten::select\) .* aten::mul at [^ ]+ sees that"),
    (WriteAfterReshape, "W-RESHAPE", r"the result of aten::reshape at [^ ]+ may share that memory"),
])
def test_writes_torchscript_cannot_model_go_to_export(cls, tag, pattern):
    x = torch.randn(3, 4)
    with pytest.raises(cuvil.CompileError, match=rf"aten::add_ at [^ ]*{HERE}:{line_of(tag)} .*{pattern}"):
        cuvil.compile(cls(), (x,), capture="torchscript")
    with pytest.warns(cuvil.CaptureWarning, match="compiled through torch.export"):
        c = cuvil.compile(cls(), (x,))
    assert torch.allclose(c(x), eager(cls(), x))


# ---- guards the trace fall-back would drop


class GuardedUnscriptable(torch.nn.Module):
    def __init__(self, limit: float = 10.0):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        scale = lambda t: t * 2  # noqa: E731 - not scriptable: traced
        if x.abs().max() > self.limit:
            raise ValueError("input out of range")  # GUARD-RAISE
        return scale(x)


class GuardFlagUnscriptable(torch.nn.Module):
    def forward(self, x):
        scale = lambda t: t * 2  # noqa: E731
        bad = bool(torch.isnan(x).any())
        y = scale(x)
        if bad:
            raise ValueError("NaN input")  # GUARD-FLAG
        return y


class GuardAssertUnscriptable(torch.nn.Module):
    def forward(self, x):
        scale = lambda t: t * 2  # noqa: E731
        assert (x > -100).all(), "input out of range"  # GUARD-ASSERT
        return scale(x)


@pytest.mark.parametrize("capture", ["auto", "torchscript"])
@pytest.mark.parametrize("cls, tag, what", [
    (GuardedUnscriptable, "GUARD-RAISE", "raise ValueError"),
    (GuardFlagUnscriptable, "GUARD-FLAG", "raise ValueError"),
    (GuardAssertUnscriptable, "GUARD-ASSERT", "assert"),
])
def test_trace_fallback_refuses_a_raise_it_would_drop(cls, tag, what, capture):
    x = torch.rand(2, 3)
    assert torch.equal(cls()(x), x * 2)  # eager: in range, no raise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fall-back's CaptureWarning, the tracer's own
        with pytest.raises(cuvil.CompileError) as e:
            cuvil.compile(cls(), (x,), capture=capture)
    msg = str(e.value)
    assert re.search(rf"forward\(\) has `{what}` at [^ ]*{HERE}:{line_of(tag)} under a condition on tensor values",
                     msg), msg
    assert "torch.jit.trace" in msg and "cannot keep" in msg and "move the check out of forward()" in msg


class ShapeGuardUnscriptable(torch.nn.Module):
    def forward(self, x):
        scale = lambda t: t * 2  # noqa: E731
        if x.dim() != 2:  # sizes, not data: the trace specializes them anyway
            raise ValueError("expected a matrix")
        return scale(x)


def test_trace_fallback_keeps_compiling_guards_on_sizes():
    x = torch.rand(2, 3)
    with pytest.warns(cuvil.CaptureWarning, match="torch.jit.trace"):
        c = cuvil.compile(ShapeGuardUnscriptable(), (x,))
    assert torch.equal(c(x), x * 2)


def test_trace_fallback_passes_the_tracers_warnings_on():
    class DataBranch(torch.nn.Module):
        def forward(self, x):
            scale = lambda t: t * 2  # noqa: E731
            return scale(x) if bool(x.sum() > 0) else x

    with pytest.warns(torch.jit.TracerWarning, match="Converting a tensor to a Python boolean"):
        cuvil.compile(DataBranch(), (torch.rand(3),))


class CheckedItem(torch.nn.Module):
    def forward(self, x):
        n = x.sum().to(torch.int64).item()  # CHECK-ITEM
        torch._check(n >= 0)
        torch._check(n < 100)
        return x * 2


def test_export_keeps_a_check_on_tensor_data_as_a_run_time_check():
    x = torch.rand(3, 4)
    compiled = cuvil.compile(CheckedItem(), (x,), capture="export")
    assert torch.equal(compiled(x), x * 2)
    with pytest.raises(RuntimeError, match=r"torch._check\(u0 (< 100|<= 99)\) failed") as e:
        compiled(x + 20)  # the sum is >= 100
    assert any(f"{HERE}:" in n for n in e.value.__notes__), e.value.__notes__
    with pytest.raises(RuntimeError, match=r"torch._check\(u0 >= 0\) failed"):
        compiled(x - 20)
    assert torch.equal(compiled(x), x * 2)


# ---- compile errors name the model's path once


def test_load_onnx_errors_name_the_path_once(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"not an onnx model")
    node = helper.make_node("NoSuchOp", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    unsupported = tmp_path / "unsupported.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(unsupported))
    for path in (bad, unsupported):
        with pytest.raises(cuvil.CompileError) as e:
            cuvil.load_onnx(path)
        msg = str(e.value)
        assert msg.count(path.name) == 1, msg
        assert msg.startswith(f"{path}: ")
    with pytest.raises(cuvil.CompileError, match="NoSuchOp"):
        cuvil.load_onnx(unsupported)


# ---- unsupported constructs name the ATen op and the user's line, in both paths


class UsesInverse(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        return torch.linalg.inv(y)  # INV-LINE


class UsesInverseUnscriptable(torch.nn.Module):
    def forward(self, x):
        y = (lambda t: t + 1)(x)  # noqa: E731
        return torch.linalg.inv(y)  # INV-TRACED


@pytest.mark.parametrize("cls, tag, capture", [
    (UsesInverse, "INV-LINE", "torchscript"),
    (UsesInverse, "INV-LINE", "export"),
    (UsesInverseUnscriptable, "INV-TRACED", "torchscript"),
])
def test_unsupported_op_names_the_aten_op_and_the_users_line(cls, tag, capture):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the trace fall-back's warning
        with pytest.raises(cuvil.CompileError) as e:
            cuvil.compile(cls(), (torch.randn(3, 3),), capture=capture)
    msg = str(e.value)
    # (torch.export decomposes linalg_inv: the message names the op the model called beside it)
    origin = r" \(from aten::linalg_inv\)" if capture == "export" else ""
    assert re.search(rf"unsupported op 'aten::\w*linalg_inv\w*'{origin} at [^ ]*{HERE}:{line_of(tag)}\b", msg), msg
    assert msg.count(f"{HERE}:{line_of(tag)}") == 1, msg


class UsesGridSample(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.grid_sample(x, torch.zeros(1, 2, 2, 2), align_corners=False)  # GRID-LINE


def test_errors_in_decomposed_ops_name_the_op_the_model_called():
    with pytest.raises(cuvil.CompileError) as e:
        cuvil.compile(UsesGridSample(), (torch.randn(1, 1, 4, 4),), capture="export")
    msg = str(e.value)
    assert re.search(rf"aten::\w+'? \(from aten::grid_sampler\) at [^ ]*{HERE}:{line_of('GRID-LINE')}:", msg), msg


def test_argument_error_names_the_op_and_line_once():
    @torch.jit.script
    def bad_product(x, w):
        return torch.matmul(x, w)  # MATMUL-LINE

    with pytest.raises(cuvil.CompileError) as e:
        cuvil.compile(bad_product, (torch.randn(2, 3), torch.randn(4, 5)))
    msg = str(e.value)
    assert "aten::matmul" in msg and msg.count(f"{HERE}:{line_of('MATMUL-LINE')}") == 1, msg
