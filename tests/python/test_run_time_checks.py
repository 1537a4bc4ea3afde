"""Exception branches: a `raise` under a data-dependent condition, an assert and torch._check compile into run-time
checks that raise the model's own exception, with its message, when and only when eager PyTorch raises."""
import numpy as np
import pytest
import torch

import cuvil


class RaisesValueError(torch.nn.Module):
    def forward(self, x):
        if x.abs().max() > 10.0:
            raise ValueError("input too large")
        return x * 2 + 1


class AssertsSum(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        assert y.sum() < 1000.0, "sum too big"
        return y


class ElseBranchRaises(torch.nn.Module):
    """The raise in the else branch, and the kept branch computes the result."""

    def forward(self, x):
        if x.min() >= 0.0:
            y = torch.sqrt(x)
        else:
            raise RuntimeError("negative input")
        return y + 1


class ChecksItem(torch.nn.Module):
    def forward(self, x):
        torch._check(x.abs().max().item() < 10.0, lambda: "too large")
        return x * 2


class AssertsAsync(torch.nn.Module):
    def forward(self, x):
        torch._assert_async(x.abs().max() < 10.0, "too large")
        return x - 1


def _run_both(model, capture, ok_input, bad_input, exc_type, message, dynamic_shapes=None):
    compiled = cuvil.compile(model, (ok_input,), capture=capture, dynamic_shapes=dynamic_shapes)
    torch.testing.assert_close(compiled(ok_input), model(ok_input))
    # numpy in, numpy out too; and the check runs on every call, not only the first
    np.testing.assert_allclose(compiled(ok_input.numpy()), model(ok_input).numpy(), rtol=1e-6)
    with pytest.raises(exc_type, match=message) as info:
        compiled(bad_input)
    if capture == "torchscript":
        with pytest.raises(exc_type, match=message):
            model(bad_input)
    notes = getattr(info.value, "__notes__", [])
    assert any("test_run_time_checks.py" in n for n in notes), notes  # the user's line
    # a failed check leaves the module usable
    torch.testing.assert_close(compiled(ok_input), model(ok_input))
    return compiled


@pytest.mark.parametrize("capture", ["torchscript", "auto"])
def test_raise_under_data_dependent_condition(capture):
    x = torch.randn(3, 5)
    _run_both(RaisesValueError().eval(), capture, x, x * 100, ValueError, "input too large")


def test_assert_becomes_assertion_error():
    x = torch.rand(4, 4)
    _run_both(AssertsSum().eval(), "torchscript", x, x + 100, AssertionError, "sum too big")


def test_raise_in_else_branch_keeps_then_branch():
    x = torch.rand(2, 7)
    compiled = _run_both(ElseBranchRaises().eval(), "torchscript", x, x - 2, RuntimeError, "negative input",
                         dynamic_shapes={"x": {0: "batch"}})
    # dynamic batch: the same check on a new size
    x2 = torch.rand(5, 7)
    torch.testing.assert_close(compiled(x2), ElseBranchRaises()(x2))


def test_message_names_symbolic_size():
    class BatchLimit(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] > 3:
                raise RuntimeError(f"batch {x.shape[0]} too big")
            return x.relu()

    x = torch.randn(2, 4)
    compiled = cuvil.compile(BatchLimit(), (x,), capture="torchscript", dynamic_shapes={"x": {0: "batch"}})
    torch.testing.assert_close(compiled(torch.randn(3, 4)).shape, torch.Size([3, 4]))
    with pytest.raises(RuntimeError, match="batch batch too big"):
        compiled(torch.randn(4, 4))


@pytest.mark.parametrize("model", [ChecksItem(), AssertsAsync()], ids=["torch._check", "torch._assert_async"])
def test_export_data_checks(model):
    x = torch.randn(3, 4)
    compiled = cuvil.compile(model, (x,), capture="export")
    torch.testing.assert_close(compiled(x), model(x))
    with pytest.raises(RuntimeError) as info:
        compiled(x * 100)
    assert isinstance(info.value, RuntimeError) and not isinstance(info.value, cuvil._C.Error)
    torch.testing.assert_close(compiled(x), model(x))


def test_dynamo_backend_runs_the_raise():
    model = RaisesValueError().eval()
    fast = torch.compile(model, backend="cuvil")
    x = torch.randn(3, 5)
    torch.testing.assert_close(fast(x), model(x))
    with pytest.raises(ValueError, match="input too large"):
        fast(x * 100)


def test_unknown_exception_class_is_a_runtime_error():
    # The class name comes from the model: a module that is not loaded is never imported for it.
    from cuvil.compiled import model_exception
    err = cuvil._C.CheckFailed("x")
    err.exception_type, err.message, err.location = "not_a_loaded_module.Boom", "boom", "m.py:3"
    exc = model_exception(err)
    assert type(exc) is RuntimeError and "not_a_loaded_module.Boom: boom" in str(exc)
    assert "m.py:3" in exc.__notes__[0]
