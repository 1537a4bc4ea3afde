"""Converters for ordering, reindexing and resampling: topk, sort, argsort, median, flip, roll, nonzero, scatter
(and its add/reduce forms), repeat_interleave, bucketize, and the upsample_* ops F.interpolate calls. Sorting
is TopK over the whole dim (ONNX's TopK keeps equal values in index order, as torch's stable sort does);
resampling is Resize with the coordinate mapping torch uses for each mode."""
from __future__ import annotations

import numpy as np
import torch

from .context import ConvertContext, converter
from .aten_core import result_dtype
from .aten_shape import axes, dims_of, emit_n, norm_dim, reshape, shape_of, size_tensor, static_dim

_BIG = np.iinfo(np.int64).max


def _dim_size(ctx: ConvertContext, x, d: int):
    """Dim d of x as a 1-element i64 tensor (a constant when static)."""
    n = dims_of(ctx, x)[d]
    return size_tensor(ctx, [n])


def _topk(ctx: ConvertContext, x, k, d: int, largest: bool):
    """(values, indices) of the k largest (or smallest) along d, sorted; k an int or a run-time i64."""
    if ctx.rank_of(x) == 0:
        return x, np.array(0, np.int64)
    k = size_tensor(ctx, [k]) if not ctx.is_value(k) else ctx.emit("Reshape", [ctx.tensor(k, "i64"),
                                                                               np.array([1], np.int64)])
    values, indices = emit_n(ctx, "TopK", [x, k], {"axis": d, "largest": int(largest), "sorted": 1}, 2)
    return values, indices


@converter("aten::topk")
def _topk_conv(ctx: ConvertContext, ins):
    x, k, dim, largest, _sorted = (list(ins) + [-1, True, True][len(ins) - 2:])[:5]
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    return _topk(ctx, x, ctx.const(k, "k") if not ctx.is_value(k) or k.is_constant else k, d,
                 bool(ctx.const(largest, "largest")))


def _sort_args(ctx: ConvertContext, ins):
    """(x, dim, descending) from sort/argsort and their .stable overloads (which put `stable` second)."""
    names = [a.name for a in torch._C.parse_schema(ctx.node.schema()).arguments]
    args = dict(zip(names, ins))
    return args["self"], args.get("dim", -1), bool(ctx.const(args.get("descending", False), "descending"))


@converter("aten::sort")
def _sort(ctx: ConvertContext, ins):
    x, dim, descending = _sort_args(ctx, ins)
    if ctx.rank_of(x) == 0:
        return x, np.array(0, np.int64)
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    return _topk(ctx, x, _dim_size(ctx, x, d), d, descending)


@converter("aten::argsort")
def _argsort(ctx: ConvertContext, ins):
    x, dim, descending = _sort_args(ctx, ins)
    if ctx.rank_of(x) == 0:
        return np.array(0, np.int64)
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    return _topk(ctx, x, _dim_size(ctx, x, d), d, descending)[1]


@converter("aten::median", "aten::nanmedian")
def _median(ctx: ConvertContext, ins):
    """torch's median is the lower of the two middle values ((n - 1) // 2 in sorted order), with its index."""
    x = ins[0]
    if ctx.node.kind() == "aten::nanmedian":
        raise ctx.error("nanmedian is not supported (median ignoring NaN); use median on inputs without NaN")
    whole = len(ins) == 1
    if whole:
        x, d, keep = reshape(ctx, x, [-1]), 0, False
    else:
        d, keep = norm_dim(ctx, ins[1], ctx.rank_of(x)), bool(ctx.const(ins[2], "keepdim"))
    if ctx.rank_of(x) == 0:
        return x if whole else (x, np.array(0, np.int64))
    n = dims_of(ctx, x)[d]
    if isinstance(n, int):
        if n == 0:
            raise ctx.error("median of an empty dim")
        k = (n - 1) // 2 + 1
    else:
        k = ctx.emit("Add", [ctx.emit("Div", [ctx.emit("Sub", [n, np.array(1, np.int64)]), np.array(2, np.int64)]),
                             np.array(1, np.int64)])
    values, indices = _topk(ctx, x, k, d, largest=False)
    last = lambda t: ctx.emit("Slice", [t, axes([-1]), axes([_BIG]), axes([d])])  # noqa: E731
    values, indices = last(values), last(indices)
    if not keep:
        values = ctx.emit("Squeeze", [values, axes([d])])
        indices = ctx.emit("Squeeze", [indices, axes([d])])
    return values if whole else (values, indices)


@converter("aten::flip")
def _flip(ctx: ConvertContext, ins):
    x, dims = ins[0], ctx.const(ins[1], "dims")
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims or ctx.rank_of(x) == 0:
        return x
    r = ctx.rank_of(x)
    ds = [norm_dim(ctx, d, r) for d in dims]
    n = len(ds)
    return ctx.emit("Slice", [x, axes([-1] * n), axes([-_BIG - 1] * n), axes(ds), axes([-1] * n)])


@converter("aten::roll")
def _roll(ctx: ConvertContext, ins):
    x, shifts, dims = ins[0], ctx.const(ins[1], "shifts"), ctx.const(ins[2], "dims") if len(ins) > 2 else []
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:  # over the flattened tensor, then back
        if len(shifts) != 1:
            raise ctx.error("roll without dims takes one shift")
        shape = dims_of(ctx, x)
        return reshape(ctx, _roll_dim(ctx, reshape(ctx, x, [-1]), shifts[0], 0), shape)
    if len(shifts) != len(dims):
        raise ctx.error(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    for s, d in zip(shifts, dims):
        x = _roll_dim(ctx, x, s, norm_dim(ctx, d, ctx.rank_of(x)))
    return x


def _roll_dim(ctx: ConvertContext, x, shift: int, d: int):
    n = static_dim(ctx, x, d, "roll")
    if n == 0:
        return x
    s = shift % n
    if s == 0:
        return x
    tail = ctx.emit("Slice", [x, axes([n - s]), axes([n]), axes([d])])
    head = ctx.emit("Slice", [x, axes([0]), axes([n - s]), axes([d])])
    return ctx.emit("Concat", [tail, head], {"axis": d})


@converter("aten::nonzero")
def _nonzero(ctx: ConvertContext, ins):
    """The indices of the non-zero elements, one row each: [count, rank] (NonZero's transpose)."""
    x = ins[0]
    if ctx.rank_of(x) > 0:
        return ctx.emit("Transpose", [ctx.emit("NonZero", [x])], {"perm": [1, 0]})
    # a 0-d tensor: [1, 0] when it is non-zero, else [0, 0]
    idx = ctx.emit("Transpose", [ctx.emit("NonZero", [reshape(ctx, x, [1])])], {"perm": [1, 0]})  # [k, 1]
    return ctx.emit("Slice", [idx, axes([0]), axes([0]), axes([1])])


# ---- scatter

_SCATTER_REDUCE = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}


def _scatter(ctx: ConvertContext, x, d: int, index, src, reduction: str):
    """ScatterElements with torch's rules: src may be a scalar or larger than index (only its leading part
    along each dim is read)."""
    dt = ctx.dtype_of(x)
    index = ctx.tensor(index, "i64")
    if not ctx.is_value(src) and not hasattr(src, "shape"):  # a Python scalar: broadcast to index's shape
        src = ctx.emit("Expand", [ctx.tensor(np.array(src), dt), ctx.emit("Shape", [index])])
    else:
        src = ctx.tensor(src, dt)
        if shape_of(ctx, src) != shape_of(ctx, index):
            r = ctx.rank_of(index)
            src = ctx.emit("Slice", [src, axes([0] * r), ctx.emit("Shape", [index]), axes(range(r))])
    return ctx.emit("ScatterElements", [x, index, src], {"axis": d, "reduction": reduction})


@converter("aten::scatter", "aten::scatter_")
def _scatter_conv(ctx: ConvertContext, ins):
    x, dim, index, src = ins[:4]
    reduce = ctx.const(ins[4], "reduce") if len(ins) > 4 and ins[4] is not None else None
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    if reduce is not None and reduce not in _SCATTER_REDUCE:
        raise ctx.error(f"scatter with reduce={reduce!r} is not supported (add, multiply are)")
    return _scatter(ctx, x, d, index, src, _SCATTER_REDUCE[reduce] if reduce else "none")


@converter("aten::scatter_add", "aten::scatter_add_")
def _scatter_add(ctx: ConvertContext, ins):
    x, dim, index, src = ins[:4]
    return _scatter(ctx, x, norm_dim(ctx, dim, ctx.rank_of(x)), index, src, "add")


@converter("aten::scatter_reduce", "aten::scatter_reduce_")
def _scatter_reduce(ctx: ConvertContext, ins):
    x, dim, index, src, reduce = ins[:5]
    include_self = bool(ctx.const(ins[5], "include_self")) if len(ins) > 5 else True
    reduce = ctx.const(reduce, "reduce")
    if reduce not in _SCATTER_REDUCE or not include_self:
        raise ctx.error(f"scatter_reduce with reduce={reduce!r}, include_self={include_self} is not supported "
                        f"(sum, prod, amax, amin with include_self=True are)")
    return _scatter(ctx, x, norm_dim(ctx, dim, ctx.rank_of(x)), index, src, _SCATTER_REDUCE[reduce])


# ---- repetition and bucketing


@converter("aten::repeat_interleave")
def _repeat_interleave(ctx: ConvertContext, ins):
    x, repeats = ins[0], ins[1]
    dim = ins[2] if len(ins) > 2 else None
    if ctx.is_value(repeats) and not repeats.is_constant:
        raise ctx.error("repeat_interleave with repeats computed at run time is not supported (its output size "
                        "depends on tensor values)")
    reps = ctx.const(repeats, "repeats")
    if dim is None or ctx.const(dim, "dim") is None:
        x, d = reshape(ctx, x, [-1]), 0
    else:
        d = norm_dim(ctx, dim, ctx.rank_of(x))
    if isinstance(reps, list) and len(reps) == 1:
        reps = reps[0]
    if isinstance(reps, int):  # each element r times: insert a dim after d, expand it, merge it back
        shape = dims_of(ctx, x)
        y = ctx.emit("Unsqueeze", [x, axes([d + 1])])
        y = ctx.emit("Expand", [y, size_tensor(ctx, shape[:d + 1] + [reps] + shape[d + 1:])])
        n = shape[d] * reps if isinstance(shape[d], int) else ctx.emit("Mul", [shape[d], np.array(reps, np.int64)])
        return reshape(ctx, y, shape[:d] + [n] + shape[d + 1:])
    idx = np.repeat(np.arange(len(reps), dtype=np.int64), reps)  # constant per-element counts
    return ctx.emit("Gather", [x, idx], {"axis": d})


@converter("aten::bucketize")
def _bucketize(ctx: ConvertContext, ins):
    """The bucket of each value: how many boundaries lie below it (right=False: boundaries < x)."""
    x, boundaries, out_int32, right = (list(ins) + [False, False][len(ins) - 2:])[:4]
    dt = result_dtype(ctx, x, boundaries)
    b = ctx.tensor(boundaries, dt)
    if ctx.rank_of(b) != 1:
        raise ctx.error("bucketize needs 1-D boundaries")
    xe = ctx.emit("Unsqueeze", [ctx.tensor(x, dt), axes([-1])])
    below = ctx.emit("LessOrEqual" if ctx.const(right, "right") else "Less", [b, xe])
    count = ctx.emit("ReduceSum", [ctx.emit("Cast", [below], {"to": 7}), axes([-1])], {"keepdims": 0})
    return ctx.emit("Cast", [count], {"to": 6}) if ctx.const(out_int32, "out_int32") else count


# ---- resampling (F.interpolate)

_MODES = {"nearest": ("nearest", "asymmetric"), "nearest_exact": ("nearest", "half_pixel"),
          "linear": ("linear", None), "bilinear": ("linear", None), "trilinear": ("linear", None),
          "bicubic": ("cubic", None)}


def _upsample(ctx: ConvertContext, mode: str, x, output_size, align_corners, scales):
    r = ctx.rank_of(x)
    spatial = r - 2
    op, coord = _MODES[mode]
    if coord is None:
        coord = "align_corners" if ctx.const(align_corners, "align_corners") else "pytorch_half_pixel"
    attrs = {"mode": op, "coordinate_transformation_mode": coord}
    if op == "nearest":
        attrs["nearest_mode"] = "floor" if mode == "nearest" else "round_prefer_ceil"
    if op == "cubic":
        attrs["cubic_coeff_a"] = -0.75
    scales = ctx.const(scales, "scale_factors") if scales is not None else None
    if isinstance(scales, (int, float)):
        scales = [scales] * spatial
    if scales is not None and any(s is None for s in scales):
        scales = None
    if output_size is not None and not (isinstance(output_size, (list, tuple)) and len(output_size) == 0):
        sizes = output_size if isinstance(output_size, (list, tuple)) else [output_size]
        if scales is not None and all(isinstance(s, (int, float)) for s in scales) and \
                all(not ctx.is_value(s) for s in sizes) and not coord == "align_corners":
            # torch maps coordinates with the given scale factors when it has them; so does Resize with scales
            # (its output size is floor(in * scale), which is how torch computed output_size).
            return ctx.emit("Resize", [x, None, np.array([1.0, 1.0] + [float(s) for s in scales], np.float32)],
                            attrs)
        lead = dims_of(ctx, x)[:2]
        return ctx.emit("Resize", [x, None, None, size_tensor(ctx, lead + list(sizes))], attrs)
    if scales is None:
        raise ctx.error(f"upsample_{mode} needs an output size or scale factors")
    return ctx.emit("Resize", [x, None, np.array([1.0, 1.0] + [float(s) for s in scales], np.float32)], attrs)


def _upsample_conv(mode: str):
    def conv(ctx: ConvertContext, ins):
        names = [a.name for a in torch._C.parse_schema(ctx.node.schema()).arguments]
        args = dict(zip(names, ins))
        x = args.get("self", args.get("input"))
        if "scale_factors" in args:  # the .vec overload
            scales = args["scale_factors"]
        else:
            per = [args[k] for k in ("scales_d", "scales_h", "scales_w", "scales") if k in args]
            scales = per if per and all(s is not None for s in per) else None
        size = args.get("output_size")
        if ctx.rank_of(x) - 2 not in (1, 2, 3):
            raise ctx.error(f"upsample_{mode} needs a batched input with 1 to 3 spatial dims")
        return _upsample(ctx, mode, x, size, args.get("align_corners", False), scales)
    return conv


for _m, _kinds in {"nearest": ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d"),
                   "nearest_exact": ("_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
                                     "_upsample_nearest_exact3d"),
                   "linear": ("upsample_linear1d",), "bilinear": ("upsample_bilinear2d",),
                   "trilinear": ("upsample_trilinear3d",), "bicubic": ("upsample_bicubic2d",)}.items():
    converter(*(f"aten::{k}" for k in _kinds))(_upsample_conv(_m))


# ---- set membership and uniqueness


@converter("aten::isin")
def _isin(ctx: ConvertContext, ins):
    """Whether each element equals one of `test_elements`: Equal against their flattened list, any of them."""
    x, test = ins[0], ins[1]
    invert = bool(ctx.const(ins[3], "invert")) if len(ins) > 3 else False
    dt = result_dtype(ctx, x, test)
    flat = reshape(ctx, ctx.tensor(test, dt), [-1])
    eq = ctx.emit("Equal", [ctx.emit("Unsqueeze", [ctx.tensor(x, dt), axes([-1])]), flat])
    hit = ctx.emit("Cast", [ctx.emit("ReduceMax", [ctx.emit("Cast", [eq], {"to": 2}), axes([-1])],
                                     {"keepdims": 0})], {"to": 9})
    return ctx.emit("Not", [hit]) if invert else hit


@converter("aten::_unique2")
def _unique2(ctx: ConvertContext, ins):
    """torch.unique over all elements: sorted values, the inverse (in the input's shape) and the counts."""
    x = ins[0]
    if not ctx.const(ins[1], "sorted"):
        raise ctx.error("torch.unique(sorted=False) is not supported (Cuvil returns the values sorted)")
    shape = dims_of(ctx, x)
    values, _, inverse, counts = emit_n(ctx, "Unique", [reshape(ctx, x, [-1])], {"sorted": 1}, 4)
    return values, reshape(ctx, inverse, shape), counts


@converter("aten::numpy_T")
def _numpy_t(ctx: ConvertContext, ins):
    x = ins[0]
    r = ctx.rank_of(x)
    return x if r < 2 else ctx.emit("Transpose", [x], {"perm": list(range(r - 1, -1, -1))})


@converter("aten::triu_indices", "aten::tril_indices")
def _tri_indices(ctx: ConvertContext, ins):
    """The [2, N] coordinates of a triangle: a constant (its sizes are compile-time ints)."""
    row, col, offset = (ctx.const(v, "size") for v in ins[:3])
    fn = np.triu_indices if ctx.node.kind() == "aten::triu_indices" else np.tril_indices
    return ctx.tensor(np.stack(fn(row, offset, col)).astype(np.int64))


@converter("aten::kthvalue")
def _kthvalue(ctx: ConvertContext, ins):
    """The k-th smallest value along dim (1-based k) and its index."""
    x, k, dim, keep = (list(ins) + [-1, False][len(ins) - 2:])[:4]
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    k = ctx.const(k, "k")
    values, indices = _topk(ctx, x, k, d, largest=False)
    last = lambda t: ctx.emit("Slice", [t, axes([-1]), axes([_BIG]), axes([d])])  # noqa: E731
    values, indices = last(values), last(indices)
    if not ctx.const(keep, "keepdim"):
        values, indices = (ctx.emit("Squeeze", [t, axes([d])]) for t in (values, indices))
    return values, indices


@converter("aten::searchsorted")
def _searchsorted(ctx: ConvertContext, ins):
    """For a 1-D sorted sequence: how many of its values lie below each input (right: at or below)."""
    seq, x = ins[0], ins[1]
    out_int32 = bool(ctx.const(ins[2], "out_int32")) if len(ins) > 2 else False
    right = bool(ctx.const(ins[3], "right")) if len(ins) > 3 else False
    side = ctx.const(ins[4], "side") if len(ins) > 4 and ins[4] is not None else None
    if ctx.rank_of(seq) != 1:
        raise ctx.error("searchsorted is supported for a 1-D sorted sequence")
    if len(ins) > 5 and ins[5] is not None:
        raise ctx.error("searchsorted with a sorter is not supported")
    right = right or side == "right"
    return _bucketize(ctx, [x, seq, out_int32, right])


@converter("aten::masked_select")
def _masked_select(ctx: ConvertContext, ins):
    """The elements where mask is true, in order, as a 1-D tensor (both broadcast to one shape first)."""
    x, mask = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    shape = ctx.emit("Shape", [ctx.emit("Where", [mask, x, x])])  # the broadcast shape
    flat_x = reshape(ctx, ctx.emit("Expand", [x, shape]), [-1])
    flat_m = reshape(ctx, ctx.emit("Expand", [mask, shape]), [-1])
    return ctx.emit("Compress", [flat_x, flat_m], {"axis": 0})
