"""PyTorch 2 front end: torch.export -> ATen graph -> Cuvil IR.

The model is exported (non-strict, as torch.export.export(mod, args, kwargs, dynamic_shapes=...) does it),
functionalized with no decompositions (in-place ops become their pure forms; conv2d, linear, layer_norm and
scaled_dot_product_attention stay whole, as Cuvil's passes and kernels want them), and ops the converter table
lacks are decomposed into core ATen where torch knows how. Parameters and buffers become constants; each user
input keeps its name and its dims (torch.export.Dim's become Cuvil symbols of the same name, their ranges checked
on every call); outputs come back in the model's own structure (tuples, dicts, Hugging Face ModelOutputs).
"""
from __future__ import annotations

import inspect
from typing import Optional

import sympy
import torch
import torch.utils._pytree as pytree
from torch.utils._sympy.numbers import int_oo

from .. import _C
from ..compiled import CompiledModule, DimBound
from ..errors import CompileError
from .state import StateConstants, attach_state
from .fx_graph import NO_OPS, FxConverter, constant, cuvil_dtype, dims_of, node_kind, user_frames
from .mutation import ModelRefused  # noqa: F401 - capture.py reads it from here
from . import aten_ops  # noqa: F401 - registers the converters
from .context import CONVERTERS, ConvertContext
from .torchscript import build_model

_MAX_DECOMPOSITION_ROUNDS = 4


class ExportFailed(Exception):
    """torch.export could not capture the model (data-dependent control flow, unsupported Python); the message
    is torch's reason in one line."""


# ---- dynamic shapes


def _as_dim(spec):
    """One axis' spec as torch.export takes it: Dim objects pass; a symbol name is Dim.DYNAMIC (export then
    derives the range the model allows, e.g. a sequence no longer than its position table, which each call
    checks; the name is given to export's symbol afterwards)."""
    return torch.export.Dim.DYNAMIC if isinstance(spec, str) else spec


def _with_dims(shapes: Optional[dict]) -> Optional[dict]:
    """Normalized dynamic shapes (capture.normalize_dynamic_shapes) with symbol names made Dims."""
    if shapes is None:
        return None
    return {k: {a: _as_dim(s) for a, s in axes.items()} for k, axes in shapes.items()}


def _widen_examples(values: list, names: list[str], shapes: Optional[dict]) -> list:
    """Examples whose dynamic dims are 0 or 1 repeated to 2 along them: torch.export specializes sizes 0 and 1,
    so a batch-1 example would fix the batch. Only shapes and dtypes matter for capture."""
    if not shapes:
        return values
    out = []
    for name, x in zip(names, values):
        for axis in (shapes.get(name) or {}):
            if x.shape[axis] == 1:
                x = torch.cat([x, x], dim=axis)
            elif x.shape[axis] == 0:
                x = torch.zeros(*x.shape[:axis], 2, *x.shape[axis + 1:], dtype=x.dtype)
        out.append(x)
    return out


class _Symbols:
    """Names for torch's shape symbols: the user's Dim names where an input dim is one, expressions over them
    where a dim is derived (2*seq), fresh names otherwise."""

    def __init__(self):
        self.names: dict[sympy.Symbol, str] = {}

    def bind(self, expr, name: str) -> None:
        if isinstance(expr, sympy.Symbol) and expr not in self.names:
            self.names[expr] = name

    def __call__(self, s):
        expr = s.node.expr if isinstance(s, (torch.SymInt, torch.SymFloat, torch.SymBool)) else s
        if isinstance(expr, sympy.Integer) or isinstance(expr, int):
            return int(expr)
        return self._print(expr)

    def _print(self, e) -> str:
        if isinstance(e, sympy.Symbol):
            return self.names.setdefault(e, str(e))
        if isinstance(e, sympy.Integer):
            return str(int(e))
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(self._print(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + " * ".join(self._print(a) for a in e.args) + ")"
        fn = type(e).__name__
        if fn in ("FloorDiv", "CleanDiv") and len(e.args) == 2:
            return f"floordiv({self._print(e.args[0])}, {self._print(e.args[1])})"
        if fn in ("Mod", "PythonMod") and len(e.args) == 2:
            return f"mod({self._print(e.args[0])}, {self._print(e.args[1])})"
        if fn in ("Max", "Min") and len(e.args) == 2:
            return f"{fn.lower()}({self._print(e.args[0])}, {self._print(e.args[1])})"
        raise CompileError(f"the shape expression {e} has no Cuvil form")


# ---- capture


def _signature_names(model, n_args: int, kwargs: dict) -> list[str]:
    """The names of the inputs: forward()'s parameter names for positional examples, then the keywords."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        pos = [p.name for p in params[:n_args]]
    except (TypeError, ValueError):
        pos = []
    pos += [f"input{i}" for i in range(len(pos), n_args)]
    return pos + list(kwargs)


def export_program(model, args: tuple, kwargs: dict, dynamic_shapes) -> torch.export.ExportedProgram:
    """torch.export.export of the model in eval mode, functionalized; ExportFailed says why it could not be."""
    names = _signature_names(model, len(args), kwargs)
    values = list(args) + list(kwargs.values())
    shapes = _with_dims(dynamic_shapes)
    wide = _widen_examples(values, names, shapes)
    wargs, wkwargs = tuple(wide[:len(args)]), dict(zip(kwargs, wide[len(args):]))
    ds = None
    if shapes is not None:  # torch.export wants the spec in the call's structure
        ds = {"args": tuple(shapes.get(n) for n in names[:len(args)]),
              "kwargs": {k: shapes.get(k) for k in kwargs}}
        ds = _spec_by_parameter(model, ds, len(args), list(kwargs))
    module = model if isinstance(model, torch.nn.Module) else _FunctionModule(model)
    was_training = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            ep = torch.export.export(module, wargs, wkwargs, dynamic_shapes=ds, strict=False)
        ep = functionalize(ep)

    except Exception as e:  # noqa: BLE001 - export raises many exception types
        raise ExportFailed(_one_line(e)) from e
    finally:
        for m, t in was_training:
            m.training = t
    # The Dim names by input axis, for naming the program's symbols (export keeps only its own, s0, s77, ...)
    ep._cuvil_dim_names = {(name, axis): d if isinstance(d, str) else d.__name__
                           for name, axes in (dynamic_shapes or {}).items() for axis, d in axes.items()
                           if isinstance(d, str) or hasattr(d, "__name__")}
    return ep


def functionalize(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """The program with in-place ops made pure (run_decompositions with an empty table). Where torch's re-trace
    fails (seen on GPT-2: a view of merged attention heads its fake strides cannot prove contiguous), the
    program as exported serves when every in-place op writes a tensor nothing reads afterwards, so converting it
    as the pure op computes the same."""
    writes = _input_writes(ep)
    if _already_pure(ep):
        ep._cuvil_input_writes = writes
        return ep
    try:
        out = ep.run_decompositions({})
        out._cuvil_input_writes = writes
        return out
    except Exception:  # noqa: BLE001
        order = {n: i for i, n in enumerate(ep.graph.nodes)}
        for n in ep.graph.nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and \
                    n.target._schema.is_mutable:
                target = n.args[0] if n.args else None
                if not isinstance(target, torch.fx.Node) or target.op == "placeholder" or \
                        any(order[u] > order[n] for u in target.users if u is not n):
                    raise
        ep._cuvil_input_writes = writes
        return ep


def _already_pure(ep: torch.export.ExportedProgram) -> bool:
    """Whether the program needs no functionalization: no op writes in place, no region (higher-order op) hides
    one, and every op has a converter as it stands. Functionalizing re-traces the whole program (all-MiniLM-L6-v2:
    2-3 s of a 6 s compile) to change nothing such a program computes: it only inlines composite ops (dropout,
    reshape, to) whose converters exist."""
    for n in ep.graph.nodes:
        if n.op == "get_attr":
            return False  # a region's submodule (torch.cond, while_loop, scan)
        if n.op != "call_function":
            continue
        t = n.target
        if isinstance(t, torch._ops.HigherOrderOperator) or \
                (isinstance(t, torch._ops.OpOverload) and t._schema.is_mutable):
            return False
        if node_kind(n) not in CONVERTERS and node_kind(n) not in NO_OPS:
            return False
    return True


def _input_writes(ep: torch.export.ExportedProgram) -> list[tuple[str, str, str, str]]:
    """The in-place ops (and out= arguments) of a program not yet functionalized that write to a user input,
    parameter or buffer, directly or through views: (what, op, file:line, " on a view of it (aten::select)"), in
    graph order, for ModelRefused's message (functionalized, the write is an aten::add or a select_scatter)."""
    labels = {}
    for spec in ep.graph_signature.input_specs:
        kind = spec.kind.name
        name = getattr(spec.arg, "name", None)
        if name is None:
            continue
        if kind == "USER_INPUT":
            labels[name] = f"input '{name}'"
        elif kind in ("PARAMETER", "BUFFER"):
            labels[name] = f"{kind.lower()} '{spec.target}'"
    out = []
    for n in ep.graph.nodes:
        t = n.target
        if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload) or not t._schema.is_mutable:
            continue
        args = [(a, n.args[i] if not a.kwarg_only and i < len(n.args) else n.kwargs.get(a.name))
                for i, a in enumerate(t._schema.arguments)]
        for a, v in args:
            if a.alias_info is None or not a.alias_info.is_write or not isinstance(v, torch.fx.Node):
                continue
            views = []
            while v.op == "call_function" and isinstance(v.target, torch._ops.OpOverload) and v.args and \
                    _is_view(v.target) and isinstance(v.args[0], torch.fx.Node):
                views.append(node_kind(v))
                v = v.args[0]
            if v.op == "placeholder" and v.name in labels:
                frames = user_frames(n)
                where = f"{frames[-1][0]}:{frames[-1][1]}" if frames else "<unknown location>"
                how = f" on a view of it ({', '.join(reversed(views))})" if views else ""
                op = node_kind(n) + (" (its out= argument)" if a.kwarg_only else "")
                out.append((labels[v.name], op, where, how))
    return out


def _is_view(op) -> bool:
    """An op whose output shares memory with its first input (view, select, slice, transpose, ...)."""
    rets = op._schema.returns
    args = op._schema.arguments
    if len(rets) != 1 or rets[0].alias_info is None or rets[0].alias_info.is_write or not args:
        return False
    first = args[0].alias_info
    return first is not None and bool(set(first.before_set) & set(rets[0].alias_info.before_set))


def _spec_by_parameter(model, ds: dict, n_args: int, kw: list[str]):
    """torch.export matches a dict of dynamic shapes to forward()'s parameter names: positional examples take
    their parameter's name, keywords their own."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return tuple(ds["args"]) + tuple(ds["kwargs"].values())
    out = {}
    for i, spec in enumerate(ds["args"]):
        out[params[i] if i < len(params) else f"input{i}"] = spec
    out.update(ds["kwargs"])
    return out


class _FunctionModule(torch.nn.Module):
    """A plain function of tensors as the module torch.export needs."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.forward = fn  # keeps the function's own signature for export's argument names


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    return f"{type(e).__name__}: {first}"


def _decompose_missing(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """Decomposes (into core ATen) the ops that have no converter, as long as torch knows a decomposition."""
    table = torch.export.default_decompositions()
    for _ in range(_MAX_DECOMPOSITION_ROUNDS):
        missing = {n.target for n in ep.graph.nodes if n.op == "call_function"
                   and isinstance(n.target, torch._ops.OpOverload) and node_kind(n) not in CONVERTERS
                   and node_kind(n) not in NO_OPS}
        todo = {op: table[op] for op in missing if op in table}
        if not todo:
            return ep
        try:
            ep = ep.run_decompositions(todo)
        except Exception:  # noqa: BLE001 - torch's re-trace failed: the missing op is then reported as such
            return ep
    return ep


# ---- conversion


def convert_program(ep: torch.export.ExportedProgram, *, threads: Optional[int],
                    precision: str = "fp32", state_keys=None) -> CompiledModule:
    """An exported program as a compiled module: parameters, buffers and constants inlined, user inputs in
    order, outputs in the program's own structure. `state_keys`: the module's state_dict keys, whose entries
    become named constants that update_weights replaces (frontend/state.py)."""

    dim_names = getattr(ep, "_cuvil_dim_names", {})
    writes = getattr(ep, "_cuvil_input_writes", None)
    ep = _decompose_missing(ep)
    sig = ep.graph_signature
    mutated = [s for s in sig.output_specs if s.kind.name in ("BUFFER_MUTATION", "USER_INPUT_MUTATION")]
    if mutated:
        what = ", ".join(f"{'input' if s.kind.name == 'USER_INPUT_MUTATION' else 'buffer'} '{s.target}'"
                         for s in mutated)
        if writes:  # the same message as TorchScript's path (mutation.py)
            _, op, where, how = writes[0]
            raise ModelRefused(f"forward() mutates {what} in place (at {where}) with {op}{how}; a compiled model "
                               f"never writes to its inputs or state: return the new value instead (e.g. "
                               f"`y = x.add(1)` for `x.add_(1)`)")
        raise ModelRefused(f"forward() mutates {what} in place{_where(mutated, ep)}; a compiled model never writes to its inputs or "
                           f"state: return the new value instead")
    builder = _C.GraphBuilder("main")
    ctx = ConvertContext(builder)
    if state_keys is not None:
        ctx.state = StateConstants(builder, state_keys)
    symbols = _Symbols()
    conv = FxConverter(ctx, symbols)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    user_inputs = [s for s in sig.input_specs if s.kind.name == "USER_INPUT"]
    _name_symbols(dim_names, user_inputs, placeholders, symbols)
    bounds = []
    for i, s in enumerate(user_inputs):
        node = placeholders[s.arg.name]
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise CompileError(f"input '{s.arg.name}' is a {type(val).__name__}; compiled models take tensors "
                               f"(bind other arguments in the module)")
        dims = dims_of(val, symbols)
        conv.env[node] = builder.add_input(s.arg.name, cuvil_dtype(val, f"input '{s.arg.name}'"), dims)
        bounds += _bounds_of(ep, i, val, symbols)
    for s in sig.input_specs:
        if s.kind.name == "USER_INPUT":
            continue
        node = placeholders[s.arg.name]
        if s.kind.name in ("PARAMETER", "BUFFER"):
            t = ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target]
        elif s.kind.name == "CONSTANT_TENSOR":
            t = ep.constants[s.target]
        elif s.kind.name == "TOKEN":  # orders ops with side effects; the op itself is refused where it is
            conv.env[node] = None
            continue
        else:
            raise CompileError(f"unsupported exported input kind {s.kind.name} ('{s.arg.name}')")
        if not isinstance(t, torch.Tensor):
            raise CompileError(f"'{s.target}' is a {type(t).__name__}, not a tensor")
        if ctx.state is not None and s.kind.name in ("PARAMETER", "BUFFER") and s.target in ctx.state.keys:
            conv.env[node] = ctx.state.value(s.target, t)
        else:
            if ctx.state is not None and s.kind.name == "PARAMETER":  # (not one of the module's own keys)
                ctx.state.baked.setdefault(s.target, "a parameter not named as in the module's state_dict")
            conv.env[node] = constant(ctx, t, s.target)
    results = conv.run(ep.graph)
    user_outputs = [r for r, s in zip(results, sig.output_specs) if s.kind.name == "USER_OUTPUT"]
    # None outputs (an attention's weights when not asked for) are no tensors: put back when unflattening
    model_c = build_model(ctx, [r for r in user_outputs if r is not None], threads, precision)
    out_spec = ep.call_spec.out_spec
    nones = [r is None for r in user_outputs]

    def unflatten(outs: list):
        if any(nones):
            it = iter(outs)
            outs = [None if n else next(it) for n in nones]
        return pytree.tree_unflatten(outs, out_spec)

    # What an artifact stores of it (cuvil.artifact): the spec as JSON, where pytree can write it.
    try:
        unflatten.cuvil_saved = {"pytree": pytree.treespec_dumps(out_spec), "nones": nones}
    except Exception:  # noqa: BLE001 - a custom node type: saved modules then return flat outputs
        pass
    compiled = CompiledModule(model_c, unflatten=unflatten, dim_bounds=bounds)
    attach_state(compiled, ctx.state)
    return compiled


def _where(mutated, ep) -> str:
    """ at file:line of the first in-place op on a mutated input or buffer, where the graph records it."""
    names = {s.arg.name for s in mutated}
    for n in ep.graph.nodes:
        if n.op == "output":
            continue
        if n.name in names or any(getattr(u, "name", None) in names for u in n.users):
            frames = user_frames(n)
            if frames and n.op == "call_function":
                return f" (at {frames[-1][0]}:{frames[-1][1]})"
    return ""


def _name_symbols(dim_names: dict, user_inputs, placeholders, symbols: _Symbols) -> None:
    """Gives torch's input symbols the user's Dim names ({(input, axis): name}; export keeps only its own)."""
    for s in user_inputs:
        val = placeholders[s.arg.name].meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for axis, d in enumerate(val.shape):
            if isinstance(d, torch.SymInt):
                expr = d.node.expr
                if isinstance(expr, sympy.Symbol):
                    symbols.bind(expr, dim_names.get((s.arg.name, axis)) or f"{s.arg.name}_{axis}")


def _finite(v) -> Optional[int]:
    if v in (int_oo, -int_oo, sympy.oo, -sympy.oo):
        return None
    return int(v)


def _bounds_of(ep, index: int, val, symbols: _Symbols) -> list:
    out = []
    for axis, d in enumerate(val.shape):
        if isinstance(d, torch.SymInt) and isinstance(d.node.expr, sympy.Symbol):
            vr = ep.range_constraints.get(d.node.expr)
            if vr is None:
                continue
            lo, hi = _finite(vr.lower), _finite(vr.upper)
            lo = None if lo is not None and lo <= 2 else lo  # export's own floor (it specializes 0 and 1)
            if lo is not None or hi is not None:
                out.append(DimBound(index, axis, symbols(d), lo, hi))
    return out
