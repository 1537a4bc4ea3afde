"""Cuvil: compile PyTorch and ONNX models into fast native engines.

    import cuvil, torch
    compiled = cuvil.compile(model, (x,), dynamic_shapes={"x": {0: "batch"}})
    y = compiled(x)                       # same call signature as model(x)
    m = cuvil.load_onnx("model.onnx")     # the same compiled-module type
"""
from . import _C
from .errors import CompileError
from .compiled import CompiledModule, load_onnx
from .frontend.torchscript import compile

__version__ = _C.__version__

__all__ = ["compile", "load_onnx", "CompiledModule", "CompileError", "__version__"]
