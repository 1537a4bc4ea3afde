"""Cuvil: compile PyTorch and ONNX models into fast native engines.

    import cuvil, torch
    compiled = cuvil.compile(model, (x,), dynamic_shapes={"x": {0: "batch"}})
    y = compiled(x)                       # same call signature as model(x); torch or NumPy in and out
    print(compiled.profile(x))            # per-node kernel times with Python source lines
    m = cuvil.load_onnx("model.onnx")     # the same compiled-module type

Models run on Cuvil's reference backend (plain-loop kernels) for now: exact, not yet fast.
"""
from . import _C
from .errors import CaptureWarning, CompileError, InputError
from .compiled import CompiledModule, Profile, ProfileRow, load_onnx
from .frontend.torchscript import compile

__version__: str = _C.__version__

__all__ = ["compile", "load_onnx", "CompiledModule", "Profile", "ProfileRow", "CompileError", "InputError",
           "CaptureWarning", "__version__"]
