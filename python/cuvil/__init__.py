"""Cuvil: compile PyTorch and ONNX models into fast native engines.

    import cuvil, torch
    compiled = cuvil.compile(model, (x,), dynamic_shapes={"x": {0: "batch"}})
    y = compiled(x)                       # same call signature as model(x); torch or NumPy in and out
    print(compiled.profile(x))            # per-node kernel times with Python source lines
    m = cuvil.load_onnx("model.onnx")     # the same compiled-module type

Convolutions, matrix products and pooling run on oneDNN (fused with their bias, residual and activation),
the rest on Cuvil's kernels; the reference kernels remain the oracle.
"""
import os as _os

# OpenMP workers (oneDNN's and Cuvil's) spin only briefly before sleeping: as fast as spinning on an idle machine,
# and no collapse when other work shares the cores (libgomp's default spin made runs 8x slower then). Only
# effective when set before libgomp loads (i.e. before torch is imported); an explicit setting wins.
if "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import sys as _sys
if "tensorflow" in _sys.modules:
    # TensorFlow loads its framework library globally, and it exports its own protobuf: the ONNX importer's calls
    # would bind to that one (another version: a crash). Binding the extension to its own libraries first avoids
    # it; imported before TensorFlow, the extension's symbols are bound already (Python loads with RTLD_NOW).
    _flags = _sys.getdlopenflags()
    _sys.setdlopenflags(_os.RTLD_NOW | _os.RTLD_DEEPBIND)
    try:
        from . import _C
    finally:
        _sys.setdlopenflags(_flags)
else:
    from . import _C
from .errors import (CaptureWarning, CheckFailed, CompileError, Error, InputError, InternalError, RunCancelled,
                     RunError, RunLimitExceeded)
from .compiled import CompiledModule, Profile, ProfileRow, load_onnx
from .artifact import ArtifactError, load
from .cache import CacheWarning
from .quantization import quantize
try:
    from .frontend.capture import compile
except ImportError as _e:  # no torch: ONNX models only
    _torch_missing = str(_e)

    def compile(model=None, *args, **kwargs):  # noqa: A001 - the public name
        from .frontend import tensorflow as _tensorflow
        if model is not None and _tensorflow.is_tensorflow(model):
            return _tensorflow.compile_tensorflow(model, *args, **kwargs)
        raise ImportError(f"cuvil.compile needs PyTorch ({_torch_missing})")

__version__: str = _C.__version__

# torch.compile(model, backend="cuvil") also when cuvil is used from a source tree (no entry point). Registering
# imports torch._dynamo, which loads Triton where torch ships it; Triton's LLVM crashes the process when it loads
# after TensorFlow's (`import tensorflow; import triton` segfaults), so after TensorFlow it is left to the entry
# point of an installed cuvil.
if "tensorflow" not in _sys.modules or "triton" in _sys.modules:
    try:
        from .dynamo import register as _register_dynamo_backend
        _register_dynamo_backend()
    except ImportError:  # no torch: ONNX models only
        pass

__all__ = ["compile", "load_onnx", "load", "quantize", "ArtifactError", "CompiledModule", "Profile", "ProfileRow", "Error",
           "CompileError", "InputError", "RunError", "RunCancelled", "RunLimitExceeded", "CheckFailed", "InternalError",
           "CaptureWarning", "CacheWarning", "__version__"]
