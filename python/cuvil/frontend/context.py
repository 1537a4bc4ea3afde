"""What every converter shares, in one module the converters import (and nothing else of the front end): the
registry of converters by TorchScript node kind, the conversion context, node locations, and the dtype table.

The front ends (torchscript.py, export.py, fx_graph.py) import this module and aten_ops (which imports the
converter families aten_*.py); the converters import only this module and each other, never a front end, so
there is no import cycle.

The dtype table: one row per element type, its facts (name, bytes, ONNX id, kind, NumPy dtype) from the core
(_C.dtypes(), the list in src/ir/dtype.h), joined with PyTorch's names for it; the lookups below are views of it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import torch

from .. import _C
from ..errors import CompileError, UnsupportedError
from . import call_chain

# ---- dtypes


@dataclass(frozen=True)
class DType:
    name: str  # Cuvil's: "f32", "i64", "bool", ...
    itemsize: int
    onnx_id: int  # TensorProto.DataType
    kind: str  # "f" float, "i" signed integer, "u" unsigned integer, "b" bool
    numpy: Any  # the NumPy dtype arrays of it cross as (bf16: uint16 bits)
    torch: Optional[torch.dtype]  # None where PyTorch has no such dtype in the front end
    scalar_type: Optional[int]  # TorchScript's ScalarType code, the form dtype arguments arrive in

    @property
    def category(self) -> int:
        """PyTorch's promotion category: bool < integers < floats."""
        return {"b": 0, "i": 1, "u": 1, "f": 2}[self.kind]


# PyTorch's side: Cuvil name -> (torch dtype, TorchScript ScalarType code).
_TORCH_SIDE = {
    "u8": (torch.uint8, 0), "i8": (torch.int8, 1), "i16": (torch.int16, 2), "i32": (torch.int32, 3),
    "i64": (torch.int64, 4), "f16": (torch.float16, 5), "f32": (torch.float32, 6), "f64": (torch.float64, 7),
    "bool": (torch.bool, 11), "bf16": (torch.bfloat16, 15),
}

DTYPES: dict[str, DType] = {
    name: DType(name, size, onnx_id, kind, np.dtype(np_dt), *_TORCH_SIDE.get(name, (None, None)))
    for name, size, onnx_id, kind, np_dt in _C.dtypes()
}

# Views of the table.
TORCH_TO_CUVIL = {d.torch: d.name for d in DTYPES.values() if d.torch is not None}
CUVIL_TO_TORCH = {d.name: d.torch for d in DTYPES.values() if d.torch is not None}
SCALAR_TYPE_TO_TORCH = {d.scalar_type: d.torch for d in DTYPES.values() if d.scalar_type is not None}
TORCH_TO_SCALAR_TYPE = {d.torch: d.scalar_type for d in DTYPES.values() if d.scalar_type is not None}
# NumPy dtypes to make constants in (bf16 has none: it goes through torch).
NUMPY_DTYPES = {d.name: d.numpy.type for d in DTYPES.values() if d.name != "bf16"}
# Promotion categories of the dtypes PyTorch has.
CATEGORY = {d.name: d.category for d in DTYPES.values() if d.torch is not None}


def onnx_dtype_id(d: str) -> int:
    return DTYPES[d].onnx_id


# ---- the registry

Converter = Callable[["ConvertContext", list], Any]
CONVERTERS: dict[str, Converter] = {}


def converter(*kinds: str):
    """Registers a converter for TorchScript node kinds ("aten::relu", ...). It receives the context and the
    node's converted inputs and returns the converted output (or a tuple for several outputs)."""
    def wrap(fn: Converter) -> Converter:
        for k in kinds:
            if k in CONVERTERS:
                raise RuntimeError(f"converter for {k} registered twice")
            CONVERTERS[k] = fn
        return fn
    return wrap


LOC_RE = re.compile(r'File "([^"]+)", line (\d+)')
_TRACE_FRAME_RE = re.compile(r"^(.+)\((\d+)\): \S+$", re.M)
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def location(node) -> tuple[str, int]:
    """A node's Python file and line: a scripted node's source range names one; a traced node's is the stack
    that ran the op (innermost first), whose innermost frame outside torch is the line to point at (the model's,
    not torch/nn/functional.py)."""
    text = node.sourceRange() or ""
    m = LOC_RE.search(text)
    if m:
        return m.group(1), int(m.group(2))
    frames = _TRACE_FRAME_RE.findall(text)
    for file, line in frames:
        if not file.startswith(_TORCH_DIR):
            return file, int(line)
    return (frames[0][0], int(frames[0][1])) if frames else ("", 0)



class ConvertContext:
    """What a converter sees: the builder of the current region, the node being converted and helpers."""


    # Every field a converter may read or set, declared: no state hangs off the instance ad hoc.
    __slots__ = ("builder", "node", "list_regions", "dim_symbols", "call_sites", "state")

    def __init__(self, builder: "_C.GraphBuilder"):
        self.builder = builder  # the region being built (converters of If/Loop bodies swap it)
        self.node = None  # the TorchScript (or FX) node being converted
        # Lists made while converting, by id: (the list, the builder of the region that made it) -- aten_core's
        # note_list / list_made_here (a region converted once must not mutate a list from outside it).
        self.list_regions: dict[int, tuple[list, Any]] = {}
        # Run-time ints read from symbolic dims, by id: (the Value, the dim's expression) -- aten_core's
        # note_symbol / symbol_of.
        self.dim_symbols: dict[int, tuple[Any, str]] = {}
        # A scripted model's submodule call sites (call_chain.script_call_sites), for the nodes' call chains.
        self.call_sites: dict = {}
        # The module's state_dict entries as constants (state.StateConstants; None: not tracked).
        self.state = None

    # ---- locations and errors
    def source(self) -> tuple[str, int, str]:
        """The node's (file, line, call chain): the chain as call_chain.format_chain makes it; file:line its
        innermost user frame where the node's own line is a library's (torch/nn/functional.py)."""
        if self.node is None:
            return "", 0, ""
        file, line = location(self.node)
        fx = getattr(self.node, "fx", None)
        if fx is not None:
            frames = call_chain.fx_frames(fx.meta.get("stack_trace"))
        else:
            text = self.node.sourceRange() or ""
            frames = (call_chain.script_frames(self._module_path(), (file, line), self.call_sites)
                      if LOC_RE.search(text) else call_chain.trace_frames(text))
        stack = call_chain.format_chain(frames)
        if stack and not call_chain.is_user_file(file):
            innermost = stack.rsplit("\n", 1)[-1]
            file, line = innermost.rsplit(" in ", 1)[0].rsplit(":", 1)
            line = int(line)
        return file, line, stack

    def where(self) -> str:
        file, line, _ = self.source()
        return f"{file}:{line}" if file else "<unknown location>"

    def error(self, msg: str) -> CompileError:
        return CompileError(f"{self.op()} at {self.where()}: {msg}")

    def op(self, kind: Optional[str] = None) -> str:
        """The node's op for messages, with the op the user called when torch made it of another one."""
        kind = kind or (self.node.kind() if self.node is not None else "?")
        origin = getattr(self.node, "origin", None)
        origin = origin() if origin is not None else None
        return f"{kind} (from {origin})" if origin else kind

    # ---- emitting nodes
    def emit(self, op: str, inputs: list, attrs: Optional[dict] = None, num_outputs: int = 1):
        """Adds a Cuvil node; inputs may be cuvil Values, None (omitted optional input) or constants (made
        tensors). Returns one Value, or a list when num_outputs != 1."""
        file, line, stack = self.source()
        ins = [None if x is None else self.tensor(x) for x in inputs]
        try:
            outs = self.builder.add_node(op, ins, num_outputs, attrs or {}, file, line, self._module_path(),
                                         stack=stack)
        except (_C.Error, ValueError) as e:
            # The core names the node with its location ("MatMul at model.py:12: ..."): say the location once.
            raise self.error(str(e).replace(f" at {file}:{line}", "", 1) if file else str(e)) from None
        return outs[0] if num_outputs == 1 else outs

    def _module_path(self) -> str:
        """The submodule the node came from ("layer1.0.conv1"), so library code's file:line still points home."""
        if self.node is None:
            return ""
        try:
            path = self.node.getModuleHierarchy() or ""
        except RuntimeError:
            return ""
        # TorchScript prefixes each level with its type: "conv1(Conv2d).bn(BatchNorm2d)" -> "conv1.bn"
        parts = [p.split("(")[0] for p in path.split(".")]
        return ".".join(p for p in parts if p and p != "UNKNOWN_INSTANCE")

    # ---- values
    def is_value(self, x) -> bool:
        return isinstance(x, _C.Value)

    def tensor(self, x, dtype: Optional[str] = None) -> "_C.Value":
        """x as a cuvil Value: Values pass through (cast when `dtype` differs); constants become constants."""
        if isinstance(x, _C.Value):
            if dtype is not None and x.dtype != dtype:
                return self.emit("Cast", [x], {"to": onnx_dtype_id(dtype)})
            return x
        if isinstance(x, (list, tuple)) and any(isinstance(e, _C.Value) for e in x):
            return self.stack_scalars(x, dtype or "i64")
        if isinstance(x, torch.Tensor):
            t = x.detach().contiguous()
            if dtype is not None:
                t = t.to(CUVIL_TO_TORCH[dtype])
            if t.dtype == torch.bfloat16:
                return self.builder.add_constant("c", t.view(torch.int16).numpy().view(np.uint16), "bf16")
            return self.builder.add_constant("c", t.numpy())
        if x is None:
            raise self.error("expected a tensor, got None")
        if dtype == "bf16":  # NumPy has no bf16: go through torch
            return self.tensor(torch.tensor(x, dtype=torch.bfloat16))
        arr = np.asarray(x)
        if dtype is not None:
            arr = arr.astype(NUMPY_DTYPES[dtype])
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # Python floats are torch's default dtype
        return self.builder.add_constant("c", arr)

    def stack_scalars(self, items, dtype: str = "i64") -> "_C.Value":
        """A list of ints/scalar Values (e.g. a size list with dynamic entries) as a 1-D tensor."""
        parts = []
        for e in items:
            v = self.tensor(e, dtype)
            if v.shape != [1]:
                v = self.emit("Reshape", [v, np.array([1], np.int64)])
            parts.append(v)
        if not parts:
            return self.tensor(np.zeros((0,), NUMPY_DTYPES[dtype]))
        return parts[0] if len(parts) == 1 else self.emit("Concat", parts, {"axis": 0})

    def const(self, x, what: str = "this argument"):
        """The Python value of a constant argument; a CompileError when it is only known at run time."""
        if isinstance(x, _C.Value):
            if x.is_constant:
                c = self.constant_data(x, what)
                return c.item() if c.ndim == 0 else c.tolist()
            raise self.error(f"{what} must be a constant; it is computed at run time")
        if isinstance(x, (list, tuple)):
            return type(x)(self.const(e, what) for e in x)
        return x

    def constant_data(self, v: "_C.Value", what: str = "a constant"):
        """A constant Value's data (NumPy). Reading a state_dict entry so bakes its current values into the graph:
        noted, so that the module updates its weights by compiling again (frontend/state.py)."""
        if self.state is not None:
            self.state.note_read(v, f"{what} of {self.node.kind() if self.node is not None else 'the graph'}")
        return v.constant

    def is_state(self, v) -> bool:
        """Whether v is a state_dict entry's constant (its values change with update_weights)."""
        return self.state is not None and self.state.key_of(v) is not None

    def dtype_of(self, x) -> str:
        """The Cuvil dtype of a value or constant (Python numbers map as torch does: int -> i64, float -> f32)."""
        if isinstance(x, _C.Value):
            return x.dtype
        if isinstance(x, torch.Tensor):
            return TORCH_TO_CUVIL[x.dtype]
        if isinstance(x, bool):
            return "bool"
        if isinstance(x, int):
            return "i64"
        if isinstance(x, float):
            return "f32"
        raise self.error(f"no dtype for {type(x).__name__}")

    def rank_of(self, x) -> int:
        if isinstance(x, _C.Value):
            if x.shape is None:
                raise self.error("the rank of this input is unknown")
            return len(x.shape)
        if isinstance(x, torch.Tensor):
            return x.dim()
        return 0



def unsupported_error(ctx: ConvertContext, kind: str) -> CompileError:
    """The error for a node kind with no converter: the op, its Python line, and the closest supported ops."""
    import difflib

    def base(k: str) -> str:  # "aten::cumprod_" -> "cumprod": compare names, not namespaces
        return k.split("::", 1)[-1].rstrip("_")

    supported = sorted(CONVERTERS)
    by_base: dict[str, list[str]] = {}
    for k in supported:
        by_base.setdefault(base(k), []).append(k)
    close = difflib.get_close_matches(base(kind), list(by_base), n=4, cutoff=0.7)
    hint = (f" Similar supported ops: {', '.join(by_base[c][0] for c in close)}." if close else
            " No similar op is supported.")
    op = ctx.op(kind)
    op = f"'{kind}'{op[len(kind):]}"
    return UnsupportedError(f"unsupported op {op} at {ctx.where()}: Cuvil has no converter for it.{hint} Rewrite "
                        f"that line with supported ops or compute it outside the compiled model; "
                        f"cuvil.frontend.context.CONVERTERS lists the {len(supported)} supported aten/prim ops.")

