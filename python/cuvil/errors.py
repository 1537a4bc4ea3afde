"""Cuvil's Python exceptions: one hierarchy under :class:`cuvil.Error` (a RuntimeError).

    Error
    ├── CompileError        the model cannot be compiled (unsupported op, argument value or construct), with the
    │   └── UnsupportedError    op and its Python source line; UnsupportedError: one capture path cannot express it
    ├── InputError          a call's inputs do not match the compiled model (count, dtype, rank, dims); also a
    │                       ValueError, raised both by the Python layer and by the native core
    ├── RunError            a run-time failure inside the model (an index out of range, a shape that does not
    │   │                   broadcast, an integer division by zero): names the IR node (``.node``), the kernel
    │   │                   (``.kernel``), the fused kernel it ran in (``.fused_kernel``) and the user's Python call
    │   │                   chain or the ONNX node (``.source``)
    │   ├── RunCancelled / RunLimitExceeded   stopped by CompiledModule.cancel() or a limit of set_limits
    │   └── CheckFailed     a run-time check of the model (Assert) failed; the call raises the model's own exception
    └── InternalError       a bug of Cuvil's own (a broken invariant), never a problem with the user's input

CaptureWarning (a UserWarning): compile fell back to tracing.
"""
from . import _C

Error = _C.Error
Error.__doc__ = "The base of every Cuvil error (a RuntimeError subclass)."


class CompileError(Error):
    """A model cannot be compiled: an unsupported op, argument value or construct, named with its Python
    source line (or ONNX node) and, where there is one, what is supported instead."""


class UnsupportedError(CompileError):
    """What one capture path cannot express (an op without a converter, a model it cannot capture); another
    path may still compile the model, so cuvil.compile's automatic capture tries it."""


class CaptureWarning(UserWarning):
    """cuvil.compile fell back from torch.jit.script to torch.jit.trace: data-dependent control flow in forward()
    is frozen to the path the example inputs took. The message says why scripting failed."""


InputError = _C.InputError
InputError.__doc__ = ("A call's inputs do not match the compiled model: wrong count, unknown name, dtype, rank, "
                      "a static dim, or a symbolic dim bound to two different sizes. A cuvil.Error and a "
                      "ValueError; the message names the input.")

RunError = _C.RunError
RunError.__doc__ = ("A run-time failure inside the model. Attributes (set when the native core raised it): node "
                    "(the IR node, 'Gather -> %emb'), kernel (what it ran on, 'cpu:gather'), fused_kernel (the "
                    "FusedKernel whose body it was part of, or ''), source (the user's Python call chain "
                    "'test.py:40 in test -> model.py:12 in forward', or \"ONNX node 'name'\"), detail (the "
                    "kernel's own message).")

RunCancelled = _C.RunCancelled
RunCancelled.__doc__ = ("A call stopped by CompiledModule.cancel() from another thread. The message names the node "
                        "(or loop) it stopped before. A RunError.")

RunLimitExceeded = _C.RunLimitExceeded
RunLimitExceeded.__doc__ = ("A call stopped by a limit of CompiledModule.set_limits (or cuvil.load_onnx's timeout and "
                            "max_loop_iterations): it ran past its time limit, or a Loop/Scan node reached its "
                            "iteration limit. The message names the node and the limit. A RunError.")

CheckFailed = _C.CheckFailed
CheckFailed.__doc__ = ("A run-time check of the model (an Assert node) failed; the call raises the model's own "
                       "exception instead where it can (attributes exception_type, message, location). A RunError.")

InternalError = _C.InternalError
InternalError.__doc__ = ("A broken invariant of Cuvil's own: a bug to report (with the message), never a problem "
                         "with the model or its inputs.")

__all__ = ["CaptureWarning", "CheckFailed", "CompileError", "Error", "InputError", "InternalError", "RunCancelled",
           "RunError", "RunLimitExceeded", "UnsupportedError"]


def compile_error(e: BaseException, message: "str | None" = None) -> Error:
    """The error to raise for a native error `e` met while compiling: a CompileError with `message` (default:
    e's), except that an InternalError (a bug of Cuvil's) and an InputError stay what they are."""
    if isinstance(e, (InternalError, InputError)):
        return e
    return CompileError(str(e) if message is None else message)
