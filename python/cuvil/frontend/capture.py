"""cuvil.compile: picks how a PyTorch model is captured (torch.export, or TorchScript where export cannot) and
compiles the captured graph."""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import torch

from .. import _C
from .. import cache as _cache
from ..compiled import CompiledModule, check_options
from ..errors import CaptureWarning, CompileError, UnsupportedError, compile_error
from . import export as export_frontend
from . import lazy
from . import tensorflow as tensorflow_frontend
from . import torchscript
from ..weights import TorchRecipe

CAPTURES = ("auto", "export", "torchscript")


def _as_args(args) -> tuple:
    if isinstance(args, (torch.Tensor, np.ndarray)):
        args = (args,)
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"example_inputs must be a tensor or a tuple of tensors (one per forward() argument), got "
                        f"{type(args).__name__}")
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in args)


def _check_tensors(args: tuple, kwargs: dict, names: list[str]) -> None:
    for what, x in [(f"example input {i} ('{names[i]}')", a) for i, a in enumerate(args)] + \
                   [(f"example input '{k}'", v) for k, v in kwargs.items()]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{what} is a {type(x).__name__}; cuvil.compile takes tensors only (non-tensor "
                            f"arguments become constants: bind them in the module, e.g. with functools.partial or "
                            f"a wrapper module)")
        if x.dtype not in torchscript.TORCH_TO_CUVIL:
            raise TypeError(f"{what} has dtype {x.dtype}, which Cuvil does not support (supported: "
                            f"{', '.join(str(d).replace('torch.', '') for d in torchscript.TORCH_TO_CUVIL)})")
        if x.device.type != "cpu":
            raise ValueError(f"{what} is on {x.device}; example inputs must be CPU tensors")


def _is_dim(spec) -> bool:
    """A torch.export.Dim (named, or AUTO/DYNAMIC/STATIC)."""
    return isinstance(spec, (torch.export.Dim, torch.export.dynamic_shapes._DimHint)) or \
        type(spec).__name__ in ("Dim", "_Dim", "_DerivedDim", "_StaticDim", "_DimHint")


def normalize_dynamic_shapes(dynamic_shapes, names: list[str], values: list) -> Optional[dict]:
    """dynamic_shapes in any accepted form (a dict by argument name or a tuple by position; per input a dict
    {axis: spec} or a list per axis; a spec is a torch.export.Dim, a symbol name, or None) as
    {input name: {axis: spec}}, with clear ValueErrors for the rest."""
    if dynamic_shapes is None:
        return None
    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise ValueError(f"dynamic_shapes must be a dict by argument name or a tuple with one entry per input "
                             f"({', '.join(names)}); got {len(dynamic_shapes)} entries")
        dynamic_shapes = dict(zip(names, dynamic_shapes))
    if not isinstance(dynamic_shapes, dict):
        raise ValueError(f"dynamic_shapes must be a dict by argument name like {{'{names[0] if names else 'x'}': "
                         f"{{0: 'batch'}}}} or a tuple by position, got {type(dynamic_shapes).__name__}")
    out = {}
    for key, spec in dynamic_shapes.items():
        if key not in names:
            raise ValueError(f"dynamic_shapes names {key!r}, which is not an argument of forward() with an example "
                             f"input ({', '.join(names)})")
        if spec is None:
            continue
        x = values[names.index(key)]
        if isinstance(spec, (tuple, list)):
            if len(spec) != x.dim():
                raise ValueError(f"dynamic_shapes[{key!r}] lists {len(spec)} dims, but {key!r} has rank {x.dim()}")
            spec = {i: s for i, s in enumerate(spec) if s is not None}
        if not isinstance(spec, dict):
            raise ValueError(f"dynamic_shapes[{key!r}] must be a dict {{axis: 'symbol' or torch.export.Dim}} or a "
                             f"list per axis, got {spec!r}")
        axes: dict[int, Any] = {}
        for axis, sym in spec.items():
            if isinstance(axis, bool) or not isinstance(axis, int) or not -x.dim() <= axis < x.dim():
                raise ValueError(f"dynamic_shapes[{key!r}] names dim {axis!r}, but {key!r} has rank {x.dim()} "
                                 f"(shape {list(x.shape)})")
            a = axis % x.dim()
            if a in axes:
                raise ValueError(f"dynamic_shapes[{key!r}] names dim {a} twice")
            if sym is None:
                continue
            if not (_is_dim(sym) or (isinstance(sym, str) and sym.isidentifier())):
                raise ValueError(f"dynamic_shapes[{key!r}][{axis}] = {sym!r} is not a valid symbol name (use an "
                                 f"identifier such as 'batch', or a torch.export.Dim)")
            axes[a] = sym
        if axes:
            out[key] = axes
    return out


def _input_names(model, n_args: int, kwargs: dict) -> list[str]:
    """The inputs' names (forward()'s parameters for positional examples, then the keywords); a ValueError when
    an argument without a default has no example."""
    params = torchscript._parameters(model)
    if params is not None and kwargs:  # keywords stand in for their parameters
        params = [(p, has_default or p in kwargs) for p, has_default in params]
    return torchscript._input_names(params, n_args) + list(kwargs)


def compile(model=None, args=None, kwargs: Optional[dict] = None, *, dynamic_shapes: Any = None,
            capture: str = "auto", precision: str = "fp32", device: str = "cpu", threads: Optional[int] = None,
            cache: Optional[bool] = None, **options):
    """Compiles a PyTorch model into a :class:`cuvil.CompiledModule` with the same call signature.

    model: a torch.nn.Module, a function of tensors, a torch.export.ExportedProgram, or a ScriptModule; or a
    Keras model or tf.function, converted in-process through tf2onnx (frontend/tensorflow.py; NumPy or tf.Tensor
    examples, optional for a Keras model with declared input shapes, whose open dims become symbols).
    args, kwargs: example inputs, as ``torch.export.export(model, args, kwargs)`` takes them (a single tensor is
    taken as ``(tensor,)``; NumPy arrays are accepted); they fix each input's dtype, rank and sizes.
    dynamic_shapes: as torch.export takes it — a dict by argument name or a tuple by position of
    ``{axis: torch.export.Dim("batch", min=1, max=64)}`` — where a plain string names a symbol too
    (``{"x": {0: "batch"}}``). Inputs sharing a symbol must agree on it; a Dim's range is checked on every call.
    capture: "export" (torch.export: the ATen graph), "torchscript" (torch.jit.script, falling back to trace), or
    "auto" (the default): TorchScript for positional examples (it keeps data-dependent control flow, and its
    graphs are the ones Cuvil's fusions are tuned on), torch.export for keyword examples, and torch.export
    where TorchScript cannot compile the model, with a :class:`cuvil.CaptureWarning` naming the path and why.
    precision: "fp32" (the default: nothing is lowered) or "bf16": convolutions and matrix products multiply in
    bf16 with f32 accumulation where this machine runs that faster than f32 (oneDNN's kernels on AVX512-BF16 or
    AMX), everything else stays f32; each node's decision is in ``CompiledModule.precision_report(*inputs)``.
    "auto": the fastest precision per node within ``accuracy={"metric": ..., "budget": ..., "data": [...]}``
    (cuvil/auto_precision.py). "int8": compiled at fp32, then calibrated on ``calibration`` (a list of input samples; default: the example
    inputs) by ``calibration_method`` ("minmax", "percentile", "mse", "entropy") and quantized (see :func:`cuvil.quantize`).
    device: "cpu". threads: threads for oneDNN and Cuvil's kernels (None: all cores).
    cache: whether to use the compiled-model cache (cuvil.cache; None, the default: unless CUVIL_CACHE_DIR=off).
    An nn.Module found there (same code, weights, input signature, configuration, Cuvil build and CPU) is loaded
    instead of compiled, its preparation deferred to the first call; ``CUVIL_LOG=cache`` says why a compile missed.

    As a decorator (``@cuvil.compile`` or ``@cuvil.compile(dynamic_shapes=..., args=...)``) on a function of
    tensors or an nn.Module class, or called without example inputs, it returns an object that compiles at its
    first call (or at once, given args/kwargs; or at ``.compile(example)``); a later call that changes a dim
    compiles once more with that dim symbolic (frontend/lazy.py).

    Raises cuvil.CompileError naming an unsupported op, its Python file:line and what is supported instead. A
    forward() that writes in place to its inputs, parameters or buffers (``x.add_(1)``, ``x[0] = 0``, ``out=x``)
    is refused by every capture: eager PyTorch changes the caller's tensors, and a compiled model never writes
    to its inputs. In-place ops on intermediate tensors compile as eager computes them. A guard on tensor values
    (``if x.max() > 1: raise ValueError(...)``, ``assert``, ``torch._check`` on an ``.item()``) becomes a run-time
    check: the call raises the model's own exception (same type and message, with a note naming the line) when
    and only when eager PyTorch would."""
    calibration, method = options.pop("calibration", None), options.pop("calibration_method", "minmax")
    accuracy = options.pop("accuracy", None)
    if model is not None and tensorflow_frontend.is_tensorflow(model):  # Keras / tf.function: through tf2onnx
        if calibration is not None or precision in ("int8", "auto"):
            raise ValueError("precision='int8' is not available for TensorFlow models yet")
        return tensorflow_frontend.compile_tensorflow(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                                      precision=precision, device=device, threads=threads,
                                                      **options)
    check_options(precision, device, threads, options)
    if (accuracy is not None) != (precision == "auto"):
        raise ValueError("precision='auto' takes accuracy={'metric': ..., 'budget': ..., 'data': [...]}, and "
                         "accuracy is only for precision='auto'")
    if precision == "auto":  # compiled at fp32, then the fastest precision per node within the budget
        from ..auto_precision import choose
        if model is None or (args is None and kwargs is None):
            raise ValueError("precision='auto' needs example inputs")
        compiled = compile(model, args, kwargs, dynamic_shapes=dynamic_shapes, capture=capture, device=device,
                           threads=threads, cache=False, **options)
        return choose(compiled, accuracy)
    if precision == "int8":  # compiled at fp32, then calibrated and quantized (cuvil/quantization.py)
        from ..quantization import quantize
        if model is None or (args is None and kwargs is None):
            raise ValueError("precision='int8' needs example inputs (or cuvil.quantize on a compiled model)")
        # Not through the compiled-model cache: quantize changes the compiled model it is given.
        compiled = compile(model, args, kwargs, dynamic_shapes=dynamic_shapes, capture=capture, device=device,
                           threads=threads, cache=False, **options)
        samples = calibration if calibration is not None else \
            [(tuple(_as_args(args)) if args is not None else ()) + tuple((kwargs or {}).values())]
        return quantize(compiled, samples, method=method)
    if calibration is not None:
        raise ValueError("calibration is for precision='int8'")
    settings = dict(dynamic_shapes=dynamic_shapes, capture=capture, precision=precision, device=device,
                    threads=threads, cache=cache)
    if model is None:  # @cuvil.compile(...): the decorator
        return lambda target: lazy.decorate(target, compile, settings, args, kwargs)
    if isinstance(model, type) or (args is None and kwargs is None and
                                   not isinstance(model, torch.export.ExportedProgram)):
        return lazy.decorate(model, compile, settings, args, kwargs)
    args = () if args is None else args
    if capture not in CAPTURES:
        raise ValueError(f"capture must be one of {', '.join(CAPTURES)}, got {capture!r}")
    kwargs = {} if kwargs is None else dict(kwargs)
    if isinstance(model, torch.export.ExportedProgram):
        if capture == "torchscript":
            raise ValueError("an ExportedProgram can only be compiled with capture='export'")
        ep = export_frontend.functionalize(model)
        compiled = export_frontend.convert_program(ep, threads=threads, precision=precision,
                                                   state_keys=list(ep.state_dict))
        compiled._model.prepare_static()
        if compiled._state_map is not None and compiled._state_problem is None:  # (by its state_dict's names)
            compiled._weights_recipe = TorchRecipe(None, (), {}, dict(settings, cache=False), compile, compiled,
                                                   state=ep.state_dict)
        return compiled
    if not (isinstance(model, torch.nn.Module) or callable(model)):
        raise TypeError(f"model must be a torch.nn.Module, a function or an ExportedProgram, got "
                        f"{type(model).__name__}")
    args = _as_args(args)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}  # None keywords keep the model's default
    names = _input_names(model, len(args), kwargs)
    _check_tensors(args, kwargs, names)
    dynamic_shapes = normalize_dynamic_shapes(dynamic_shapes, names, list(args) + list(kwargs.values()))
    lookup = _cache.torch_lookup(model, args, kwargs, dynamic_shapes, capture=capture, precision=precision,
                                 device=device, cache=cache)
    if lookup is None:
        compiled = _capture_and_compile(model, args, kwargs, dynamic_shapes, capture, precision, device, threads)
        return _recompilable(compiled, model, args, kwargs, settings)
    hit = lookup.hit(threads=threads)
    if hit is not None:
        return _recompilable(hit, model, args, kwargs, settings)
    with warnings.catch_warnings(record=True) as seen:  # capture warnings are kept with the entry, replayed on a hit
        compiled = _capture_and_compile(model, args, kwargs, dynamic_shapes, capture, precision, device, threads)
    for w in seen:  # as they came (the caller's filters apply again)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    traced = any("torch.jit.trace" in str(w.message) for w in seen if issubclass(w.category, CaptureWarning))
    lookup.store(compiled, [w for w in seen if issubclass(w.category, CaptureWarning)], trace=traced)
    return _recompilable(compiled, model, args, kwargs, settings)


def _capture_and_compile(model, args: tuple, kwargs: dict, dynamic_shapes, capture: str, precision: str,
                         device: str, threads: Optional[int]) -> CompiledModule:
    if capture == "torchscript" or (capture == "auto" and not kwargs):
        try:
            return _torchscript(model, args, kwargs, dynamic_shapes, precision, device, threads)
        except UnsupportedError as e:  # (other CompileErrors are about the model itself: no second try)
            if capture == "torchscript" or isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
                raise
            reason = e
    else:
        reason = None
    try:
        compiled = _export(model, args, kwargs, dynamic_shapes, threads, precision)
    except export_frontend.ModelRefused:
        raise
    except (export_frontend.ExportFailed, CompileError) as e:
        if reason is not None:  # both failed: TorchScript's error, with export's reason beside it
            raise CompileError(f"{reason} (torch.export did not help either: {e})") from None
        if isinstance(e, export_frontend.ExportFailed):
            raise CompileError(f"torch.export cannot capture the model: {e}") from None
        raise
    if reason is not None:
        warnings.warn(f"cuvil.compile: TorchScript could not compile the model ({reason}); compiled through "
                      f"torch.export instead (capture='export' asks for it directly)", CaptureWarning, stacklevel=3)
    return compiled


def _recompilable(compiled: CompiledModule, model, args: tuple, kwargs: dict, settings: dict) -> CompiledModule:
    """Lets update_weights compile the module again with other weights (cuvil/weights.py); those compiles skip
    the model cache (each weights version would be an entry of its own)."""
    if isinstance(model, torch.nn.Module):
        compiled._weights_recipe = TorchRecipe(model, args, kwargs, dict(settings, cache=False), compile,
                                               compiled)
    return compiled


def _export(model, args, kwargs, dynamic_shapes, threads, precision="fp32") -> CompiledModule:
    ep = export_frontend.export_program(model, args, kwargs, dynamic_shapes)
    keys = list(model.state_dict()) if isinstance(model, torch.nn.Module) else None
    compiled = export_frontend.convert_program(ep, threads=threads, precision=precision, state_keys=keys)
    _prepare(compiled, args, kwargs)
    return compiled


def _prepare(compiled: CompiledModule, args: tuple, kwargs: dict) -> None:
    """Plans and prepares kernels (packing weights) for the example shapes now, so the first call only runs."""
    shapes = [list(x.shape) for x in list(args) + list(kwargs.values())]
    try:
        compiled._model.prepare(shapes)
    except _C.Error as e:
        raise compile_error(e) from None


def _torchscript(model, args, kwargs, dynamic_shapes, precision, device, threads) -> CompiledModule:
    if kwargs:
        raise CompileError("keyword example inputs need capture='export' (TorchScript takes positional ones)")
    if dynamic_shapes:  # TorchScript takes symbol names: a Dim's name, or a fresh one for AUTO/DYNAMIC
        dynamic_shapes = {k: {a: s if isinstance(s, str) else getattr(s, "__name__", f"{k}_{a}")
                              for a, s in axes.items()} for k, axes in dynamic_shapes.items()}
    return torchscript.compile(model, args, dynamic_shapes=dynamic_shapes, precision=precision, device=device,
                               threads=threads, _stacklevel=4)
