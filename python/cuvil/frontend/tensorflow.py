"""cuvil.compile for TensorFlow: a Keras model or a ``tf.function`` is converted in-process through tf2onnx and
compiled as an ONNX model, so that people who ship TensorFlow do not have to learn a converter first.

TensorFlow is imported only when a TensorFlow model is passed (importing it costs seconds and hundreds of MB);
``is_tensorflow`` recognizes one by its type's module, without importing anything.
"""
from __future__ import annotations

import inspect
import logging
import os
import tempfile
from typing import Any, Optional

import numpy as np

from .. import _C
from ..compiled import CompiledModule, check_options, load_onnx, model_exception
from ..errors import CompileError

# The opset tf2onnx writes: the newest it knows well (1.17 supports up to 18); Cuvil reads every opset of onnx 1.23.
DEFAULT_OPSET = 17


def is_tensorflow(model: Any) -> bool:
    """Whether `model` is a Keras model/layer or a tf.function (checked by its type's module: nothing imported)."""
    return any(getattr(c, "__module__", "").split(".")[0] in ("keras", "tensorflow", "tf_keras")
               for c in type(model).__mro__[:-1])


def _tf():
    try:
        import tensorflow as tf
        import tf2onnx
    except ImportError as e:
        raise ImportError(f"compiling a TensorFlow model needs tensorflow and tf2onnx ({e}); the project's "
                          f"environment (scripts/setup.sh) has both") from None
    return tf, tf2onnx


def _is_keras(model) -> bool:
    return hasattr(model, "inputs") and hasattr(model, "call") and hasattr(model, "layers")


def _input_names(model, n: int) -> list[str]:
    """Keras functional inputs' own names, a tf.function's (or a subclassed model's call's) parameter names."""
    if _is_keras(model):
        try:
            inputs = model.inputs
        except (AttributeError, ValueError):  # a subclassed model that was never built
            inputs = None
        if inputs:
            return [getattr(t, "name", None) or f"input_{i}" for i, t in enumerate(inputs)][:n] + \
                [f"input_{i}" for i in range(len(inputs), n)]
        fn = model.call
    else:
        fn = getattr(model, "python_function", model)
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "training",
                                                                                                "mask")]
    except (TypeError, ValueError):
        params = []
    return (params + [f"input_{i}" for i in range(len(params), n)])[:n]


def _declared_shapes(model) -> Optional[list[tuple]]:
    """A Keras model's declared input shapes (None for a dim it leaves open), if it declares them."""
    if not _is_keras(model):
        return None
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        return None
    if not inputs:
        return None
    return [tuple(t.shape) for t in inputs]


def _dynamic_axes(dynamic_shapes, names: list[str], ranks: list[int]) -> dict[tuple[int, int], str]:
    """dynamic_shapes (a dict by input name or a tuple by position of {axis: name}; a torch.export.Dim-like
    object gives its name) as {(input, axis): symbol}."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise ValueError(f"dynamic_shapes must be a dict by input name or a tuple with one entry per input "
                             f"({', '.join(names)}); got {len(dynamic_shapes)} entries")
        dynamic_shapes = dict(zip(names, dynamic_shapes))
    if not isinstance(dynamic_shapes, dict):
        raise ValueError(f"dynamic_shapes must be a dict by input name like {{'{names[0]}': {{0: 'batch'}}}}, got "
                         f"{type(dynamic_shapes).__name__}")
    out = {}
    for key, axes in dynamic_shapes.items():
        if key not in names:
            raise ValueError(f"dynamic_shapes names {key!r}, which is not an input ({', '.join(names)})")
        i = names.index(key)
        if axes is None:
            continue
        if isinstance(axes, (tuple, list)):
            axes = {a: s for a, s in enumerate(axes) if s is not None}
        if not isinstance(axes, dict):
            raise ValueError(f"dynamic_shapes[{key!r}] must be a dict {{axis: 'symbol'}}, got {axes!r}")
        for axis, sym in axes.items():
            if isinstance(axis, bool) or not isinstance(axis, int) or not -ranks[i] <= axis < ranks[i]:
                raise ValueError(f"dynamic_shapes[{key!r}] names dim {axis!r}, but {key!r} has rank {ranks[i]}")
            name = sym if isinstance(sym, str) else getattr(sym, "__name__", None)
            if not (isinstance(name, str) and name.isidentifier()):
                raise ValueError(f"dynamic_shapes[{key!r}][{axis}] = {sym!r} is not a valid symbol name")
            out[(i, axis % ranks[i])] = name
    return out


def _flat_function(tf, model):
    """A tf.function of the model's inputs (called in inference mode) returning its outputs flattened: tf2onnx
    converts flat outputs only. The list it returns holds the outputs' structure once the function is traced."""
    if _is_keras(model):
        def call(*xs):
            return model(list(xs) if len(xs) > 1 else xs[0], training=False)
    else:
        call = model  # the tf.function itself: its own autograph turns data-dependent `if`s into tf.cond

    structure = []  # the model's own output structure, noted while tracing (the flat outputs are packed back into it)

    @tf.function(autograph=False)
    def flat(*xs):
        out = call(*xs)
        structure[:] = [tf.nest.map_structure(lambda _: None, out)]  # (not the graph's tensors: they pin it)
        return tuple(tf.nest.flatten(out))
    return flat, structure


def _rename_symbols(onnx_model, renames: dict[str, str]) -> None:
    """Gives the dims tf2onnx names unk__N the user's symbol names, wherever they appear."""
    graph = onnx_model.graph
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        for d in value.type.tensor_type.shape.dim:
            if d.dim_param in renames:
                d.dim_param = renames[d.dim_param]


def _convert(tf, tf2onnx, model, flat, signature, opset: int):
    """tf2onnx's from_keras steps on the flattening function: the graph's inputs are the signature's alone (the
    constants and variables a layer captured are frozen into the graph, not left as extra inputs, which
    from_function does for captured tensors), outputs in flat order."""
    from tf2onnx import tf_loader
    from tf2onnx.convert import _convert_common, tensor_names_from_structed

    func = flat.get_concrete_function(*signature)
    captures = func.graph.function_captures.by_val_internal.values() \
        if hasattr(func.graph, "function_captures") else [t for _, t in func.graph._captures.values()]
    captured = {t.name for t in captures}
    input_names = [t.name for t in func.inputs if t.name not in captured]
    output_names = [t.name for t in func.outputs if t.dtype != tf.dtypes.resource]
    renames = tensor_names_from_structed(func, input_names, output_names)
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)  # (its per-optimizer tracebacks are not the user's)
    with tf.device("/cpu:0"):
        if _is_keras(model):
            frozen, tables = tf_loader.from_trackable(model, func, input_names, output_names, False)
        else:
            frozen, tables = tf_loader.from_function(func, input_names, output_names), None
        onnx_model, _ = _convert_common(frozen, name=getattr(model, "name", None) or "tf_function",
                                        continue_on_error=True, opset=opset, input_names=input_names,
                                        output_names=output_names, tensors_to_rename=renames,
                                        initialized_tables=tables)
    extra = [i.name for i in onnx_model.graph.input][len(signature):]
    if extra:
        raise CompileError(f"the converted graph takes inputs beyond the model's own: {', '.join(extra)}")
    _check_converted(onnx_model)
    return onnx_model


def _check_converted(onnx_model) -> None:
    """tf2onnx leaves a TensorFlow op it cannot convert in the graph as it is: name those ops (with a node each)
    rather than let the importer report a strange ONNX op."""
    import onnx.defs

    left: dict[str, list[str]] = {}
    for node in onnx_model.graph.node:
        if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type):
            left.setdefault(node.op_type, []).append(node.name)
    if left:
        ops = "; ".join(f"{op} ({len(nodes)} node{'s' if len(nodes) > 1 else ''}, e.g. '{nodes[0]}')"
                        for op, nodes in sorted(left.items()))
        raise CompileError(f"tf2onnx cannot convert these TensorFlow ops to ONNX: {ops}")


class TensorFlowCompiled(CompiledModule):
    """A compiled TensorFlow model: called like the model, with tf.Tensors or NumPy arrays; returns tf.Tensors when
    any input was one (NumPy arrays otherwise), in the model's own output structure."""

    def __call__(self, *args, **kwargs):
        as_tf = any(_is_tf_tensor(a) for a in list(args) + list(kwargs.values()))
        args = [_to_numpy(a) for a in args]
        kwargs = {k: _to_numpy(v) for k, v in kwargs.items()}
        arrays, _ = self._arrays(args, kwargs)
        try:
            outs = self._model.run(arrays)
        except _C.CheckFailed as e:
            raise model_exception(e) from None
        if as_tf:
            import tensorflow as tf
            outs = [tf.convert_to_tensor(o) for o in outs]
        return self._restructure(outs)


def _is_tf_tensor(x) -> bool:
    return type(x).__module__.startswith("tensorflow") and hasattr(x, "numpy")


def _to_numpy(x):
    return x.numpy() if _is_tf_tensor(x) else x


def compile_tensorflow(model, args=None, kwargs: Optional[dict] = None, *, dynamic_shapes: Any = None,
                       precision: str = "fp32", device: str = "cpu", threads: Optional[int] = None,
                       opset: int = DEFAULT_OPSET, **options) -> TensorFlowCompiled:
    """Compiles a Keras model or a tf.function of tensors (see cuvil.compile). The inputs' shapes come from the
    example `args` (each dim fixed unless `dynamic_shapes` names it) or, without examples, from a Keras model's
    declared inputs (a dim it leaves open, such as the batch, becomes a symbol: ``batch`` for axis 0,
    ``<input>_<axis>`` otherwise)."""
    check_options(precision, device, threads, options, names="precision, device, threads, dynamic_shapes, opset")
    if kwargs:
        raise CompileError("TensorFlow models take positional example inputs (one per model input)")
    tf, tf2onnx = _tf()
    if args is None:
        shapes = _declared_shapes(model)
        if shapes is None:
            raise CompileError("compiling a tf.function (or an unbuilt Keras model) needs example inputs: "
                               "cuvil.compile(fn, (x, ...))")
        dtypes = [t.dtype for t in model.inputs]
        dtypes = [d if isinstance(d, str) else getattr(d, "name", str(d)) for d in dtypes]
    else:
        if not isinstance(args, (tuple, list)):
            args = (args,)
        arrays = [np.asarray(_to_numpy(a)) for a in args]
        shapes = [a.shape for a in arrays]
        dtypes = [a.dtype.name for a in arrays]
    names = _input_names(model, len(shapes))
    dynamic = _dynamic_axes(dynamic_shapes, names, [len(s) for s in shapes])
    signature, renames = [], {}
    for i, (name, shape, dtype) in enumerate(zip(names, shapes, dtypes)):
        dims = [None if (i, a) in dynamic or d is None else int(d) for a, d in enumerate(shape)]
        signature.append(tf.TensorSpec(dims, tf.as_dtype(dtype), name=name))
        for a, d in enumerate(shape):
            if (i, a) not in dynamic and d is None:
                dynamic[(i, a)] = "batch" if a == 0 else f"{name}_{a}"
    flat, traced = _flat_function(tf, model)
    try:
        onnx_model = _convert(tf, tf2onnx, model, flat, signature, opset)
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - TensorFlow and tf2onnx raise many kinds; all mean "cannot convert"
        raise CompileError(f"tf2onnx could not convert the TensorFlow model: {type(e).__name__}: {e}") from None
    for i, value in enumerate(onnx_model.graph.input):
        for a, d in enumerate(value.type.tensor_type.shape.dim):
            if (i, a) in dynamic and d.dim_param:
                renames[d.dim_param] = dynamic[(i, a)]
    _rename_symbols(onnx_model, renames)
    structure = traced[0]
    fd, path = tempfile.mkstemp(suffix=".onnx", prefix="cuvil-tf-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(onnx_model.SerializeToString())
        compiled = load_onnx(path, precision=precision, device=device, threads=threads)
    finally:
        os.unlink(path)
    result = TensorFlowCompiled(compiled._model, unflatten=lambda outs: tf.nest.pack_sequence_as(structure, outs))
    result._config = dict(compiled._config, precision=precision)
    result._report_name = getattr(model, "name", None) or getattr(model, "__name__", "tensorflow model")
    if args is not None:  # plan and pack weights for the example shapes now, so the first call only runs
        result._model.prepare([list(s) for s in shapes])
    return result
