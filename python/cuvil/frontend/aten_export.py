"""Converters for the ATen ops that torch.export's graphs hold and TorchScript's do not: sizes as SymInt ops,
the functional forms export leaves behind (_to_copy, _native_batch_norm_legit_no_training, lift_fresh_copy),
and tensor indexing (aten::index.Tensor: x[idx], x[mask])."""
from __future__ import annotations

import math

import numpy as np
import torch

from .aten_transformer import _cast, _dtype_arg
from .context import CONVERTERS, ConvertContext, converter


@converter("aten::sym_size", "aten::sym_numel", "aten::sym_storage_offset")
def _sym_size(ctx: ConvertContext, ins):
    kind = ctx.node.kind()
    if kind == "aten::sym_size":
        return CONVERTERS["aten::size"](ctx, ins)
    if kind == "aten::sym_numel":
        return CONVERTERS["aten::numel"](ctx, ins)
    return 0


@converter("aten::_native_batch_norm_legit_no_training")
def _batch_norm_no_training(ctx: ConvertContext, ins):
    x, w, b, mean, var, momentum, eps = ins
    y = CONVERTERS["aten::batch_norm"](ctx, [x, w, b, mean, var, False, momentum, eps, False])
    return y, None, None  # the saved statistics of training are never read in inference


@converter("aten::_to_copy")
def _to_copy(ctx: ConvertContext, ins):
    x, dt = ins[0], _dtype_arg(ctx, ins[1])
    return x if dt is None or dt == ctx.dtype_of(x) else _cast(ctx, x, dt)


@converter("aten::lift_fresh_copy", "aten::lift_fresh")
def _lift(ctx: ConvertContext, ins):
    return ins[0]


@converter("aten::_local_scalar_dense")
def _item(ctx: ConvertContext, ins):
    return ins[0]


@converter("aten::index")
def _index(ctx: ConvertContext, ins):
    """x[i0, i1, ...] with index tensors (None: the whole dim). One integer index is a Gather along its dim;
    several adjacent ones from dim 0 a GatherND of their broadcast stack; a boolean mask over leading dims the
    positions of its true elements (NonZero), gathered."""
    x, indices = ins
    idx = [(d, i) for d, i in enumerate(indices) if i is not None]
    if not idx:
        return x
    if len(idx) == 1:
        d, i = idx[0]
        if ctx.dtype_of(i) in ("bool", "u8"):
            return _mask_index(ctx, x, d, i)
        return ctx.emit("Gather", [x, ctx.tensor(i, "i64")], {"axis": d})
    dims = [d for d, _ in idx]
    if dims != list(range(len(dims))):
        raise ctx.error("indexing with several index tensors is supported only on leading dims (x[i, j, ...])")
    if any(ctx.dtype_of(i) in ("bool", "u8") for _, i in idx):
        raise ctx.error("boolean masks combined with other indices are not supported")
    parts = [ctx.emit("Unsqueeze", [ctx.tensor(i, "i64"), np.array([-1], np.int64)]) for _, i in idx]
    if len(parts) > 1:
        parts = _broadcast_all(ctx, parts)
    stacked = ctx.emit("Concat", parts, {"axis": -1})
    return ctx.emit("GatherND", [x, stacked])


def _broadcast_all(ctx: ConvertContext, parts: list) -> list:
    """Expands index tensors to their common shape (ONNX Concat does not broadcast)."""
    ones = np.array(1, np.int64)
    for p in parts:  # Expand broadcasts: a ones tensor expanded by every part's shape has the common one
        ones = ctx.emit("Expand", [ones, ctx.emit("Shape", [p])])
    shape = ctx.emit("Shape", [ones])
    return [ctx.emit("Expand", [p, shape]) for p in parts]


def _mask_index(ctx: ConvertContext, x, d: int, mask):
    """x[..., mask] for a boolean mask covering dims d .. d + mask rank: the true positions gathered."""
    if d != 0:
        raise ctx.error("a boolean mask index is supported on leading dims only (x[mask])")
    m = ctx.tensor(mask, "bool") if ctx.dtype_of(mask) != "bool" else mask
    pos = ctx.emit("Transpose", [ctx.emit("NonZero", [m])], {"perm": [1, 0]})
    return ctx.emit("GatherND", [x, pos])


@converter("aten::gather")
def _gather(ctx: ConvertContext, ins):
    x, dim, index = ins[:3]
    return ctx.emit("GatherElements", [x, ctx.tensor(index, "i64")], {"axis": ctx.const(dim, "the dim")})


@converter("aten::index_select")
def _index_select(ctx: ConvertContext, ins):
    x, dim, index = ins
    return ctx.emit("Gather", [x, ctx.tensor(index, "i64")], {"axis": ctx.const(dim, "the dim")})


@converter("aten::native_dropout")
def _native_dropout(ctx: ConvertContext, ins):
    x, p, train = ins
    return CONVERTERS["aten::dropout"](ctx, [x, p, train]), None  # (the mask is read only by training)


@converter("aten::cumsum")
def _cumsum(ctx: ConvertContext, ins):
    x, dim, dtype = ins[:3]
    dt = _dtype_arg(ctx, dtype)
    if dt is None and ctx.dtype_of(x) in ("bool", "u8", "i8", "i16", "i32"):
        dt = "i64"  # torch sums integers and bools in int64
    if dt is not None and dt != ctx.dtype_of(x):
        x = _cast(ctx, x, dt)
    return ctx.emit("CumSum", [x, np.array(ctx.const(dim, "the dim"), np.int64)])


@converter("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu")
def _sdpa(ctx: ConvertContext, ins):
    """softmax(q kᵀ · scale + mask) v, written as the ops fuse-attention recognizes (static shapes become one
    Attention node). The flash form's second output (the log-sum-exp) is read only by training."""
    flash = ctx.node.kind() == "aten::_scaled_dot_product_flash_attention_for_cpu"
    if flash:
        q, k, v, dropout, causal, mask, scale = ins[:7]
    else:
        q, k, v, mask, dropout, causal, scale = ins[:7]
        if len(ins) > 7 and bool(ctx.const(ins[7], "enable_gqa")):
            raise ctx.error("grouped-query attention (enable_gqa=True) is not supported")
    if float(ctx.const(dropout, "dropout_p")) != 0.0:
        raise ctx.error("attention dropout is random; only dropout_p=0 (evaluation) is supported")
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    r, dt = ctx.rank_of(q), ctx.dtype_of(q)
    if scale is None:
        e = q.shape[-1]
        if not isinstance(e, int):
            raise ctx.error("attention over a head size that is not static needs an explicit scale")
        scale = 1.0 / math.sqrt(e)
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = ctx.emit("MatMul", [q, ctx.emit("Transpose", [k], {"perm": perm})])
    scores = ctx.emit("Mul", [scores, ctx.tensor(float(ctx.const(scale, "scale")), dt)])
    neg_inf = ctx.tensor(float("-inf"), dt)
    if bool(ctx.const(causal, "is_causal")):
        size = ctx.emit("Slice", [ctx.emit("Shape", [scores]), np.array([-2], np.int64),
                                  np.array([np.iinfo(np.int64).max], np.int64)])
        ones = ctx.emit("Expand", [ctx.tensor(1.0, "f32"), size])
        keep = ctx.emit("Cast", [ctx.emit("Trilu", [ones], {"upper": 0})], {"to": 9})
        scores = ctx.emit("Where", [keep, scores, neg_inf])
    if mask is not None:
        if ctx.dtype_of(mask) == "bool":
            scores = ctx.emit("Where", [mask, scores, neg_inf])
        else:
            scores = ctx.emit("Add", [scores, ctx.tensor(mask, dt)])
    out = ctx.emit("MatMul", [ctx.emit("Softmax", [scores], {"axis": -1}), v])
    return (out, None) if flash else out


@converter("prim::GetAttr")
def _get_attr(ctx: ConvertContext, ins):
    """An attribute read freezing left in place (torch 2 keeps submodule reads that feed fast-path checks):
    the frozen module's attribute, a compile-time value."""
    obj = ins[0]
    name = ctx.node.s("name")
    if obj is None or not hasattr(obj, name):
        raise ctx.error(f"cannot read attribute '{name}' while compiling")
    val = getattr(obj, name)
    state = ctx.state
    if state is not None:  # a state_dict entry kept an attribute: its named constant (frontend/state.py)
        base = state.paths.get(id(obj))
        path = None if base is None else f"{base}.{name}" if base else name
        if isinstance(val, torch.Tensor):
            if path in state.keys:
                return state.value(path, val)
            if path is None:
                state.baked.setdefault(f"<{name}>", "an attribute read of an untraced module")
        elif path is not None and isinstance(val, (torch.nn.Module, torch._C.ScriptObject)):  # (kept alive in env)
            state.paths[id(val)] = path
    return val


@converter("prim::type")
def _device_type(ctx: ConvertContext, ins):
    dev = ctx.const(ins[0], "the device")
    return dev.type if hasattr(dev, "type") else str(dev).split(":")[0]
