"""Converters for element-wise math and statistics that models use beyond the basic arithmetic of aten_core.py:
remainder/fmod/floor_divide, round, atan2, hypot, addcmul/addcdiv, lerp, and the reductions prod, logsumexp,
var/std (and their _mean forms), the vector norms, count_nonzero, plus outer, cross, diff, cdist and
cosine_similarity. Each writes out torch's formula in Cuvil ops, so that the reference and fast kernels agree
with eager PyTorch on the same edge cases (signs of remainders, ties of round, the quadrants of atan2)."""
from __future__ import annotations

import math

import numpy as np
import torch

from .context import (CATEGORY, NUMPY_DTYPES, SCALAR_TYPE_TO_TORCH, TORCH_TO_CUVIL, ConvertContext, converter,
                      onnx_dtype_id)
from .aten_core import binary, result_dtype
from .aten_nn import _reduce_axes
from .aten_shape import axes, dims_of, norm_dim, product, static_dim


def _float_dtype(ctx: ConvertContext, *xs) -> str:
    """torch's result dtype, promoted to the default float for integer inputs (as true division does)."""
    dt = result_dtype(ctx, *xs)
    return dt if CATEGORY[dt] == 2 else "f32"


def _c(value, dtype: str) -> np.ndarray:
    """A constant of the given Cuvil dtype (bf16 has no NumPy type: f32, which the ops' promotion accepts)."""
    return np.array(value, NUMPY_DTYPES.get(dtype, np.float32))


# ---- division and rounding


def _python_mod(ctx: ConvertContext, a, b):
    """a - floor(a / b) * b, torch.remainder's (and Python's %) result: the sign of the divisor."""
    dt = result_dtype(ctx, a, b)
    a, b = ctx.tensor(a, dt), ctx.tensor(b, dt)
    if CATEGORY[dt] < 2:
        return ctx.emit("Mod", [a, b], {"fmod": 0})  # ONNX's integer Mod already takes the divisor's sign
    r = ctx.emit("Mod", [a, b], {"fmod": 1})  # C fmod: the dividend's sign
    zero = _c(0, dt)
    wrong_sign = ctx.emit("And", [ctx.emit("Not", [ctx.emit("Equal", [r, zero])]),
                                 ctx.emit("Xor", [ctx.emit("Less", [r, zero]), ctx.emit("Less", [b, zero])])])
    return ctx.emit("Where", [wrong_sign, ctx.emit("Add", [r, b]), r])


@converter("aten::remainder", "aten::remainder_")
def _remainder(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    if not ctx.is_value(a) and not ctx.is_value(b):
        return a % b
    return _python_mod(ctx, a, b)


@converter("aten::fmod", "aten::fmod_")
def _fmod(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    dt = result_dtype(ctx, a, b)
    return ctx.emit("Mod", [ctx.tensor(a, dt), ctx.tensor(b, dt)], {"fmod": 1})


@converter("aten::floor_divide", "aten::floor_divide_")
def _floor_divide(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    if not ctx.is_value(a) and not ctx.is_value(b):
        return a // b
    dt = result_dtype(ctx, a, b)
    if CATEGORY[dt] == 2:
        return ctx.emit("Floor", [binary(ctx, "Div", a, b)])
    # Integers: (a - a mod b) is a multiple of b, so the truncating Div is exact and floors.
    a, b = ctx.tensor(a, dt), ctx.tensor(b, dt)
    return ctx.emit("Div", [ctx.emit("Sub", [a, _python_mod(ctx, a, b)]), b])


@converter("aten::round", "aten::round_")
def _round(ctx: ConvertContext, ins):
    x = ins[0]
    decimals = ctx.const(ins[1], "decimals") if len(ins) > 1 and ins[1] is not None else 0
    if not ctx.is_value(x):
        return round(x) if decimals == 0 else round(x, decimals)
    if CATEGORY[ctx.dtype_of(x)] < 2:
        return x
    if decimals == 0:
        return ctx.emit("Round", [x])  # half to even, as torch
    # torch: round(x * 10^d) / 10^d (with the inverse for negative d)
    dt = ctx.dtype_of(x)
    scale = _c(10.0 ** abs(decimals), dt)
    if decimals > 0:
        return ctx.emit("Div", [ctx.emit("Round", [ctx.emit("Mul", [x, scale])]), scale])
    return ctx.emit("Mul", [ctx.emit("Round", [ctx.emit("Div", [x, scale])]), scale])


# ---- two-argument math


@converter("aten::atan2", "aten::atan2_", "aten::arctan2")
def _atan2(ctx: ConvertContext, ins):
    y, x = ins[0], ins[1]
    if not ctx.is_value(y) and not ctx.is_value(x):
        return math.atan2(y, x)
    dt = _float_dtype(ctx, y, x)
    y, x = ctx.tensor(y, dt), ctx.tensor(x, dt)
    zero = _c(0, dt)
    base = ctx.emit("Atan", [ctx.emit("Div", [y, x])])
    # x < 0: add +-pi by the sign of y (y = +-0 gives +pi, as atan2(0, -1)); x == 0: +-pi/2 or 0.
    pi = ctx.emit("Where", [ctx.emit("Less", [y, zero]), _c(-math.pi, dt), _c(math.pi, dt)])
    left = ctx.emit("Add", [base, pi])
    axis = ctx.emit("Where", [ctx.emit("Greater", [y, zero]), _c(math.pi / 2, dt),
                              ctx.emit("Where", [ctx.emit("Less", [y, zero]), _c(-math.pi / 2, dt), zero])])
    on_axis = ctx.emit("Where", [ctx.emit("Equal", [x, zero]), axis, base])
    return ctx.emit("Where", [ctx.emit("Less", [x, zero]), left, on_axis])


@converter("aten::hypot", "aten::hypot_")
def _hypot(ctx: ConvertContext, ins):
    dt = _float_dtype(ctx, ins[0], ins[1])
    a, b = ctx.tensor(ins[0], dt), ctx.tensor(ins[1], dt)
    return ctx.emit("Sqrt", [ctx.emit("Add", [ctx.emit("Mul", [a, a]), ctx.emit("Mul", [b, b])])])


@converter("aten::addcmul", "aten::addcmul_", "aten::addcdiv", "aten::addcdiv_")
def _addc(ctx: ConvertContext, ins):
    x, t1, t2 = ins[0], ins[1], ins[2]
    value = ins[3] if len(ins) > 3 else 1
    op = "Mul" if ctx.node.kind().startswith("aten::addcmul") else "Div"
    prod = binary(ctx, op, t1, t2)
    if not (not ctx.is_value(value) and value == 1):
        prod = binary(ctx, "Mul", prod, value)
    return binary(ctx, "Add", x, prod)


@converter("aten::lerp", "aten::lerp_")
def _lerp(ctx: ConvertContext, ins):
    """torch's two-sided formula: start + w * (end - start) for |w| < 0.5, else end - (end - start) * (1 - w),
    so that lerp(a, b, 1) is exactly b."""
    start, end, w = ins[0], ins[1], ins[2]
    dt = result_dtype(ctx, start, end)
    start, end = ctx.tensor(start, dt), ctx.tensor(end, dt)
    w = ctx.tensor(w, dt)
    diff = ctx.emit("Sub", [end, start])
    low = ctx.emit("Add", [start, ctx.emit("Mul", [w, diff])])
    high = ctx.emit("Sub", [end, ctx.emit("Mul", [diff, ctx.emit("Sub", [_c(1, dt), w])])])
    small = ctx.emit("Less", [ctx.emit("Abs", [w]), _c(0.5, dt)])
    return ctx.emit("Where", [small, low, high])


# ---- reductions


def _reduce(ctx: ConvertContext, op: str, x, dims, keep: bool, attrs=None):
    ax = _reduce_axes(ctx, dims, ctx.rank_of(x)) if dims is not None else None
    if ctx.rank_of(x) == 0:
        return x
    return ctx.emit(op, [x, None if ax is None else axes(ax)], {"keepdims": int(keep), **(attrs or {})})


@converter("aten::prod")
def _prod(ctx: ConvertContext, ins):
    x = ins[0]
    if len(ins) <= 2:  # prod(x, *, dtype)
        dim, keep, dtype = None, False, ins[1] if len(ins) > 1 else None
    else:
        dim, keep, dtype = ins[1], bool(ctx.const(ins[2], "keepdim")), ins[3] if len(ins) > 3 else None
    dtype = ctx.const(dtype, "dtype")
    if dtype is not None:
        x = ctx.tensor(x, TORCH_TO_CUVIL[SCALAR_TYPE_TO_TORCH[dtype]])
    elif CATEGORY[ctx.dtype_of(x)] < 2 and ctx.dtype_of(x) != "i64":
        x = ctx.tensor(x, "i64")  # torch multiplies bools and small ints in int64
    return _reduce(ctx, "ReduceProd", x, None if dim is None else [ctx.const(dim, "dim")], keep)


@converter("aten::logsumexp")
def _logsumexp(ctx: ConvertContext, ins):
    x, dims, keep = ins[0], ins[1], bool(ctx.const(ins[2], "keepdim")) if len(ins) > 2 else False
    if CATEGORY[ctx.dtype_of(x)] < 2:
        x = ctx.tensor(x, "f32")
    if ctx.rank_of(x) == 0:
        return x
    # ReduceLogSumExp subtracts the maximum first (no overflow); an empty dim list reduces every dim in torch.
    return _reduce(ctx, "ReduceLogSumExp", x, dims if ctx.const(dims, "dim") != [] else None, keep)


def _count(ctx: ConvertContext, x, ax):
    """How many elements each reduction over `ax` (None: all) takes: an int, or a 0-d i64 Value."""
    dims = dims_of(ctx, x)
    return product(ctx, dims if ax is None else [dims[a] for a in ax])


def _var_mean(ctx: ConvertContext, x, dims, correction, keep: bool):
    """(variance with `correction` subtracted from the count, mean), torch's two-pass formula."""
    if CATEGORY[ctx.dtype_of(x)] < 2:
        raise ctx.error("var/std need a floating-point input (torch refuses integer ones too)")
    dt = ctx.dtype_of(x)
    ax = _reduce_axes(ctx, dims, ctx.rank_of(x))
    ax_in = None if ax is None else axes(ax)
    mean = ctx.emit("ReduceMean", [x, ax_in], {"keepdims": 1})
    centered = ctx.emit("Sub", [x, mean])
    ss = ctx.emit("ReduceSumSquare", [centered, ax_in], {"keepdims": int(keep)})
    n = _count(ctx, x, ax)
    if isinstance(n, int):
        denom = _c(max(n - correction, 0), dt)
    else:
        denom = ctx.emit("Cast", [ctx.emit("Max", [ctx.emit("Sub", [n, np.array(correction, np.int64)]),
                                                   np.array(0, np.int64)])], {"to": onnx_dtype_id(dt)})
    var = ctx.emit("Div", [ss, denom])  # 0 / 0 is NaN, as torch's
    if not keep:
        mean = ctx.emit("ReduceMean", [x, ax_in], {"keepdims": 0}) if ax is not None or ctx.rank_of(x) else mean
    return var, mean


def _args(ctx: ConvertContext, ins) -> dict:
    """The node's inputs by argument name, from its schema: tells overloads apart (var(x, unbiased) from
    var(x, dim, *, correction, keepdim)) on both capture paths."""
    names = [a.name for a in torch._C.parse_schema(ctx.node.schema()).arguments]
    return dict(zip(names, ins))


def _var_args(ctx: ConvertContext, ins):
    """(x, dims, correction, keepdim) from var/std's overloads."""
    args = _args(ctx, ins)
    x, dims = args["self"], args.get("dim")
    keep = bool(ctx.const(args.get("keepdim", False), "keepdim"))
    if "correction" in args:
        c = ctx.const(args["correction"], "correction")
        correction = 1 if c is None else c
    else:
        correction = 1 if ctx.const(args.get("unbiased", True), "unbiased") else 0
    if dims is not None and ctx.const(dims, "dim") == []:
        dims = None
    return x, dims, correction, keep


@converter("aten::var", "aten::std", "aten::var_mean", "aten::std_mean")
def _var(ctx: ConvertContext, ins):
    x, dims, correction, keep = _var_args(ctx, ins)
    kind = ctx.node.kind()
    var, mean = _var_mean(ctx, x, dims, correction, keep)
    out = ctx.emit("Sqrt", [var]) if kind.startswith("aten::std") else var
    return (out, mean) if kind.endswith("_mean") else out


# ---- norms


def _vector_norm(ctx: ConvertContext, x, p, dims, keep: bool):
    """The p-norm over `dims` (None: all): 2 and 1 as ReduceL2/L1, +-inf as the max/min of |x|, 0 as the
    count of non-zeros, any other p as (sum |x|^p)^(1/p)."""
    if CATEGORY[ctx.dtype_of(x)] < 2:
        raise ctx.error("norms need a floating-point input (torch refuses integer ones too)")
    p = float(ctx.const(p, "p")) if p is not None else 2.0
    if ctx.rank_of(x) == 0:
        x = ctx.emit("Reshape", [x, np.array([1], np.int64)])
        dims = None
    if p == 2.0:
        return _reduce(ctx, "ReduceL2", x, dims, keep)
    if p == 1.0:
        return _reduce(ctx, "ReduceL1", x, dims, keep)
    a = ctx.emit("Abs", [x])
    if p == math.inf:
        return _reduce(ctx, "ReduceMax", a, dims, keep)
    if p == -math.inf:
        return _reduce(ctx, "ReduceMin", a, dims, keep)
    dt = ctx.dtype_of(x)
    if p == 0.0:
        nz = ctx.emit("Cast", [ctx.emit("Not", [ctx.emit("Equal", [x, _c(0, dt)])])], {"to": onnx_dtype_id(dt)})
        return _reduce(ctx, "ReduceSum", nz, dims, keep)
    s = _reduce(ctx, "ReduceSum", ctx.emit("Pow", [a, _c(p, dt)]), dims, keep)
    return ctx.emit("Pow", [s, _c(1.0 / p, dt)])


def _dims_or_none(ctx: ConvertContext, dims):
    if dims is None:
        return None
    d = ctx.const(dims, "dim")
    return None if d == [] else ([d] if isinstance(d, int) else d)


@converter("aten::norm")
def _norm(ctx: ConvertContext, ins):
    args = _args(ctx, ins)
    x = args["self"]
    dtype = ctx.const(args.get("dtype"), "dtype") if args.get("dtype") is not None else None
    if dtype is not None:
        x = ctx.tensor(x, TORCH_TO_CUVIL[SCALAR_TYPE_TO_TORCH[dtype]])
    return _vector_norm(ctx, x, args.get("p", 2), _dims_or_none(ctx, args.get("dim")),
                        bool(ctx.const(args.get("keepdim", False), "keepdim")))


@converter("aten::linalg_vector_norm")
def _linalg_vector_norm(ctx: ConvertContext, ins):
    x, p, dims, keep = ins[0], ins[1], ins[2], bool(ctx.const(ins[3], "keepdim"))
    dtype = ctx.const(ins[4], "dtype") if len(ins) > 4 and ins[4] is not None else None
    if dtype is not None:
        x = ctx.tensor(x, TORCH_TO_CUVIL[SCALAR_TYPE_TO_TORCH[dtype]])
    return _vector_norm(ctx, x, p, _dims_or_none(ctx, dims), keep)


@converter("aten::frobenius_norm")
def _frobenius_norm(ctx: ConvertContext, ins):
    x = ins[0]
    dims = _dims_or_none(ctx, ins[1]) if len(ins) > 1 else None
    keep = bool(ctx.const(ins[2], "keepdim")) if len(ins) > 2 else False
    return _vector_norm(ctx, x, 2.0, dims, keep)


@converter("aten::count_nonzero")
def _count_nonzero(ctx: ConvertContext, ins):
    x, dims = ins[0], _dims_or_none(ctx, ins[1]) if len(ins) > 1 else None
    nz = x if ctx.dtype_of(x) == "bool" else ctx.emit("Not", [binary(ctx, "Equal", x, 0)])
    if ctx.rank_of(x) == 0:
        return ctx.emit("Cast", [nz], {"to": 7})
    return _reduce(ctx, "ReduceSum", ctx.emit("Cast", [nz], {"to": 7}), dims, False)


# ---- products and differences


@converter("aten::outer", "aten::ger")
def _outer(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    col = ctx.emit("Unsqueeze", [ctx.tensor(a), axes([1])])
    return binary(ctx, "Mul", col, b)


@converter("aten::linalg_cross", "aten::cross")
def _cross(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    r = max(ctx.rank_of(a), ctx.rank_of(b))
    dim = ins[2] if len(ins) > 2 and ins[2] is not None else -1
    d = norm_dim(ctx, dim, r)
    if static_dim(ctx, a, d - (r - ctx.rank_of(a)), "cross") != 3:
        raise ctx.error("cross needs a dim of size 3")
    dt = result_dtype(ctx, a, b)
    a, b = ctx.tensor(a, dt), ctx.tensor(b, dt)

    def pick(t, order):
        return ctx.emit("Gather", [t, np.array(order, np.int64)], {"axis": d - (r - ctx.rank_of(t))})

    return ctx.emit("Sub", [ctx.emit("Mul", [pick(a, [1, 2, 0]), pick(b, [2, 0, 1])]),
                           ctx.emit("Mul", [pick(a, [2, 0, 1]), pick(b, [1, 2, 0])])])


@converter("aten::diff")
def _diff(ctx: ConvertContext, ins):
    x, n, dim, prepend, append = (list(ins) + [1, -1, None, None][len(ins) - 1:])[:5]
    n = ctx.const(n, "n")
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        parts = [ctx.tensor(p, ctx.dtype_of(x)) for p in parts]
        x = ctx.emit("Concat", parts, {"axis": d})
    big = np.iinfo(np.int64).max
    for _ in range(n):
        hi = ctx.emit("Slice", [x, axes([1]), axes([big]), axes([d])])
        lo = ctx.emit("Slice", [x, axes([0]), axes([-1]), axes([d])])
        x = ctx.emit("Xor", [hi, lo]) if ctx.dtype_of(x) == "bool" else ctx.emit("Sub", [hi, lo])
    return x


def _pairwise_reduce(ctx: ConvertContext, diff, p: float):
    """The p-norm along the last dim of a difference tensor."""
    dt = ctx.dtype_of(diff)
    last = axes([-1])
    if p == 2.0:
        return ctx.emit("Sqrt", [ctx.emit("ReduceSumSquare", [diff, last], {"keepdims": 0})])
    a = ctx.emit("Abs", [diff])
    if p == 1.0:
        return ctx.emit("ReduceSum", [a, last], {"keepdims": 0})
    if p == math.inf:
        return ctx.emit("ReduceMax", [a, last], {"keepdims": 0})
    if p == 0.0:
        nz = ctx.emit("Cast", [ctx.emit("Not", [ctx.emit("Equal", [a, _c(0, dt)])])], {"to": onnx_dtype_id(dt)})
        return ctx.emit("ReduceSum", [nz, last], {"keepdims": 0})
    s = ctx.emit("ReduceSum", [ctx.emit("Pow", [a, _c(p, dt)]), last], {"keepdims": 0})
    return ctx.emit("Pow", [s, _c(1.0 / p, dt)])


@converter("aten::cdist", "aten::_cdist_forward")
def _cdist(ctx: ConvertContext, ins):
    """||x1[..., i, :] - x2[..., j, :]||_p for every pair, by broadcasting the difference (exact: torch's
    matrix-product shortcut for large inputs rounds differently, within float tolerance)."""
    x1, x2, p = ins[0], ins[1], float(ctx.const(ins[2], "p"))
    if p < 0:
        raise ctx.error("cdist needs p >= 0")
    dt = result_dtype(ctx, x1, x2)
    if CATEGORY[dt] < 2:
        raise ctx.error("cdist needs floating-point inputs")
    a = ctx.emit("Unsqueeze", [ctx.tensor(x1, dt), axes([-2])])   # [..., P, 1, M]
    b = ctx.emit("Unsqueeze", [ctx.tensor(x2, dt), axes([-3])])   # [..., 1, R, M]
    return _pairwise_reduce(ctx, ctx.emit("Sub", [a, b]), p)


@converter("aten::cosine_similarity")
def _cosine_similarity(ctx: ConvertContext, ins):
    """torch's formula: sum(x1 * x2) / sqrt(clamp_min(sum(x1^2) * sum(x2^2), eps^2)), over `dim`."""
    x1, x2, dim, eps = (list(ins) + [1, 1e-8][len(ins) - 2:])[:4]
    dt = _float_dtype(ctx, x1, x2)
    x1, x2 = ctx.tensor(x1, dt), ctx.tensor(x2, dt)
    r = max(ctx.rank_of(x1), ctx.rank_of(x2))
    ax = axes([norm_dim(ctx, dim, r)])
    w12 = ctx.emit("ReduceSum", [ctx.emit("Mul", [x1, x2]), ax], {"keepdims": 0})
    w1 = ctx.emit("ReduceSumSquare", [x1, ax], {"keepdims": 0})
    w2 = ctx.emit("ReduceSumSquare", [x2, ax], {"keepdims": 0})
    eps = float(ctx.const(eps, "eps"))
    n12 = ctx.emit("Sqrt", [ctx.emit("Max", [ctx.emit("Mul", [w1, w2]), _c(eps * eps, dt)])])
    return ctx.emit("Div", [w12, n12])



# ---- classification of values and accurate exp/log near 0


def _float_in(ctx: ConvertContext, x):
    x = ctx.tensor(x)
    return x if CATEGORY[ctx.dtype_of(x)] == 2 else ctx.tensor(x, "f32")


@converter("aten::isnan")
def _isnan(ctx: ConvertContext, ins):
    x = ctx.tensor(ins[0])
    if CATEGORY[ctx.dtype_of(x)] < 2:
        return binary(ctx, "Less", x, x)  # integers are never NaN: all false
    return ctx.emit("IsNaN", [x])


@converter("aten::isinf", "aten::isposinf", "aten::isneginf")
def _isinf(ctx: ConvertContext, ins):
    x = ctx.tensor(ins[0])
    if CATEGORY[ctx.dtype_of(x)] < 2:
        return binary(ctx, "Less", x, x)
    kind = ctx.node.kind()
    return ctx.emit("IsInf", [x], {"detect_positive": int(kind != "aten::isneginf"),
                                   "detect_negative": int(kind != "aten::isposinf")})


@converter("aten::isfinite")
def _isfinite(ctx: ConvertContext, ins):
    x = ctx.tensor(ins[0])
    if CATEGORY[ctx.dtype_of(x)] < 2:
        return ctx.emit("Not", [binary(ctx, "Less", x, x)])
    return ctx.emit("Not", [ctx.emit("Or", [ctx.emit("IsNaN", [x]), ctx.emit("IsInf", [x])])])


@converter("aten::signbit")
def _signbit(ctx: ConvertContext, ins):
    """x < 0, and -0.0 (whose reciprocal is -inf)."""
    x = ctx.tensor(ins[0])
    if CATEGORY[ctx.dtype_of(x)] < 2:
        return binary(ctx, "Less", x, 0)
    zero = _c(0, ctx.dtype_of(x))
    neg_zero = ctx.emit("And", [ctx.emit("Equal", [x, zero]), ctx.emit("Less", [ctx.emit("Reciprocal", [x]), zero])])
    return ctx.emit("Or", [ctx.emit("Less", [x, zero]), neg_zero])


def _trunc(ctx: ConvertContext, x):
    return ctx.emit("Mul", [ctx.emit("Sign", [x]), ctx.emit("Floor", [ctx.emit("Abs", [x])])])


@converter("aten::trunc", "aten::trunc_", "aten::fix", "aten::fix_")
def _trunc_conv(ctx: ConvertContext, ins):
    x = ctx.tensor(ins[0])
    return x if CATEGORY[ctx.dtype_of(x)] < 2 else _trunc(ctx, x)


@converter("aten::frac", "aten::frac_")
def _frac(ctx: ConvertContext, ins):
    x = ctx.tensor(ins[0])
    return ctx.emit("Sub", [x, _trunc(ctx, x)])


@converter("aten::rsqrt", "aten::rsqrt_")
def _rsqrt(ctx: ConvertContext, ins):
    return ctx.emit("Reciprocal", [ctx.emit("Sqrt", [_float_in(ctx, ins[0])])])


@converter("aten::log2", "aten::log2_", "aten::log10", "aten::log10_")
def _log_base(ctx: ConvertContext, ins):
    x = _float_in(ctx, ins[0])
    base = 2.0 if ctx.node.kind().startswith("aten::log2") else 10.0
    return ctx.emit("Mul", [ctx.emit("Log", [x]), _c(1.0 / math.log(base), ctx.dtype_of(x))])


def _expm1(ctx: ConvertContext, x):
    """exp(x) - 1 without cancellation near 0 (Kahan: (u - 1) * x / log(u) with u = exp(x))."""
    dt = ctx.dtype_of(x)
    u = ctx.emit("Exp", [x])
    um1 = ctx.emit("Sub", [u, _c(1, dt)])
    precise = ctx.emit("Div", [ctx.emit("Mul", [um1, x]), ctx.emit("Log", [u])])
    exact = ctx.emit("Or", [ctx.emit("Equal", [u, _c(1, dt)]), ctx.emit("IsInf", [u])])
    small = ctx.emit("Where", [ctx.emit("Equal", [u, _c(1, dt)]), x, um1])
    return ctx.emit("Where", [exact, small, ctx.emit("Where", [ctx.emit("Equal", [um1, _c(-1, dt)]), um1, precise])])


def _log1p(ctx: ConvertContext, x):
    """log(1 + x) without cancellation near 0 (Kahan: log(u) * x / (u - 1) with u = 1 + x)."""
    dt = ctx.dtype_of(x)
    u = ctx.emit("Add", [x, _c(1, dt)])
    precise = ctx.emit("Div", [ctx.emit("Mul", [ctx.emit("Log", [u]), x]), ctx.emit("Sub", [u, _c(1, dt)])])
    plain = ctx.emit("Or", [ctx.emit("IsInf", [u]), ctx.emit("LessOrEqual", [u, _c(0, dt)])])
    return ctx.emit("Where", [ctx.emit("Equal", [u, _c(1, dt)]), x,
                              ctx.emit("Where", [plain, ctx.emit("Log", [u]), precise])])


@converter("aten::expm1", "aten::expm1_", "aten::special_expm1")
def _expm1_conv(ctx: ConvertContext, ins):
    return _expm1(ctx, _float_in(ctx, ins[0]))


@converter("aten::log1p", "aten::log1p_", "aten::special_log1p")
def _log1p_conv(ctx: ConvertContext, ins):
    return _log1p(ctx, _float_in(ctx, ins[0]))


@converter("aten::logaddexp", "aten::logaddexp2")
def _logaddexp(ctx: ConvertContext, ins):
    """max + log1p(exp(-|a - b|)) (base 2 for logaddexp2); equal infinities give themselves, not NaN."""
    dt = _float_dtype(ctx, ins[0], ins[1])
    a, b = ctx.tensor(ins[0], dt), ctx.tensor(ins[1], dt)
    m = ctx.emit("Max", [a, b])
    d = ctx.emit("Neg", [ctx.emit("Abs", [ctx.emit("Sub", [a, b])])])
    if ctx.node.kind() == "aten::logaddexp2":
        ln2 = _c(math.log(2.0), dt)
        r = ctx.emit("Add", [m, ctx.emit("Div", [_log1p(ctx, ctx.emit("Exp", [ctx.emit("Mul", [d, ln2])])), ln2])])
    else:
        r = ctx.emit("Add", [m, _log1p(ctx, ctx.emit("Exp", [d]))])
    same_inf = ctx.emit("And", [ctx.emit("IsInf", [m]), ctx.emit("Equal", [a, b])])
    return ctx.emit("Where", [same_inf, m, r])


@converter("aten::xlogy", "aten::special_xlogy")
def _xlogy(ctx: ConvertContext, ins):
    """x * log(y), 0 where x == 0 (unless y is NaN)."""
    dt = _float_dtype(ctx, ins[0], ins[1])
    x, y = ctx.tensor(ins[0], dt), ctx.tensor(ins[1], dt)
    r = ctx.emit("Mul", [x, ctx.emit("Log", [y])])
    zero = ctx.emit("And", [ctx.emit("Equal", [x, _c(0, dt)]), ctx.emit("Not", [ctx.emit("IsNaN", [y])])])
    return ctx.emit("Where", [zero, _c(0, dt), r])


@converter("aten::nan_to_num", "aten::nan_to_num_")
def _nan_to_num(ctx: ConvertContext, ins):
    x = ctx.tensor(ins[0])
    dt = ctx.dtype_of(x)
    if CATEGORY[dt] < 2:
        return x
    info = np.finfo({"f16": np.float16, "f64": np.float64}.get(dt, np.float32))

    def given(k):
        return ctx.const(ins[k], "replacement") if len(ins) > k and ins[k] is not None else None

    nan, pos, neg = given(1), given(2), given(3)
    nan = 0.0 if nan is None else nan
    pos = float(info.max) if pos is None else pos
    neg = float(info.min) if neg is None else neg
    x = ctx.emit("Where", [ctx.emit("IsNaN", [x]), _c(nan, dt), x])
    x = ctx.emit("Where", [ctx.emit("IsInf", [x], {"detect_negative": 0}), _c(pos, dt), x])
    return ctx.emit("Where", [ctx.emit("IsInf", [x], {"detect_positive": 0}), _c(neg, dt), x])


@converter("aten::heaviside", "aten::heaviside_")
def _heaviside(ctx: ConvertContext, ins):
    dt = result_dtype(ctx, ins[0], ins[1])
    x, values = ctx.tensor(ins[0], dt), ctx.tensor(ins[1], dt)
    step = ctx.emit("Cast", [ctx.emit("Greater", [x, _c(0, dt)])], {"to": onnx_dtype_id(dt)})
    return ctx.emit("Where", [ctx.emit("Equal", [x, _c(0, dt)]), values, step])


@converter("aten::linalg_det", "aten::det", "aten::_linalg_det")
def _det(ctx: ConvertContext, ins):
    """The determinant of each trailing square matrix (_linalg_det also returns the LU factors, which no
    inference graph reads)."""
    d = ctx.emit("Det", [_float_in(ctx, ins[0])])
    return (d, None, None) if ctx.node.kind() == "aten::_linalg_det" else d
