"""Cuvil's Python exceptions.

CompileError: the model cannot be compiled (unsupported op, argument value or construct), with the op and its
Python source line. InputError: a call's inputs do not match the compiled model (count, dtype, rank, dims); it is
a ValueError, raised both by the Python layer and by the native core. CaptureWarning: compile fell back to
tracing.
"""
from . import _C


class CompileError(Exception):
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
                      "a static dim, or a symbolic dim bound to two different sizes. A ValueError subclass; the "
                      "message names the input.")

__all__ = ["CaptureWarning", "CompileError", "InputError", "UnsupportedError"]
