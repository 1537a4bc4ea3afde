"""Transformer-side converters.

Tensor ops: batched and fused matrix products (bmm, mm, baddbmm, addmm, einsum), softmax/log_softmax, embedding,
masks (masked_fill, where, triu/tril), tensor factories (arange, zeros/ones/full/empty and their *_like / new_*
forms, scalar_tensor), dtype conversions (to, type_as) and logical/bitwise ops on bools.

TorchScript plumbing: what scripted nn.MultiheadAttention / nn.Transformer* layers carry once frozen and inlined.
Most of it is decided while compiling: None checks (aten::__is__), dtype/device queries, the strings of assertion
messages, list/int arithmetic, and exceptions on paths that constant folding shows can never run.

PyTorch's fused fast paths (torch._native_multi_head_attention, torch._transformer_encoder_layer_fwd and the
nested-tensor conversion in nn.TransformerEncoder) are gated on autograd and device queries. Cuvil folds those
queries so that the general path is always taken: it computes the same function, except that the nested-tensor
path (taken by PyTorch only under no_grad with a left-aligned src_key_padding_mask) zeroes padded positions and
trims the output to the longest unpadded sequence, a data-dependent shape a compiled graph cannot have. Cuvil
therefore matches eager PyTorch with autograd enabled, and equals no_grad PyTorch everywhere but at padded positions.
A graph traced under no_grad has the fused kernels recorded in it; they convert to the same math (the nested-tensor
ops are a clear error).
"""
from __future__ import annotations

import re

import numpy as np
import torch

from .context import CATEGORY, NUMPY_DTYPES, SCALAR_TYPE_TO_TORCH, TORCH_TO_CUVIL, ConvertContext, converter, onnx_dtype_id
from .aten_core import (_dim, _linear, binary, list_made_here, note_list, result_dtype,
                        static_equal, symbol_of)
from .aten_shape import emit_n

TORCH_TO_SCALAR_TYPE = {t: k for k, t in SCALAR_TYPE_TO_TORCH.items()}
CUVIL_TO_SCALAR_TYPE = {TORCH_TO_CUVIL[t]: k for t, k in TORCH_TO_SCALAR_TYPE.items()}


# ---- helpers


def _overload(ctx: ConvertContext) -> str:
    """The overload name of the node's schema ("dtype" for aten::to.dtype, "" for the unnamed one)."""
    name = ctx.node.schema().split("(", 1)[0]
    return name.split(".", 1)[1] if "." in name else ""


def _dtype_arg(ctx: ConvertContext, d):
    """A ScalarType argument (an int in TorchScript, or a torch.dtype) as a Cuvil dtype name; None stays None."""
    d = ctx.const(d, "the dtype")
    if d is None:
        return None
    t = d if isinstance(d, torch.dtype) else SCALAR_TYPE_TO_TORCH.get(d)
    if t not in TORCH_TO_CUVIL:
        raise ctx.error(f"dtype {t if t is not None else d} is not supported")
    return TORCH_TO_CUVIL[t]


def _cast(ctx: ConvertContext, x, dt: str):
    """x (a Value or a constant) as a Value of dtype dt."""
    if dt == "bf16" and not ctx.is_value(x):
        return ctx.emit("Cast", [ctx.tensor(x, "f32")], {"to": onnx_dtype_id("bf16")})
    return ctx.tensor(x, dt)


def _is_float(dt: str) -> bool:
    return CATEGORY[dt] == 2


def _default_dtype_of(ctx: ConvertContext, *scalars) -> str:
    """The dtype torch infers from Python scalars (and 0-d run-time scalars): bool, int64 or the default float."""
    cat = max(CATEGORY[ctx.dtype_of(s)] for s in scalars)
    return {0: "bool", 1: "i64", 2: "f32"}[cat]


def _shape_tensor(ctx: ConvertContext, size):
    """A size argument (ints and run-time ints) as a 1-D i64 tensor."""
    size = list(size) if isinstance(size, (list, tuple)) else [size]
    if all(not ctx.is_value(s) for s in size):
        return np.array(size, np.int64).reshape(len(size))
    return ctx.stack_scalars(size, "i64")


def _shape_of(ctx: ConvertContext, x):
    """x's shape as a 1-D i64 tensor: a constant when static, Shape(x) otherwise."""
    dims = x.shape if ctx.is_value(x) else list(np.shape(x))
    if dims is not None and all(isinstance(d, int) for d in dims):
        return np.array(dims, np.int64).reshape(len(dims))
    return ctx.emit("Shape", [x])


def _filled(ctx: ConvertContext, shape, value, dt: str):
    """A tensor of `shape` (a 1-D i64 tensor) filled with `value` (a Python number or a 0-d Value) in dtype dt."""
    if ctx.is_value(value):
        v = ctx.tensor(value, dt)
        if v.shape != []:
            v = ctx.emit("Reshape", [v, np.zeros((0,), np.int64)])
        return ctx.emit("Expand", [v, shape])
    if dt == "bf16":  # NumPy has no bf16: fill in f32 and convert
        f = ctx.emit("ConstantOfShape", [shape], {"value": np.array([value], np.float32)})
        return ctx.emit("Cast", [f], {"to": onnx_dtype_id(dt)})
    np_dt = NUMPY_DTYPES[dt]
    if isinstance(value, float) and not _is_float(dt) and dt != "bool":
        value = int(value)  # torch truncates a float fill value for integer dtypes
    return ctx.emit("ConstantOfShape", [shape], {"value": np.array([value], np_dt)})


# ---- compile-time facts: device, dtype, autograd and layout queries


@converter("prim::device")
def _device(ctx: ConvertContext, ins):
    return torch.device("cpu")  # every tensor Cuvil compiles lives on the CPU


@converter("prim::dtype")
def _dtype(ctx: ConvertContext, ins):
    return CUVIL_TO_SCALAR_TYPE[ctx.dtype_of(ins[0])]


@converter("prim::is_cuda", "prim::is_nested", "prim::is_sparse", "prim::is_sparse_csr", "prim::is_mkldnn",
           "prim::is_quantized", "prim::is_meta", "prim::is_xpu", "prim::is_vulkan", "prim::is_ipu",
           "aten::is_complex", "aten::is_autocast_enabled", "aten::is_autocast_cpu_enabled")
def _false(ctx: ConvertContext, ins):
    return False


@converter("aten::is_floating_point")
def _is_floating_point(ctx: ConvertContext, ins):
    return _is_float(ctx.dtype_of(ins[0]))


@converter("aten::is_grad_enabled", "prim::requires_grad")
def _grad_queries(ctx: ConvertContext, ins):
    # Only PyTorch's fused fast-path gates ask these; answering True selects the general path (see the module doc).
    return True


@converter("aten::_nested_tensor_from_mask_left_aligned")
def _left_aligned(ctx: ConvertContext, ins):
    # nn.TransformerEncoder's gate for the nested-tensor path: never taken (see the module doc).
    return False


@converter("aten::numel")
def _numel(ctx: ConvertContext, ins):
    x = ins[0]
    dims = x.shape if ctx.is_value(x) else list(np.shape(x))
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims, dtype=np.int64))
    return ctx.emit("Size", [x])


@converter("aten::warn")
def _warn(ctx: ConvertContext, ins):
    return ()  # warnings are for eager runs; the compiled model stays silent


# ---- TorchScript values: casts, None checks, exceptions


@converter("prim::unchecked_cast")
def _unchecked_cast(ctx: ConvertContext, ins):
    return ins[0]


@converter("aten::__is__", "aten::__isnot__")
def _is(ctx: ConvertContext, ins):
    # Identity of converted values: a None stays Python's None and a TorchScript value always maps to the same
    # object, so `x is None` and `key is value` fold. Distinct values that alias at run time compare as distinct,
    # which only picks PyTorch's general path over a fused one.
    same = ins[0] is ins[1]
    return same if ctx.node.kind() == "aten::__is__" else not same


_TYPE_NAMES = {"Tensor": lambda ctx, v: ctx.is_value(v) or isinstance(v, torch.Tensor),
               "NoneType": lambda ctx, v: v is None,
               "int": lambda ctx, v: isinstance(v, int) and not isinstance(v, bool),
               "float": lambda ctx, v: isinstance(v, float),
               "bool": lambda ctx, v: isinstance(v, bool),
               "str": lambda ctx, v: isinstance(v, str)}


@converter("prim::isinstance")
def _isinstance(ctx: ConvertContext, ins):
    m = re.search(r"types=\[(.*?)\]\]?\(", str(ctx.node))
    if m is None:
        raise ctx.error("cannot read the types of this isinstance check")
    x = ins[0]
    for name in (t.strip() for t in m.group(1).split(",")):
        if name.startswith(("List[", "Tuple[")) and isinstance(x, (list, tuple)):
            return True
        check = _TYPE_NAMES.get(name.rstrip("]"))
        if check is not None and check(ctx, x):
            return True
    return False


class _Uninitialized:
    """The value of prim::Uninitialized: what a branch that raises 'returns'; it must never be used."""

    def __repr__(self):
        return "<uninitialized>"


@converter("prim::Uninitialized")
def _uninitialized(ctx: ConvertContext, ins):
    return _Uninitialized()


@converter("prim::RaiseException")
def _raise(ctx: ConvertContext, ins):
    msg = ins[0] if isinstance(ins[0], str) else "an exception"
    raise ctx.error(f"this path raises {msg!r}, and Cuvil compiles only paths that cannot raise. Either the example "
                    f"inputs take it, or the condition guarding it is only known at run time; if that condition "
                    f"compares sizes, make those dims static or give them the same dynamic_shapes symbol")


# ---- Python scalars, strings and lists (folded while compiling)


def _text(ctx: ConvertContext, v) -> str:
    """str(v) as TorchScript prints it; a run-time size prints as its symbolic dim (e.g. "batch")."""
    if ctx.is_value(v):
        if v.is_constant:
            return str(ctx.constant_data(v, "a printed value").tolist())
        sym = symbol_of(ctx, v)
        return str(sym) if sym is not None else "<run-time value>"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_text(ctx, e) for e in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, bool):
        return "True" if v else "False"
    return str(v)


@converter("aten::format")
def _format(ctx: ConvertContext, ins):
    # TorchScript's str.format fills each "{}" in turn.
    fmt, args = ins[0], ins[1:]
    out, pos = [], 0
    for a in args:
        loc = fmt.find("{}", pos)
        if loc < 0:
            break
        out += [fmt[pos:loc], _text(ctx, a)]
        pos = loc + 2
    return "".join(out) + fmt[pos:]


@converter("aten::str")
def _str(ctx: ConvertContext, ins):
    return _text(ctx, ins[0])


@converter("aten::find")
def _find(ctx: ConvertContext, ins):
    s, sub, start, end = ins
    return s.find(sub, start, end)


@converter("aten::__not__")
def _not(ctx: ConvertContext, ins):
    x = ins[0]
    if not ctx.is_value(x):
        return not x
    return ctx.emit("Not", [_cast(ctx, x, "bool")])


@converter("aten::len")
def _len(ctx: ConvertContext, ins):
    x = ins[0]
    if isinstance(x, (list, tuple, str)):
        return len(x)
    if ctx.rank_of(x) == 0:
        raise ctx.error("len() of a 0-d tensor")
    if ctx.is_value(x):
        return _dim(ctx, x, ctx.emit("Shape", [x]), 0)
    return int(x.shape[0])


@converter("aten::list")
def _list(ctx: ConvertContext, ins):
    if not isinstance(ins[0], (list, tuple, str)):
        raise ctx.error("list() of a tensor (unbinding it) is not supported; use torch.unbind")
    return note_list(ctx, list(ins[0]))


@converter("aten::append")
def _append(ctx: ConvertContext, ins):
    # e.g. DenseNet's `features.append(layer(features))` over an unrolled ModuleList.
    lst, x = ins
    if not isinstance(lst, list) or not list_made_here(ctx, lst):
        raise ctx.error("appending to a list made outside this if/loop (one whose condition or trip count is only "
                        "known at run time), or to a list not built from a literal, is not supported; build the "
                        "list in straight-line code or use torch.cat/torch.stack")
    lst.append(x)
    return lst


@converter("aten::insert", "aten::extend", "aten::_set_item", "aten::pop", "aten::clear")
def _list_mutation(ctx: ConvertContext, ins):
    raise ctx.error("mutating a list (insert/extend/item assignment/pop/clear) is not supported; build lists with "
                    "literals and append, or use torch.cat/torch.stack")


@converter("aten::__contains__")
def _contains(ctx: ConvertContext, ins):
    seq, x = ins
    if isinstance(seq, str):
        return x in seq
    if all(not ctx.is_value(e) for e in [*seq, x]):
        return x in seq
    found = [static_equal(ctx, e, x) for e in seq]
    if any(f is True for f in found):
        return True
    if all(f is False for f in found):
        return False
    eq = ctx.emit("Equal", [ctx.stack_scalars(seq), ctx.tensor(x, "i64")])
    return _reduce_bool(ctx, eq, None, False, any_=True)


def _reduce_bool(ctx: ConvertContext, x, axes, keepdim: bool, any_: bool):
    """any/all of x (nonzero elements) over axes (None: all): bool, or uint8 for a uint8 x (as torch)."""
    b = _cast(ctx, x, "bool")
    as_int = ctx.emit("Cast", [b], {"to": onnx_dtype_id("i32")})
    ax = None if axes is None else np.array(axes, np.int64)
    r = ctx.emit("ReduceMax" if any_ else "ReduceMin", [as_int, ax], {"keepdims": int(keepdim)})
    out = "u8" if ctx.dtype_of(x) == "u8" else "bool"
    return ctx.emit("Cast", [r], {"to": onnx_dtype_id(out)})


@converter("aten::any", "aten::all")
def _any_all(ctx: ConvertContext, ins):
    any_ = ctx.node.kind() == "aten::any"
    x = ins[0]
    if isinstance(x, (list, tuple)):
        known = [bool(e) for e in x if not ctx.is_value(e)]
        if any_ and any(known) or not any_ and not all(known):
            return any_  # a known True (any) or False (all) decides it
        runtime = [e for e in x if ctx.is_value(e)]
        if not runtime:
            return not any_
        return _reduce_bool(ctx, ctx.stack_scalars(runtime, "bool"), None, False, any_)
    if len(ins) == 1:
        return _reduce_bool(ctx, x, None, False, any_)
    dim = ctx.const(ins[1], "the dim")
    keep = bool(ctx.const(ins[2], "keepdim")) if len(ins) > 2 else False
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    r = ctx.rank_of(x)
    return _reduce_bool(ctx, x, [d % max(r, 1) for d in dims], keep, any_)


@converter("prim::min", "prim::max")
def _min_max(ctx: ConvertContext, ins):
    is_min = ctx.node.kind() == "prim::min"
    items = list(ins[0]) if len(ins) == 1 else list(ins)
    if not items:
        raise ctx.error("min()/max() of an empty list")
    if all(not ctx.is_value(e) for e in items):
        return min(items) if is_min else max(items)
    if all(static_equal(ctx, e, items[0]) is True for e in items[1:]):
        return items[0]  # e.g. min(a.size(0), b.size(0)) of two dims with the same symbol
    dt = result_dtype(ctx, *items)
    if len(ins) == 1:  # a list
        v = ctx.stack_scalars(items, dt)
        return ctx.emit("ReduceMin" if is_min else "ReduceMax", [v, None], {"keepdims": 0})
    return ctx.emit("Min" if is_min else "Max", [ctx.tensor(e, dt) for e in items])


# ---- matrix products


@converter("aten::bmm", "aten::mm")
def _mm(ctx: ConvertContext, ins):
    a, b = ins
    want = 3 if ctx.node.kind() == "aten::bmm" else 2
    if ctx.rank_of(a) != want or ctx.rank_of(b) != want:
        raise ctx.error(f"expects {want}-D tensors, got ranks {ctx.rank_of(a)} and {ctx.rank_of(b)}")
    return ctx.emit("MatMul", [a, b])


@converter("aten::baddbmm", "aten::addmm")
def _addmm(ctx: ConvertContext, ins):
    # beta * input + alpha * (m1 @ m2); beta == 0 ignores input entirely (NaNs in it included), as torch does.
    inp, m1, m2 = ins[0], ins[1], ins[2]
    beta = ctx.const(ins[3], "beta") if len(ins) > 3 else 1
    alpha = ctx.const(ins[4], "alpha") if len(ins) > 4 else 1
    want = 3 if ctx.node.kind() == "aten::baddbmm" else 2
    if ctx.rank_of(m1) != want or ctx.rank_of(m2) != want:
        raise ctx.error(f"expects {want}-D matrices, got ranks {ctx.rank_of(m1)} and {ctx.rank_of(m2)}")
    prod = ctx.emit("MatMul", [m1, m2])
    if alpha != 1:
        prod = binary(ctx, "Mul", prod, alpha)
    if beta == 0:
        return prod
    if beta != 1:
        inp = binary(ctx, "Mul", inp, beta)
    return ctx.emit("Add", [ctx.tensor(inp, prod.dtype), prod])


@converter("aten::einsum")
def _einsum(ctx: ConvertContext, ins):
    eq = ctx.const(ins[0], "the equation")
    xs = [ctx.tensor(x) for x in ins[1]]
    dts = {x.dtype for x in xs}
    if len(dts) != 1:
        raise ctx.error(f"einsum operands must share one dtype, got {', '.join(sorted(dts))}")
    return ctx.emit("Einsum", xs, {"equation": eq.replace(" ", "")})


# ---- softmax


@converter("aten::softmax", "aten::log_softmax", "aten::_softmax", "aten::_log_softmax")
def _softmax(ctx: ConvertContext, ins):
    kind = ctx.node.kind()
    x, dim = ins[0], ctx.const(ins[1], "the dim")
    log = "log_softmax" in kind
    if kind.startswith("aten::_"):
        half_to_float = bool(ctx.const(ins[2]))
        dt = "f32" if half_to_float else None
    else:
        dt = _dtype_arg(ctx, ins[2]) if len(ins) > 2 else None
    if dt is not None:
        x = _cast(ctx, x, dt)
    if not _is_float(ctx.dtype_of(x)):
        raise ctx.error(f"softmax of a {ctx.dtype_of(x)} tensor (torch supports floating types only)")
    r = ctx.rank_of(x)
    if not -max(r, 1) <= dim < max(r, 1):
        raise ctx.error(f"dim {dim} is out of range for a tensor of rank {r}")
    if r == 0:  # a scalar: softmax over a one-element vector, back to 0-d
        y = ctx.emit("LogSoftmax" if log else "Softmax", [ctx.emit("Reshape", [x, np.array([1], np.int64)])],
                     {"axis": 0})
        return ctx.emit("Reshape", [y, np.zeros((0,), np.int64)])
    return ctx.emit("LogSoftmax" if log else "Softmax", [x], {"axis": dim % r})


# ---- embedding and masks


@converter("aten::embedding")
def _embedding(ctx: ConvertContext, ins):
    weight, idx = ins[0], ins[1]
    # padding_idx, scale_grad_by_freq and sparse only change gradients.
    if ctx.dtype_of(idx) not in ("i64", "i32"):
        raise ctx.error(f"embedding indices must be int64 or int32, got {ctx.dtype_of(idx)}")
    return ctx.emit("Gather", [weight, idx], {"axis": 0})


def _bool_mask(ctx: ConvertContext, m):
    dt = ctx.dtype_of(m)
    if dt == "bool":
        return ctx.tensor(m)
    if dt == "u8":  # deprecated byte masks: nonzero is True
        return _cast(ctx, m, "bool")
    raise ctx.error(f"the mask must be a bool tensor, got {dt}")


@converter("aten::masked_fill", "aten::masked_fill_")
def _masked_fill(ctx: ConvertContext, ins):
    x, mask, value = ins
    if ctx.is_value(value) and ctx.rank_of(value) != 0:
        raise ctx.error("masked_fill only supports a 0-dimensional value tensor")
    dt = ctx.dtype_of(x)
    return ctx.emit("Where", [_bool_mask(ctx, mask), _cast(ctx, value, dt), ctx.tensor(x)])


@converter("aten::where")
def _where(ctx: ConvertContext, ins):
    if len(ins) == 1:  # torch.where(condition): the indices of the true elements, one tensor per dim
        cond = _bool_mask(ctx, ins[0])
        if ctx.rank_of(cond) == 0:
            cond = ctx.emit("Reshape", [cond, np.array([1], np.int64)])
        idx = ctx.emit("NonZero", [cond])  # [rank, count]
        return tuple(ctx.emit("Squeeze", [ctx.emit("Slice", [idx, np.array([d], np.int64), np.array([d + 1], np.int64),
                                                             np.array([0], np.int64)]), np.array([0], np.int64)])
                     for d in range(ctx.rank_of(cond)))
    cond, a, b = ins
    dt = result_dtype(ctx, a, b)
    return ctx.emit("Where", [_bool_mask(ctx, cond), _cast(ctx, a, dt), _cast(ctx, b, dt)])


@converter("aten::triu", "aten::tril", "aten::triu_", "aten::tril_")
def _trilu(ctx: ConvertContext, ins):
    x = ins[0]
    k = ins[1] if len(ins) > 1 else 0
    if ctx.rank_of(x) < 2:
        raise ctx.error(f"triu/tril need a tensor of rank >= 2, got rank {ctx.rank_of(x)}")
    upper = ctx.node.kind().startswith("aten::triu")
    return ctx.emit("Trilu", [x, ctx.tensor(k, "i64")], {"upper": int(upper)})


# ---- tensor factories


@converter("aten::arange")
def _arange(ctx: ConvertContext, ins):
    ov = _overload(ctx)
    if ov == "":
        start, end, step, dtype = 0, ins[0], 1, ins[1]
    elif ov == "start":
        start, end, step, dtype = ins[0], ins[1], 1, ins[2]
    elif ov == "start_step":
        start, end, step, dtype = ins[0], ins[1], ins[2], ins[3]
    else:
        raise ctx.error(f"aten::arange.{ov} is not supported")
    dt = _dtype_arg(ctx, dtype) or _default_dtype_of(ctx, start, end, step)
    if dt == "bool":
        raise ctx.error("arange with dtype bool is not supported")
    if all(not ctx.is_value(v) for v in (start, end, step)):
        if step == 0:
            raise ctx.error("arange step must be nonzero")
        # As torch: the length from the arguments in double; the elements start + i * step in double for float
        # dtypes, and from the arguments truncated to int64 for integer ones.
        n = max(int(np.ceil((float(end) - float(start)) / float(step))), 0)
        if _is_float(dt):
            vals = float(start) + np.arange(n, dtype=np.float64) * float(step)
        else:
            vals = int(start) + np.arange(n, dtype=np.int64) * int(step)
        return _cast(ctx, vals, dt)
    # Run-time bounds (e.g. a dynamic sequence length): Range in double for float dtypes, as torch computes.
    float_args = any(_is_float(ctx.dtype_of(v)) for v in (start, end, step))
    if float_args and not _is_float(dt):
        raise ctx.error(f"arange with run-time float bounds and dtype {dt} is not supported")
    work = "f64" if _is_float(dt) else "i64"
    r = ctx.emit("Range", [_scalar(ctx, v, work) for v in (start, end, step)])
    return r if r.dtype == dt else ctx.emit("Cast", [r], {"to": onnx_dtype_id(dt)})


def _scalar(ctx: ConvertContext, v, dt: str):
    t = ctx.tensor(v, dt)
    if t.shape != []:
        t = ctx.emit("Reshape", [t, np.zeros((0,), np.int64)])
    return t


_FILL = {"zeros": 0, "ones": 1, "empty": 0}  # empty tensors are zero-filled, so runs are deterministic


@converter("aten::zeros", "aten::ones", "aten::empty", "aten::full")
def _factory(ctx: ConvertContext, ins):
    name = ctx.node.kind().split("::")[1]
    if _overload(ctx) not in ("", "memory_format"):
        raise ctx.error(f"aten::{name}.{_overload(ctx)} is not supported")
    if name == "full":
        size, value, dtype = ins[0], ins[1], ins[2]
        dt = _dtype_arg(ctx, dtype) or _default_dtype_of(ctx, value)
    else:
        size, value, dtype = ins[0], _FILL[name], ins[1]
        dt = _dtype_arg(ctx, dtype) or "f32"
    return _filled(ctx, _shape_tensor(ctx, size), value, dt)


@converter("aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like")
def _factory_like(ctx: ConvertContext, ins):
    name = ctx.node.kind().split("::")[1][:-len("_like")]
    x = ins[0]
    if name == "full":
        value, dtype = ins[1], ins[2]
    else:
        value, dtype = _FILL[name], ins[1]
    dt = _dtype_arg(ctx, dtype) or ctx.dtype_of(x)
    return _filled(ctx, _shape_of(ctx, x), value, dt)


@converter("aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full")
def _factory_new(ctx: ConvertContext, ins):
    name = ctx.node.kind().split("::")[1][len("new_"):]
    x, size = ins[0], ins[1]
    if name == "full":
        value, dtype = ins[2], ins[3]
    else:
        value, dtype = _FILL[name], ins[2]
    dt = _dtype_arg(ctx, dtype) or ctx.dtype_of(x)
    return _filled(ctx, _shape_tensor(ctx, size), value, dt)


@converter("aten::scalar_tensor")
def _scalar_tensor(ctx: ConvertContext, ins):
    s, dtype = ins[0], ins[1]
    dt = _dtype_arg(ctx, dtype) or "f32"
    return _scalar(ctx, s, dt) if ctx.is_value(s) else _cast(ctx, np.asarray(s), dt)


# ---- dtype conversions


@converter("aten::to")
def _to(ctx: ConvertContext, ins):
    ov = _overload(ctx)
    x = ins[0]
    if ov in ("dtype", "prim_dtype"):
        dt = _dtype_arg(ctx, ins[1])
    elif ov in ("device", "prim_Device"):
        dt = _dtype_arg(ctx, ins[2])
    elif ov == "other":
        dt = ctx.dtype_of(ins[1])
    elif ov == "dtype_layout":
        dt = _dtype_arg(ctx, ins[1])
    elif ov == "prim_other":
        dt = None
    else:
        raise ctx.error(f"aten::to.{ov} is not supported")
    if dt is None or dt == ctx.dtype_of(x):
        return x  # moving between devices or copying: nothing to compute
    return _cast(ctx, x, dt)


@converter("aten::type_as")
def _type_as(ctx: ConvertContext, ins):
    x, other = ins
    dt = ctx.dtype_of(other)
    return x if ctx.dtype_of(x) == dt else _cast(ctx, x, dt)


# ---- logical and bitwise ops (bools)


@converter("aten::logical_not", "aten::logical_not_")
def _logical_not(ctx: ConvertContext, ins):
    return ctx.emit("Not", [_cast(ctx, ins[0], "bool")])


_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@converter(*(f"aten::{n}" for n in _LOGICAL), *(f"aten::{n}_" for n in _LOGICAL))
def _logical(ctx: ConvertContext, ins):
    op = _LOGICAL[ctx.node.kind().split("::")[1].rstrip("_")]
    return ctx.emit(op, [_cast(ctx, ins[0], "bool"), _cast(ctx, ins[1], "bool")])


_BITWISE = {"bitwise_and": "And", "__and__": "And", "__iand__": "And", "bitwise_or": "Or", "__or__": "Or",
            "__ior__": "Or", "bitwise_xor": "Xor", "__xor__": "Xor", "__ixor__": "Xor"}
_BITWISE_PY = {"And": lambda a, b: a & b, "Or": lambda a, b: a | b, "Xor": lambda a, b: a ^ b}


@converter(*(f"aten::{n}" for n in _BITWISE), "aten::bitwise_and_", "aten::bitwise_or_", "aten::bitwise_xor_")
def _bitwise(ctx: ConvertContext, ins):
    name = ctx.node.kind().split("::")[1]
    op = _BITWISE.get(name) or _BITWISE[name[:-1]]  # bitwise_and_ -> bitwise_and
    a, b = ins
    if not ctx.is_value(a) and not ctx.is_value(b) and not isinstance(a, torch.Tensor):
        return _BITWISE_PY[op](a, b)  # Python bools/ints
    dt = result_dtype(ctx, a, b)
    if dt != "bool":
        raise ctx.error(f"bitwise ops on {dt} tensors are not supported (only on bool tensors)")
    return ctx.emit(op, [_cast(ctx, a, "bool"), _cast(ctx, b, "bool")])


@converter("aten::bitwise_not", "aten::bitwise_not_", "aten::__invert__")
def _bitwise_not(ctx: ConvertContext, ins):
    x = ins[0]
    if not ctx.is_value(x) and not isinstance(x, torch.Tensor):
        return (not x) if isinstance(x, bool) else ~x
    if ctx.dtype_of(x) != "bool":
        raise ctx.error(f"bitwise_not on {ctx.dtype_of(x)} tensors is not supported (only on bool tensors)")
    return ctx.emit("Not", [x])


# ---- PyTorch's fused transformer kernels (what torch.jit.trace records under no_grad)


def _gelu_erf(ctx: ConvertContext, x):
    # 0.5 * x * (1 + erf(x / sqrt(2))), PyTorch's exact GELU
    return ctx.emit("Gelu", [x], {"approximate": "none"})


def _native_attention(ctx: ConvertContext, x_q, x_k, x_v, embed_dim: int, heads: int, qkv_w, qkv_b, proj_w, proj_b,
                      mask, mask_type, need_weights: bool, average: bool):
    """torch._native_multi_head_attention on batch-first [B, T, E] inputs: packed in-projection, q scaled by
    1/sqrt(head_dim), a bool mask (True = masked out) or a float mask (added; mask_type 1: key padding [B, S], 0: [T, S]; a fully masked
    row gives NaN, as PyTorch's CPU masked softmax does), then the out-projection."""
    if ctx.rank_of(x_q) != 3:
        raise ctx.error("the fused attention kernel takes batched [batch, seq, embed] inputs")
    head_dim = embed_dim // heads
    thirds = np.array([embed_dim] * 3, np.int64)
    w_q, w_k, w_v = emit_n(ctx, "Split", [qkv_w, thirds], {"axis": 0}, 3)
    b_q, b_k, b_v = emit_n(ctx, "Split", [qkv_b, thirds], {"axis": 0}, 3)

    def heads_first(x, w, b):  # [B, L, E] -> [B, H, L, d]
        y = ctx.emit("Reshape", [_linear(ctx, [x, w, b]), np.array([0, 0, heads, head_dim], np.int64)])
        return ctx.emit("Transpose", [y], {"perm": [0, 2, 1, 3]})

    q = heads_first(x_q, w_q, b_q)
    q = ctx.emit("Mul", [q, ctx.tensor(1.0 / float(np.sqrt(head_dim)), q.dtype)])
    k = heads_first(x_k, w_k, b_k)
    v = heads_first(x_v, w_v, b_v)
    scores = ctx.emit("MatMul", [q, ctx.emit("Transpose", [k], {"perm": [0, 1, 3, 2]})])
    if mask is not None:
        if ctx.dtype_of(mask) not in ("bool", scores.dtype):
            raise ctx.error(f"the fused attention kernel takes a bool mask or one of the inputs' dtype, got "
                            f"{ctx.dtype_of(mask)}")
        if mask_type == 1:
            m = ctx.emit("Unsqueeze", [mask, np.array([1, 2], np.int64)])  # [B, 1, 1, S]
        elif mask_type == 0 and ctx.rank_of(mask) == 2:
            m = mask  # [T, S]
        else:
            raise ctx.error(f"mask_type {mask_type} with a rank-{ctx.rank_of(mask)} mask is not supported")
        if ctx.dtype_of(mask) == "bool":  # True: masked out
            scores = ctx.emit("Where", [m, ctx.tensor(float("-inf"), scores.dtype), scores])
        else:  # a float mask is added (torch 2 passes float masks to the fast path)
            scores = ctx.emit("Add", [scores, m])
    probs = ctx.emit("Softmax", [scores], {"axis": 3})
    out = ctx.emit("Transpose", [ctx.emit("MatMul", [probs, v])], {"perm": [0, 2, 1, 3]})
    out = _linear(ctx, [ctx.emit("Reshape", [out, np.array([0, 0, embed_dim], np.int64)]), proj_w, proj_b])
    if not need_weights:
        return out, None
    if average:
        total = ctx.emit("ReduceSum", [probs, np.array([1], np.int64)], {"keepdims": 0})
        probs = ctx.emit("Div", [total, ctx.tensor(float(heads), total.dtype)])
    return out, probs


@converter("aten::_native_multi_head_attention")
def _native_mha(ctx: ConvertContext, ins):
    q, k, v = ins[0], ins[1], ins[2]
    embed_dim, heads = ctx.const(ins[3], "embed_dim"), ctx.const(ins[4], "num_heads")
    mask = ins[9] if len(ins) > 9 else None
    need_weights = bool(ctx.const(ins[10])) if len(ins) > 10 else True
    average = bool(ctx.const(ins[11])) if len(ins) > 11 else True
    mask_type = ctx.const(ins[12]) if len(ins) > 12 else None
    if mask is not None and mask_type is None:
        mask_type = 1 if ctx.rank_of(mask) == 2 and mask.shape[0] == q.shape[0] else 0
    return _native_attention(ctx, q, k, v, embed_dim, heads, ins[5], ins[6], ins[7], ins[8], mask, mask_type,
                             need_weights, average)


@converter("aten::_transformer_encoder_layer_fwd")
def _encoder_layer_fwd(ctx: ConvertContext, ins):
    (src, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps, n1_w, n1_b, n2_w, n2_b,
     w1, b1, w2, b2) = ins[:18]
    mask = ins[18] if len(ins) > 18 else None
    mask_type = ctx.const(ins[19]) if len(ins) > 19 else None
    embed_dim, heads = ctx.const(embed_dim, "embed_dim"), ctx.const(heads, "num_heads")
    norm_first, use_gelu, eps = bool(ctx.const(norm_first)), bool(ctx.const(use_gelu)), float(ctx.const(eps))
    if mask is not None and mask_type is None:
        mask_type = 1

    def norm(x, w, b):
        return ctx.emit("LayerNormalization", [x, w, b], {"axis": -1, "epsilon": eps})

    def attend(x):
        return _native_attention(ctx, x, x, x, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b, mask, mask_type,
                                 False, True)[0]

    def ffn(x):
        h = _linear(ctx, [x, w1, b1])
        h = _gelu_erf(ctx, h) if use_gelu else ctx.emit("Relu", [h])
        return _linear(ctx, [h, w2, b2])

    if norm_first:
        x = ctx.emit("Add", [src, attend(norm(src, n1_w, n1_b))])
        return ctx.emit("Add", [x, ffn(norm(x, n2_w, n2_b))])
    x = norm(ctx.emit("Add", [src, attend(src)]), n1_w, n1_b)
    return norm(ctx.emit("Add", [x, ffn(x)]), n2_w, n2_b)


@converter("aten::_nested_tensor_from_mask", "aten::to_padded_tensor", "aten::_nested_tensor_from_tensor_list")
def _nested(ctx: ConvertContext, ins):
    raise ctx.error("nested tensors (PyTorch's no_grad fast path for nn.TransformerEncoder with a "
                    "src_key_padding_mask) have data-dependent shapes and are not supported. This comes from a "
                    "torch.jit.trace taken under no_grad; make the model scriptable, or trace it with autograd "
                    "enabled, so that the general path is recorded")
