"""FX graphs of ATen ops (torch.export's programs, the graphs a Dynamo backend receives) -> Cuvil IR.

The ATen ops of an exported program are the ops TorchScript shows (aten::conv2d, aten::linear, ...), so both
front ends share one converter table (torchscript.CONVERTERS). What differs is how a node presents itself: an FX
node's arguments are positional and keyword, defaults left out, dtypes as torch.dtype. `FxNode` gives converters
the TorchScript node's view of an FX node (kind, schema, every argument in schema order, source range, module
path), so a converter written once serves both.

Locations: each node's Python frame is the innermost frame of its stack trace outside torch's own package (the
user's or the model library's line, not torch/nn/functional.py); the full chain stays in the trace.
"""
from __future__ import annotations

import operator
import os
import re
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.fx

from .. import _C
from ..errors import CompileError, InternalError
from .context import CONVERTERS, TORCH_TO_CUVIL, TORCH_TO_SCALAR_TYPE, ConvertContext, unsupported_error

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# Python operators on sizes (SymInts) in FX graphs, as the TorchScript ops that compute them.
_PY_OPERATORS = {operator.getitem: "aten::__getitem__", operator.add: "aten::add", operator.sub: "aten::sub",
                 operator.mul: "aten::mul", operator.floordiv: "aten::floordiv", operator.truediv: "aten::div",
                 operator.mod: "aten::remainder", operator.neg: "aten::neg", operator.eq: "aten::eq",
                 operator.ne: "aten::ne", operator.lt: "aten::lt", operator.le: "aten::le", operator.gt: "aten::gt",
                 operator.ge: "aten::ge", operator.and_: "aten::__and__", operator.or_: "aten::__or__",
                 torch.sym_max: "prim::max", torch.sym_min: "prim::min", torch.sym_float: "aten::Float",
                 torch.sym_int: "aten::Int"}
# Checks export inserts about input metadata and value ranges: they hold by construction (the engine checks
# every call's inputs), so they compute nothing.
NO_OPS = frozenset({"aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::sym_constrain_range",
                     "aten::sym_constrain_range_for_size", "aten::_assert_async", "aten::_functional_assert_async",
                     "aten::_functional_assert_scalar"})


# Checks on values read from tensor data (torch._check on an .item(), torch._assert_async): they hold only for
# some inputs, so they become Assert nodes, checked at run time.
_DATA_CHECKS = frozenset({"aten::_assert_scalar", "aten::_assert_async", "aten::_functional_assert_async"})
_DATA_READS = frozenset({"aten::item", "aten::_local_scalar_dense"})


def _checks_data(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The node reading tensor data (aten::item) that a run-time check depends on, or None when it checks only
    sizes (which hold by construction: every call's inputs are checked against the program's dims)."""
    if node_kind(node) != "aten::_assert_scalar":
        return node
    todo, seen = [a for a in node.args[:1] if isinstance(a, torch.fx.Node)], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op != "call_function":
            continue
        if node_kind(n) in _DATA_READS:
            return n
        if isinstance(n.meta.get("val"), torch.Tensor):
            continue  # (sizes of tensors are no data)
        todo.extend(a for a in n.all_input_nodes)
    return None


def node_kind(node: torch.fx.Node) -> str:
    """The TorchScript-style kind of an FX call ("aten::conv2d", "aten::__getitem__", ...)."""
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return t._schema.name
    if t in _PY_OPERATORS:
        return _PY_OPERATORS[t]
    if isinstance(t, torch._ops.HigherOrderOperator):
        return f"higher_order::{t.name()}"
    return getattr(t, "__qualname__", None) or str(t)


def user_frames(node: torch.fx.Node) -> list[tuple[str, int, str]]:
    """The node's call chain as (file, line, function), outermost first, torch's own frames left out."""
    frames = [(f, int(ln), fn) for f, ln, fn in _FRAME_RE.findall(node.meta.get("stack_trace") or "")]
    return [fr for fr in frames if not fr[0].startswith(_TORCH_DIR)] or frames[-1:]


class _Out:
    """One output of an FX node, as TorchScript's Value answers `type()` and `uses()`."""

    def __init__(self, node: torch.fx.Node, index: Optional[int]):
        self._node, self._index = node, index

    def type(self):
        val = self._node.meta.get("val")
        if self._index is not None and isinstance(val, (tuple, list)):
            val = val[self._index]
        if isinstance(val, (bool, torch.SymBool)):
            return torch._C.BoolType.get()
        if isinstance(val, (int, torch.SymInt)):
            return torch._C.IntType.get()
        if isinstance(val, (float, torch.SymFloat)):
            return torch._C.FloatType.get()
        return torch._C.TensorType.get()

    def uses(self) -> list:
        users = list(self._node.users)
        if self._index is None:
            return users
        return [u for u in users if u.target is operator.getitem and u.args[1] == self._index]


class FxNode:
    """A TorchScript node's face on an FX node, for the converters (kind, schema, output types, uses, source)."""

    def __init__(self, node: torch.fx.Node):
        self.fx = node

    def kind(self) -> str:
        return node_kind(self.fx)

    def schema(self) -> str:
        t = self.fx.target
        return str(t._schema) if isinstance(t, torch._ops.OpOverload) else self.kind()

    def sourceRange(self) -> str:
        frames = user_frames(self.fx)
        if not frames:
            return ""
        f, ln, fn = frames[-1]
        return f'File "{f}", line {ln}, in {fn}'

    def origin(self) -> Optional[str]:
        """The op the user's code called when torch made this node of another one (a decomposition:
        aten::_unsafe_index from aten::upsample_bicubic2d), for messages; None otherwise."""
        sources, target = self.fx.meta.get("from_node") or [], None
        for _ in range(64):  # to the first node of the chain: what the user's code called
            if not sources:
                break
            t = getattr(sources[0], "target", None)
            target = t if isinstance(t, str) and t.startswith("aten.") else target
            sources = getattr(sources[0], "from_node", None) or []
        if target is None:
            return None
        name = target.split(".")[1]
        if name.rstrip("_") == self.kind().split("::")[-1].rstrip("_"):
            return None  # the same op (made pure: add from add_)
        return f"aten::{name}"

    def getModuleHierarchy(self) -> str:
        stack = self.fx.meta.get("nn_module_stack") or {}
        if not stack:
            return ""
        path = list(stack.values())[-1][0]
        # export names nested modules like "layer1.0.conv1" already, or "L['self'].layer1[0]" from Dynamo
        return re.sub(r"\[(\w+)\]", r".\1", re.sub(r"^L\['self'\]\.?", "", path)).replace("'", "")

    def output(self) -> _Out:
        return _Out(self.fx, None)

    def outputsAt(self, i: int) -> _Out:
        return _Out(self.fx, i)


def _expand_int_list(value, arg) -> Any:
    """int[N] arguments may be given as one int (stride=2): TorchScript's nodes always hold the list."""
    n = getattr(arg, "N", None)
    if n and isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    return value


class FxConverter:
    """Walks an FX graph of ATen ops in order, converting each call through the converter table.

    `env` maps FX nodes to converted values (Cuvil Values, Python constants, or lists of those); the caller binds
    the placeholders first."""

    def __init__(self, ctx: ConvertContext, symbol_names: Callable[[Any], Any]):
        self.ctx = ctx
        self.env: dict[torch.fx.Node, Any] = {}
        self._symbol = symbol_names

    def arg(self, a):
        """An FX argument as a converter input: nodes looked up, dtypes as ScalarType codes, lists recursively."""
        if isinstance(a, torch.fx.Node):
            if a not in self.env:
                raise InternalError(f"internal error: FX node {a.name} used before it is converted")
            return self.env[a]
        if isinstance(a, torch.dtype):
            return TORCH_TO_SCALAR_TYPE.get(a, a)  # (the form converters read dtype arguments in)
        if isinstance(a, (torch.layout, torch.memory_format)):
            return None  # strided / contiguous: nothing for a converter to act on
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(e) for e in a)
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self._symbol(a)
        return a

    def inputs(self, node: torch.fx.Node) -> list:
        """The node's arguments in schema order with defaults filled in, as a TorchScript node holds them."""
        t = node.target
        if not isinstance(t, torch._ops.OpOverload):
            return [self.arg(a) for a in node.args]
        out = []
        for i, a in enumerate(t._schema.arguments):
            if not a.kwarg_only and i < len(node.args):
                v = node.args[i]
            elif a.name in node.kwargs:
                v = node.kwargs[a.name]
            else:
                v = a.default_value if a.has_default_value() else None
            out.append(self.arg(_expand_int_list(v, a)))
        return out

    def call(self, node: torch.fx.Node) -> None:
        ctx = self.ctx
        ctx.node = FxNode(node)
        kind = node_kind(node)
        if kind in _DATA_CHECKS and _checks_data(node) is not None:
            self.env[node] = None
            return self.check(node)
        if kind in NO_OPS:
            self.env[node] = None
            return
        fn = CONVERTERS.get(kind)
        if fn is None:
            if kind == "higher_order::with_effects" and len(node.args) > 1 and \
                    isinstance(node.args[1], torch._ops.OpOverload):
                kind = node.args[1]._schema.name  # an op with side effects: name the op
            raise unsupported_error(ctx, kind)
        result = fn(ctx, self.inputs(node))
        val = node.meta.get("val")
        if isinstance(val, (tuple, list)) and not isinstance(result, (tuple, list)):
            raise InternalError(f"internal error: {ctx.op()} at {ctx.where()}: the converter returned one value for {len(val)} outputs")
        self.env[node] = result

    def check(self, node: torch.fx.Node) -> None:
        """A check on tensor values (torch._check on an .item(), torch._assert_async) as an Assert: the run
        fails with the RuntimeError eager PyTorch raises, when and only when the values break it."""
        ctx = self.ctx
        cond = self.arg(node.args[0])
        message = node.args[1] if len(node.args) > 1 and isinstance(node.args[1], str) else ""
        kind = node_kind(node)
        if kind == "aten::_assert_scalar":
            what = message.replace("Runtime assertion failed for expression ", "").split(" on node ")[0]
            message = f"torch._check({what}) failed" if what else "a torch._check failed"
        if not isinstance(cond, _C.Value):  # (folded while converting: holds or fails for every input)
            if bool(cond):
                return
            cond = np.array(False)
        ok = ctx.tensor(cond)
        if ok.dtype != "bool":
            ok = ctx.emit("Cast", [ok], {"to": 9})  # (ONNX BOOL)
        ctx.emit("Assert", [ok], {"exception": "builtins.RuntimeError", "message": message or kind},
                 num_outputs=0)

    def run(self, graph: torch.fx.Graph) -> list:
        """Converts every call of `graph` (placeholders already bound); returns the output node's values."""
        for node in graph.nodes:
            if node.op == "placeholder":
                if node not in self.env:
                    raise InternalError(f"internal error: placeholder {node.name} is not bound")
            elif node.op == "call_function":
                self.call(node)
            elif node.op == "get_attr":
                self.env[node] = _attr(graph.owning_module, node.target)
            elif node.op == "output":
                self.ctx.node = None
                outs = node.args[0]
                return [self.arg(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
            else:
                raise CompileError(f"unsupported FX node {node.op} {node.target}")
        raise InternalError("internal error: the FX graph has no output node")


def _attr(module, target: str):
    obj = module
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def dims_of(val, symbol_names: Callable[[Any], Any]) -> list:
    """A FakeTensor's shape as Cuvil dims: ints, or symbol names / expressions for SymInts."""
    return [d if isinstance(d, int) else symbol_names(d) for d in val.shape]


def cuvil_dtype(val, what: str) -> str:
    if val.dtype not in TORCH_TO_CUVIL:
        raise CompileError(f"{what} has dtype {val.dtype}, which Cuvil does not support")
    return TORCH_TO_CUVIL[val.dtype]


def constant(ctx: ConvertContext, t: torch.Tensor, name: str):
    """A parameter, buffer or lifted constant as a constant Value."""
    t = t.detach()
    if t.dtype not in TORCH_TO_CUVIL:
        raise CompileError(f"'{name}' has dtype {t.dtype}, which Cuvil does not support")
    if t.device.type != "cpu":
        t = t.cpu()
    return ctx.tensor(t.contiguous())
