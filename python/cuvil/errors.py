"""Cuvil's Python exceptions.

CompileError: the model cannot be compiled (unsupported op, argument value or construct), with the op and its
Python source line. InputError: a call's inputs do not match the compiled model (count, dtype, rank, dims); it is
a ValueError, raised both by the Python layer and by the native core. RunCancelled / RunLimitExceeded: a call was
stopped by CompiledModule.cancel() or by a limit of CompiledModule.set_limits. CaptureWarning: compile fell back
to tracing.
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

RunCancelled = _C.RunCancelled
RunCancelled.__doc__ = ("A call stopped by CompiledModule.cancel() from another thread. The message names the node "
                        "(or loop) it stopped before. A RuntimeError subclass.")

RunLimitExceeded = _C.RunLimitExceeded
RunLimitExceeded.__doc__ = ("A call stopped by a limit of CompiledModule.set_limits (or cuvil.load_onnx's timeout and "
                            "max_loop_iterations): it ran past its time limit, or a Loop/Scan node reached its "
                            "iteration limit. The message names the node and the limit. A RuntimeError subclass.")

__all__ = ["CaptureWarning", "CompileError", "InputError", "RunCancelled", "RunLimitExceeded", "UnsupportedError"]
