"""PyTorch front end: TorchScript capture, then a direct aten::/prim:: -> Cuvil IR conversion (no ONNX round trip).

Capture: torch.jit.script first (keeps Python if/for/while on tensor values), torch.jit.trace as the fall-back
with a warning (refused where the trace would drop a `raise` guarded by a condition on tensor values:
trace_guards.py); then freeze (parameters become constants, attribute reads disappear) and inline. In-place ops
TorchScript's mutation removal leaves are analysed first (mutation.py): writes to inputs or state are refused,
writes to intermediates are converted as the new value of the written tensor (and of the views taken of it).
Each TorchScript node converts through the table in aten_ops.py; prim::If / prim::Loop become IR regions. Every
node keeps its Python file:line as its Location (a traced node: its innermost frame outside torch).

Values while converting: a TorchScript value maps to a cuvil Value (tensors, and ints/floats/bools computed at run
time, as 0-d tensors), a Python constant (ints, floats, lists, None, dtypes, devices, constant tensors), or a list
or tuple of those.
"""
from __future__ import annotations

import inspect
import re
import warnings
from typing import Any, Callable, Optional

import numpy as np
import torch

from .. import _C
from .state import StateConstants, attach_state, log_weights
from . import call_chain
from ..compiled import CompiledModule, check_options
from ..errors import CaptureWarning, CompileError, InternalError, UnsupportedError, compile_error
from . import aten_ops  # noqa: F401 - registers the converters
from . import mutation, trace_guards
from .context import CATEGORY, CONVERTERS, LOC_RE, TORCH_TO_CUVIL, ConvertContext, location, onnx_dtype_id, unsupported_error

# ---- the graph walk


class _Converter:
    def __init__(self, ctx: ConvertContext, writes: Optional["mutation.Analysis"] = None):
        self.ctx = ctx
        self.env: dict[Any, Any] = {}
        self.writes = writes if writes is not None else mutation.Analysis()

    def value(self, v):
        if v in self.env:
            return self.env[v]
        raise InternalError(f"internal error: TorchScript value %{v.debugName()} used before it is converted")

    def block(self, block):
        for node in block.nodes():
            self.node(node)

    def node(self, node):
        ctx = self.ctx
        ctx.node = node
        kind = node.kind()
        if kind == "prim::Constant":
            self.env[node.output()] = _constant_value(node)
            return
        if kind == "prim::If":
            return self.if_node(node)
        if kind == "prim::Loop":
            return self.loop_node(node)
        fn = CONVERTERS.get(kind)
        if fn is None:
            raise unsupported_error(ctx, kind)
        inputs = [self.value(i) for i in node.inputs()]
        write = self.writes.writes.get(node)
        if write is not None:
            return self.write(node, fn, inputs, write)
        result = fn(ctx, inputs)
        outs = list(node.outputs())
        if len(outs) == 1:
            self.env[outs[0]] = result
        else:
            if not isinstance(result, (tuple, list)) or len(result) != len(outs):
                raise InternalError(f"internal error: {ctx.op()} at {ctx.where()}: converter returned {type(result).__name__} for {len(outs)} outputs")
            for o, r in zip(outs, result):
                self.env[o] = r

    def write(self, node, fn, inputs: list, write: "mutation.Write") -> None:
        """An in-place op on an intermediate tensor (mutation.py refused the others): its result is the tensor's
        new value for every later reader, in the tensor's own dtype, and the views taken of it are taken again."""
        ctx = self.ctx
        target = inputs[write.written]
        args = [x for k, x in enumerate(inputs) if not (write.out_argument and k == write.written)]
        result = fn(ctx, args)
        if not write.metadata:
            result = _in_dtype_of(ctx, result, target)
        for v in list(write.rebind) + list(node.outputs()):
            self.env[v] = result
        for v, chain in write.views:
            cur = result
            for view in chain:
                ctx.node = view
                ins = [self.value(i) for i in view.inputs()]
                cur = CONVERTERS[view.kind()](ctx, [cur] + ins[1:])
            self.env[v] = cur
        ctx.node = node

    def sub_block(self, block, builder, inputs: list) -> list:
        """Converts a TorchScript block into the region `builder`; `inputs` are the region's Values for the
        block's parameters. Returns the block's converted outputs."""
        saved = self.ctx.builder
        self.ctx.builder = builder
        try:
            for p, v in zip(block.inputs(), inputs):
                self.env[p] = v
            self.block(block)
            return [self.value(o) for o in block.outputs()]
        finally:
            self.ctx.builder = saved

    def if_node(self, node):
        ctx = self.ctx
        cond = self.value(node.input())
        blocks = list(node.blocks())
        outs = list(node.outputs())
        if not isinstance(cond, _C.Value) or cond.is_constant:
            # A condition known when compiling (e.g. self.training after freezing): convert only that branch.
            taken = blocks[0] if bool(ctx.const(cond)) else blocks[1]
            results = self.sub_block(taken, ctx.builder, [])
            for o, r in zip(outs, results):
                self.env[o] = r
            return
        raising = [_raises(b) for b in blocks]
        if any(raising) and not all(raising):
            return self.check_node(node, cond, blocks, raising.index(True))
        # Tensors defined outside and written in place inside a branch: the If outputs their new values.
        written = self.writes.outer_writes.get(node, [])
        before = [self.value(v) for v in written]
        regions, branch_results = [], []
        for name, blk in (("then_branch", blocks[0]), ("else_branch", blocks[1])):
            region = ctx.builder.new_region(name)
            branch_results.append(self.sub_block(blk, region, []) + [self.env[v] for v in written])
            for v, b in zip(written, before):
                self.env[v] = b
            regions.append(region)
        ctx.node = node
        outs = outs + written
        # A tuple made inside a branch (`if c: return a, b`) is one TorchScript value: the If outputs its
        # elements, and the tuple is rebuilt from them.
        groups = _tuple_slots(branch_results)
        branch_results = [_flatten_slots(b, groups) for b in branch_results]
        slots = len(branch_results[0])
        # TorchScript's exit transforms (break, continue) yield prim::Uninitialized from the branch that never
        # defines a value. A slot uninitialized in both branches stays so; in one, it gets a zero placeholder of
        # the other branch's type there (never read: the flags TorchScript carries along guard every use).
        kept = [k for k in range(slots) if not all(_is_uninitialized(b[k]) for b in branch_results)]
        for region, results, other in ((regions[0], branch_results[0], branch_results[1]),
                                       (regions[1], branch_results[1], branch_results[0])):
            outputs = []
            for k in kept:
                r = results[k]
                if _is_uninitialized(r):
                    r = _placeholder_like(ctx, region, other[k])
                outputs.append(_region_output(ctx, region, r))
            region.set_outputs(outputs)
        cond_b = ctx.emit("Cast", [cond], {"to": onnx_dtype_id("bool")}) if cond.dtype != "bool" else cond
        if cond_b.shape not in ([], None):
            cond_b = ctx.emit("Reshape", [cond_b, np.zeros((0,), np.int64)])
        res = ctx.emit("If", [cond_b], {"then_branch": regions[0], "else_branch": regions[1]}, num_outputs=len(kept))
        res = [res] if len(kept) == 1 else res
        flat = [res[kept.index(k)] if k in kept else branch_results[0][k] for k in range(slots)]
        for o, v in zip(outs, _regroup(flat, groups)):
            self.env[o] = v

    def check_node(self, node, cond, blocks, raising: int) -> None:
        """`if cond: raise E(msg)` (or its else form, or an assert) on a run-time condition: an Assert that the
        raising branch is not taken, then the other branch inline. The run fails with E(msg) exactly when eager
        PyTorch would raise; the message is computed when compiling (a run-time size prints as its symbol)."""
        ctx = self.ctx
        exception, message = self.raised(blocks[raising])
        ctx.node = node
        ok = ctx.emit("Cast", [cond], {"to": onnx_dtype_id("bool")}) if cond.dtype != "bool" else cond
        if raising == 0:
            ok = ctx.emit("Not", [ok])
        ctx.emit("Assert", [ok], {"exception": exception, "message": message}, num_outputs=0)
        results = self.sub_block(blocks[1 - raising], ctx.builder, [])
        for o, r in zip(node.outputs(), results):
            self.env[o] = r

    def raised(self, block) -> tuple[str, str]:
        """The exception class (qualified name) and message a raising block raises. The nodes computing the
        message are converted (they fold to Python values; any tensor work they emit is dead and removed); a
        message that needs tensor data at run time is named as such."""
        *body, raise_node = [n for n in block.nodes() if n.kind() != "prim::Constant"] or [None]
        for n in block.nodes():
            if n.kind() == "prim::Constant":
                self.env[n.output()] = _constant_value(n)
        msg_in, cls_in = (list(raise_node.inputs()) + [None, None])[:2]
        try:
            for n in body:
                self.node(n)
            message = self.value(msg_in)
        except CompileError:
            message = None
        cls = self.value(cls_in) if cls_in is not None else None
        if not isinstance(message, str):
            message = "<a message computed from tensor values at run time>"
        if not isinstance(cls, str):
            # TorchScript writes `assert c, "m"` as RaiseException("AssertionError: m", None).
            m = re.match(r"([A-Za-z_][A-Za-z0-9_]*(?:Error|Exception)): ?(.*)", message, re.S)
            cls, message = ("builtins." + m.group(1), m.group(2)) if m else ("builtins.Exception", message)
        return cls, message

    def loop_node(self, node):
        ctx = self.ctx
        ins = [self.value(i) for i in node.inputs()]
        trip, cond, carried = ins[0], ins[1], ins[2:]
        block = next(node.blocks())
        outs = list(node.outputs())
        if self.try_unroll(node, block, trip, cond, carried):
            return
        for c in carried:
            if isinstance(c, (list, tuple)) and not all(not isinstance(e, _C.Value) for e in c):
                raise ctx.error("lists carried through a loop are not supported; carry tensors instead")
        if any(_is_uninitialized(c) for c in carried):
            raise ctx.error("a `return` inside a loop is not supported (TorchScript carries the returned value as an "
                            "uninitialized tensor of unknown dtype and shape); assign the result and `break` instead")
        # Tensors defined outside and written in place in the body: the loop carries them too.
        written = self.writes.outer_writes.get(node, [])
        init = [ctx.tensor(c) for c in carried + [self.value(v) for v in written]]
        region = ctx.builder.new_region("body")
        it = region.add_input("iter", "i64", [])
        cond_in = region.add_input("cond", "bool", [])
        params = [region.add_input("carried", v.dtype, v.shape) for v in init]
        for v, p in zip(written, params[len(carried):]):
            self.env[v] = p
        results = self.sub_block(block, region, [it] + params[:len(carried)])
        results = results + [self.env[v] for v in written]
        ctx.node = node
        outs = outs + written
        region.set_outputs([_region_output(ctx, region, r, dtype=("bool" if k == 0 else init[k - 1].dtype))
                            for k, r in enumerate(results)])
        _ = cond_in
        m = ctx.tensor(trip, "i64")
        c = ctx.tensor(cond, "bool")
        res = ctx.emit("Loop", [m, c] + init, {"body": region}, num_outputs=len(init))
        res = [res] if len(init) == 1 else res
        for o, r in zip(outs, res):
            self.env[o] = r


_MAX_UNROLL = 16


def _static(x) -> bool:
    if isinstance(x, _C.Value):
        return False
    if isinstance(x, (list, tuple)):
        return all(_static(e) for e in x)
    return True


def _unroll(self, node, block, trip, cond, carried) -> bool:
    """Unrolls a loop whose trip count is known when compiling and whose carried state is Python values (sizes,
    lists: what scripted helpers like F.group_norm iterate over), or that runs only a few times. Each iteration
    converts the body again; a condition that becomes a run-time value means the loop must stay a Loop."""
    ctx = self.ctx
    if not _static(trip) or not _static(cond) or not isinstance(trip, int):
        return False
    if trip > _MAX_UNROLL and all(isinstance(c, _C.Value) for c in carried):
        return False
    if trip > 4096:
        return False
    state, go = list(carried), bool(cond)
    for i in range(trip):
        if not go:
            break
        results = self.sub_block(block, ctx.builder, [i] + state)
        ctx.node = node
        nxt = results[0]
        if not _static(nxt):
            raise ctx.error("a loop over Python values whose exit condition is computed at run time is not supported")
        go, state = bool(nxt), list(results[1:])
    for o, r in zip(list(node.outputs()), state):
        self.env[o] = r
    return True


_Converter.try_unroll = _unroll


def _in_dtype_of(ctx: ConvertContext, result, target):
    """An in-place op's result in the written tensor's dtype, as PyTorch casts it (a float result into an integer
    tensor is PyTorch's error too)."""
    want, got = ctx.dtype_of(target), ctx.dtype_of(result)
    if got == want:
        return result
    if CATEGORY.get(got, 2) > CATEGORY.get(want, 2):
        raise ctx.error(f"the result's dtype {got} cannot be written into a tensor of dtype {want} (PyTorch "
                        f"refuses this in-place op too)")
    return ctx.tensor(result, want)


def _tuple_slots(branch_results: list) -> list:
    """Per If output: (tuple or list type, length) where both branches give a sequence of that length holding a
    tensor, else None."""
    groups = []
    for a, b in zip(*branch_results):
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b) and \
                any(isinstance(e, (_C.Value, torch.Tensor)) for e in (*a, *b)):
            groups.append((type(a), len(a)))
        else:
            groups.append(None)
    return groups


def _flatten_slots(results: list, groups: list) -> list:
    out = []
    for r, g in zip(results, groups):
        out.extend(r if g else [r])
    return out


def _regroup(flat: list, groups: list) -> list:
    out, i = [], 0
    for g in groups:
        if g is None:
            out.append(flat[i])
            i += 1
        else:
            kind, n = g
            out.append(kind(flat[i:i + n]))
            i += n
    return out


def _raises(block) -> bool:
    """Whether a TorchScript block always raises: its last node (before `-> ()`) is prim::RaiseException."""
    last = None
    for n in block.nodes():
        last = n
    return last is not None and last.kind() == "prim::RaiseException"


def _is_uninitialized(x) -> bool:
    return type(x).__name__ == "_Uninitialized"


def _placeholder_like(ctx: ConvertContext, region, other):
    """A zero of `other`'s type, built in `region`: Python scalars stay Python scalars; a tensor needs a static
    shape (anything else is a CompileError naming the construct)."""
    if isinstance(other, bool):
        return False
    if isinstance(other, (int, float)):
        return type(other)(0)
    if isinstance(other, _C.Value) and other.shape is not None and all(isinstance(d, int) for d in other.shape):
        saved = ctx.builder
        ctx.builder = region
        try:
            zero = ctx.tensor(0, other.dtype)
            return ctx.emit("Expand", [zero, np.array(other.shape, np.int64)])
        finally:
            ctx.builder = saved
    what = "a tensor of dynamic shape" if isinstance(other, _C.Value) else f"a {type(other).__name__}"
    raise ctx.error(f"a branch leaves a value undefined (TorchScript's transform of break/continue) and the other "
                    f"branch makes it {what}, which Cuvil cannot stand in for; compute the value before the branch")


def _region_output(ctx: ConvertContext, region, r, dtype: Optional[str] = None):
    """A region's output as a Value of that region (constants are materialized inside it)."""
    saved = ctx.builder
    ctx.builder = region
    try:
        v = ctx.tensor(r, dtype)
        if dtype is not None and v.dtype != dtype:
            v = ctx.emit("Cast", [v], {"to": onnx_dtype_id(dtype)})
        return v
    finally:
        ctx.builder = saved


def build_model(ctx: ConvertContext, outputs: list, threads: Optional[int],
                precision: str = "fp32") -> "_C.Model":
    """Declares the graph's outputs (constants materialized as Values) and builds the model (with the given
    threads and precision, before anything is prepared)."""
    if not outputs:
        raise CompileError("the model returns no tensors")
    ctx.builder.set_outputs([_region_output(ctx, ctx.builder, r) for r in outputs])
    try:  # (a module whose state_dict entries are constants of their own keeps its graph for update_weights)
        model_c = ctx.builder.build(keep_source=ctx.state is not None and ctx.state.problem() is None)
    except _C.Error as e:
        raise compile_error(e) from None
    if threads is not None:
        model_c.set_threads(threads)
    if precision != "fp32":
        model_c.set_precision(precision)
    return model_c


def _constant_value(node):
    out = node.output()
    if not node.hasAttribute("value"):
        return None
    ty = out.type()
    val = out.toIValue()
    if isinstance(ty, torch._C.DeviceObjType) or isinstance(val, torch.device):
        return torch.device(val) if not isinstance(val, torch.device) else val
    return val


# ---- capture


def _script_failure_reason(e: BaseException) -> str:
    """TorchScript's error in one line: its first sentence and the first source location it points at."""
    text = str(e).strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    first = first.rstrip(":").rstrip(".")
    m = LOC_RE.search(text)
    return f"{first} (at {m.group(1)}:{m.group(2)})" if m else first


def _capture(model, example_inputs: tuple, stacklevel: int = 3):
    """TorchScript of the model: scripted if possible (keeps control flow), traced otherwise (with a warning)."""
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return model
    try:
        return torch.jit.script(model)
    except Exception as e:  # noqa: BLE001 - scripting raises many exception types
        reason = _script_failure_reason(e)
    warnings.warn(f"cuvil.compile: torch.jit.script failed: {reason}. Falling back to torch.jit.trace: "
                  f"data-dependent control flow (Python if/for/while on tensor values) is now frozen to the path the "
                  f"example inputs take, and other inputs will follow that same path. Make forward() scriptable to "
                  f"keep its control flow.", CaptureWarning, stacklevel=stacklevel)
    try:
        with trace_guards.RecordWarnings() as seen, torch.no_grad():
            traced = torch.jit.trace(model, example_inputs, check_trace=False)
    except Exception as e:  # noqa: BLE001
        raise UnsupportedError(f"cannot capture the model: torch.jit.script failed ({reason}) and torch.jit.trace "
                           f"failed ({_script_failure_reason(e)})") from None
    dropped = trace_guards.dropped_guards(seen)
    if dropped:
        g = dropped[0]
        where = (f"{g.caller[0]}:{g.caller[1]} (in {g.raise_file}:{g.raise_line})" if g.caller else
                 f"{g.raise_file}:{g.raise_line}")
        raise UnsupportedError(
            f"forward() has `{g.what}` at {where} under a condition on tensor values (read at "
            f"{g.guard_file}:{g.guard_line}), which torch.jit.trace (the fall-back: torch.jit.script failed, {reason}) cannot "
            f"keep: the compiled model would return a value where eager PyTorch raises, so the model is not "
            f"compiled. torch.jit.script and torch.export keep such a check as a run-time check: make forward() "
            f"scriptable or exportable, or move the check out of forward() (test the inputs before calling the "
            f"compiled model)")
    return traced


def _parameters(model) -> Optional[list[tuple[str, bool]]]:
    """forward()'s positional parameters as (name, has a default); None when they cannot be found."""
    if isinstance(model, torch.jit.ScriptModule):
        return [(a.name, a.has_default_value()) for a in model.forward.schema.arguments[1:]]  # [0] is self
    if isinstance(model, torch.jit.ScriptFunction):
        return [(a.name, a.has_default_value()) for a in model.schema.arguments]
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None  # forward(*args): no names to go by
    return [(p.name, p.default is not p.empty) for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _input_names(params: Optional[list[tuple[str, bool]]], n: int) -> list[str]:
    """The names of the first n parameters (those with example inputs); the rest must have defaults."""
    if params is None:
        return [f"input{i}" for i in range(n)]
    names = [p for p, _ in params]
    if n > len(params):
        raise ValueError(f"forward() takes {len(params)} argument(s) ({', '.join(names)}) but {n} example input(s) "
                         f"were given")
    missing = [p for p, has_default in params[n:] if not has_default]
    if missing:
        raise ValueError(f"forward() takes {len(params)} argument(s) ({', '.join(names)}) but {n} example input(s) "
                         f"were given; give one example tensor for each argument without a default "
                         f"(missing: {', '.join(missing)})")
    return names[:n]


def _bind_defaults(graph, schema_args, first: int, n: int) -> None:
    """Replaces graph inputs past the n given ones by constants of their defaults (mask=None, ...), so that
    constant propagation can fold the branches that test them."""
    inputs = list(graph.inputs())
    anchor = next(iter(graph.nodes()), graph.return_node())
    for idx in range(len(inputs) - 1, first + n - 1, -1):
        arg = schema_args[idx]
        if not arg.has_default_value():
            raise CompileError(f"forward() argument '{arg.name}' has no example input and no default")
        with graph.insert_point_guard(anchor):
            c = graph.insertConstant(arg.default_value)
        inputs[idx].replaceAllUsesWith(c)
        graph.eraseInput(idx)


def _example_tensors(example_inputs, names: Optional[list[str]]) -> tuple:
    """The example inputs as a tuple of tensors (NumPy arrays are accepted and wrapped without a copy)."""
    if isinstance(example_inputs, (torch.Tensor, np.ndarray)):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError(f"example_inputs must be a tensor or a tuple of tensors (one per forward() argument), got "
                        f"{type(example_inputs).__name__}")
    out = []
    for i, x in enumerate(example_inputs):
        what = f"example input {i}" + (f" ('{names[i]}')" if names and i < len(names) else "")
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(np.ascontiguousarray(x))
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{what} is a {type(x).__name__}; cuvil.compile takes tensors only (non-tensor "
                            f"arguments become constants: bind them in the module, e.g. with functools.partial or "
                            f"a wrapper module)")
        if x.dtype not in TORCH_TO_CUVIL:
            raise TypeError(f"{what} has dtype {x.dtype}, which Cuvil does not support (supported: "
                            f"{', '.join(str(d).replace('torch.', '') for d in TORCH_TO_CUVIL)})")
        if x.device.type != "cpu":
            raise ValueError(f"{what} is on {x.device}; example inputs must be CPU tensors")
        out.append(x.detach())
    return tuple(out)


def _input_dims(x: torch.Tensor, spec: Optional[dict]) -> list:
    """The declared dims of an input: the example's sizes, with the axes of `spec` ({axis: "symbol"}, already
    validated by capture.normalize_dynamic_shapes) made symbolic."""
    dims: list = list(x.shape)
    for axis, sym in (spec or {}).items():
        dims[axis % x.dim()] = sym
    return dims


def _output_structure(x) -> Any:
    """How the flat outputs nest: "tensor", "none", ("tuple"|"list", [items]) or ("dict", [(key, item)])."""
    if x is None:
        return "none"
    if isinstance(x, dict):
        return ("dict", [(k, _output_structure(v)) for k, v in x.items()])
    if isinstance(x, _C.Value) or not isinstance(x, (tuple, list)):
        return "tensor"
    return ("tuple" if isinstance(x, tuple) else "list", [_output_structure(e) for e in x])


def _flatten(x) -> list:
    if x is None:
        return []
    if isinstance(x, dict):
        return [v for e in x.values() for v in _flatten(e)]
    if isinstance(x, (tuple, list)):
        return [v for e in x for v in _flatten(e)]
    return [x]


def _state_label(model) -> Callable[[str], str]:
    """How messages name a module attribute read in forward(): "parameter 'fc.weight'", "buffer 'bn.running_mean'"."""
    params = {n for n, _ in model.named_parameters()} if isinstance(model, torch.nn.Module) else set()
    buffers = {n for n, _ in model.named_buffers()} if isinstance(model, torch.nn.Module) else set()
    return lambda path: (f"parameter '{path}'" if path in params else f"buffer '{path}'" if path in buffers
                         else f"attribute '{path}'")


def _training_flags(model) -> list:
    return [(m, m.training) for m in model.modules()] if isinstance(model, torch.nn.Module) else []


def compile(model, example_inputs, *, dynamic_shapes: Optional[dict] = None, precision: str = "fp32",
            device: str = "cpu", threads: Optional[int] = None, _stacklevel: int = 1,
            **options) -> CompiledModule:
    """Compiles a PyTorch model into a :class:`cuvil.CompiledModule` with the same call signature.

    model: a torch.nn.Module, a ScriptModule, or a function of tensors. It is captured with torch.jit.script
    (which keeps Python control flow on tensor values) or, when scripting fails, torch.jit.trace with a
    :class:`cuvil.CaptureWarning` saying why (data-dependent control flow is then frozen), then frozen in eval mode.
    example_inputs: a tensor or a tuple of tensors (NumPy arrays accepted), one per forward() argument; they fix
    each input's dtype, rank and sizes.
    dynamic_shapes: ``{"x": {0: "batch"}}`` makes dims symbolic, keyed by forward()'s argument names; inputs
    sharing a symbol must agree on it at run time.
    precision: "fp32" or "bf16" (see cuvil.compile). device: "cpu". threads: threads for oneDNN and Cuvil's
    kernels (None: all cores).

    Raises cuvil.CompileError naming an unsupported aten op (or argument value), its Python file:line and what is
    supported instead; also for a forward() that writes in place to its inputs or state (eager PyTorch would
    change the caller's tensors; a compiled model never writes to its inputs) and for a trace that would drop a
    `raise` on tensor values; TypeError/ValueError for bad arguments (unknown options, non-tensor example inputs, bad
    dynamic_shapes)."""
    check_options(precision, device, threads, options)
    if not (isinstance(model, torch.nn.Module) or callable(model)):
        raise TypeError(f"model must be a torch.nn.Module or a function, got {type(model).__name__}")
    params = _parameters(model)
    examples = _example_tensors(example_inputs, [p for p, _ in params] if params else None)
    names = _input_names(params, len(examples))
    dynamic_shapes = dynamic_shapes or {}  # validated by capture.normalize_dynamic_shapes
    dims = [_input_dims(x, dynamic_shapes.get(n)) for n, x in zip(names, examples)]

    flags = _training_flags(model)
    if isinstance(model, torch.nn.Module):
        model.eval()
    try:
        scripted = _capture(model, examples, _stacklevel + 2)  # warnings point at the caller
        frozen, state_keys = _freeze(model, scripted)
    finally:
        for m, was_training in flags:
            m.training = was_training
    graph = frozen.graph.copy()
    has_self = isinstance(frozen, torch.jit.ScriptModule)
    if len(list(graph.inputs())) > has_self + len(examples):  # scripted, with defaulted arguments left out
        schema = frozen.forward.schema if has_self else frozen.schema
        _bind_defaults(graph, schema.arguments, int(has_self), len(examples))
    torch._C._jit_pass_inline(graph)
    torch._C._jit_pass_constant_propagation(graph)
    torch._C._jit_pass_remove_mutation(graph)
    torch._C._jit_pass_dce(graph)

    builder = _C.GraphBuilder("main")
    ctx = ConvertContext(builder)
    ctx.call_sites = call_chain.script_call_sites(scripted)
    if state_keys is not None:
        ctx.state = StateConstants(builder, state_keys)
        ctx.state.paths[id(frozen)] = ""
    graph_inputs = list(graph.inputs())
    if len(graph_inputs) - has_self != len(examples):
        raise CompileError(f"the captured forward() takes {len(graph_inputs) - has_self} tensor input(s), "
                           f"{len(examples)} example input(s) given")
    # In-place writes TorchScript left: to inputs or state refused, to intermediates planned (mutation.py).
    writes = mutation.analyse(graph, [None] * has_self + [f"input '{n}'" for n in names], _state_label(model),
                              [None] * has_self + [x.dtype for x in examples])
    conv = _Converter(ctx, writes)
    if has_self:
        conv.env[graph_inputs[0]] = frozen  # for attribute reads freezing left (prim::GetAttr)
        graph_inputs = graph_inputs[1:]
    for name, tv, x, d in zip(names, graph_inputs, examples, dims):
        conv.env[tv] = builder.add_input(name, TORCH_TO_CUVIL[x.dtype], d)
    conv.block(graph.block())
    ctx.node = None
    ret = [conv.value(o) for o in graph.outputs()]
    result = ret[0] if len(ret) == 1 else tuple(ret)
    model_c = build_model(ctx, _flatten(result), threads, precision)
    # Plan and prepare kernels (packing weights) for the example shapes now, so the first call only runs.
    try:
        model_c.prepare([list(x.shape) for x in examples])
    except _C.Error as e:
        raise compile_error(e) from None
    compiled = CompiledModule(model_c, _output_structure(result))
    attach_state(compiled, ctx.state)
    return compiled


def _freeze(model, scripted) -> tuple:
    """The frozen module, and the state_dict keys it keeps as attributes (None: none kept). The module's
    parameters and buffers stay attributes (each read becomes a named constant: frontend/state.py), so that
    freezing derives nothing from their values; Cuvil's passes fold BatchNorms and transposes instead."""
    if not isinstance(scripted, torch.jit.ScriptModule):
        return scripted, None
    keys = list(model.state_dict().keys()) if isinstance(model, torch.nn.Module) else []
    if keys:
        try:
            return torch.jit.freeze(scripted.eval(), preserved_attrs=keys), keys
        except Exception as e:  # noqa: BLE001 - frozen as usual; update_weights then compiles again
            log_weights(f"the module's state could not stay attributes through torch.jit.freeze ({e}); "
                        f"update_weights will compile it again")
    try:
        return torch.jit.freeze(scripted.eval()), None
    except Exception as e:  # noqa: BLE001
        raise CompileError(f"torch.jit.freeze failed: {_script_failure_reason(e)}") from None
