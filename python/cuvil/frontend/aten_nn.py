"""CNN-side converters: convolutions, normalizations, pooling, activations, dropout, reductions (mean, amax, max,
min), the classification losses (cross_entropy, nll_loss), clamp and padding.

Argument lists follow the aten schemas (torch 1.13). Window arguments (stride, padding, ...) arrive as int lists;
a list of one value applies to every spatial dim. Unbatched inputs (no N dim) are unsqueezed and squeezed back,
as torch does.
"""
from __future__ import annotations

import math

import numpy as np

from .context import CATEGORY, NUMPY_DTYPES, SCALAR_TYPE_TO_TORCH, TORCH_TO_CUVIL, ConvertContext, converter
from .aten_core import binary, result_dtype
from .aten_shape import axes, dims_of, emit_n, int_list, norm_dim, product, reshape, shape_of, INT64_MAX


# ---- helpers


def _window(ctx: ConvertContext, v, n: int, what: str) -> list:
    """A window argument for n spatial dims (one value is repeated)."""
    vals = int_list(ctx, v, what)
    if len(vals) == 1 and n > 1:
        vals = vals * n
    if len(vals) != n:
        raise ctx.error(f"{what} has {len(vals)} values {vals}; expected {n} for {n} spatial dim(s)")
    return vals


def _batched(ctx: ConvertContext, x, spatial: int, what: str):
    """x with a batch dim ([N, C, spatial...]) and whether one was added."""
    r = ctx.rank_of(x)
    if r == spatial + 2:
        return x, False
    if r == spatial + 1:
        return ctx.emit("Unsqueeze", [x, axes([0])]), True
    raise ctx.error(f"{what} expects a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, got rank {r}")


def _unbatch(ctx: ConvertContext, y, added: bool):
    return ctx.emit("Squeeze", [y, axes([0])]) if added else y


def _scalar(ctx: ConvertContext, v, dtype: str, what: str) -> np.ndarray:
    """A constant scalar argument as a 0-d array of `dtype`."""
    return np.array(ctx.const(v, what), NUMPY_DTYPES[dtype])


def _float_const(ctx: ConvertContext, v, what: str) -> float:
    return float(ctx.const(v, what))


def _expect_float(ctx: ConvertContext, x, what: str):
    dt = ctx.dtype_of(x)
    if CATEGORY.get(dt, 0) < 2:
        raise ctx.error(f"{what} needs a floating-point input, got {dt}")


def _uses(ctx: ConvertContext, i: int) -> bool:
    """Whether output i of the node being converted is used (unused outputs need no nodes)."""
    return bool(ctx.node.outputsAt(i).uses())


def _channel_param(ctx: ConvertContext, p, rank: int):
    """A per-channel [C] tensor shaped to broadcast against an [N, C, spatial...] input."""
    if rank <= 2:
        return p
    return ctx.emit("Unsqueeze", [p, axes(range(1, rank - 1))])


def _filled(ctx: ConvertContext, value: float, n: int, dtype: str) -> np.ndarray:
    return np.full((n,), value, NUMPY_DTYPES[dtype])


# ---- convolutions


def _conv(ctx: ConvertContext, x, w, b, stride, padding, dilation, groups, transposed=False, output_padding=None):
    wr = ctx.rank_of(w)
    spatial = wr - 2
    if not 1 <= spatial <= 3:
        raise ctx.error(f"convolution weights must have rank 3 to 5 (1 to 3 spatial dims), got rank {wr}")
    x, added = _batched(ctx, x, spatial, "convolution")
    strides = _window(ctx, stride, spatial, "stride")
    dilations = _window(ctx, dilation, spatial, "dilation")
    group = ctx.const(groups, "groups")
    if group < 1:
        raise ctx.error(f"groups must be positive, got {group}")
    padding = ctx.const(padding, "padding")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * spatial)
        elif padding == "same":
            if any(s != 1 for s in strides):
                raise ctx.error(f"padding='same' is not supported for strided convolutions (stride {strides})")
            kernel = shape_of(ctx, w)[2:]
            # torch: total padding dilation * (k - 1), the odd extra element at the end
            total = [d * (k - 1) for d, k in zip(dilations, kernel)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            raise ctx.error(f"padding must be 'valid', 'same' or a list of ints, got {padding!r}")
    else:
        p = _window(ctx, padding, spatial, "padding")
        if any(v < 0 for v in p):
            raise ctx.error(f"negative padding {p} is not supported")
        pads = p + p
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": group}
    ins = [x, ctx.tensor(w, ctx.dtype_of(x))] + ([ctx.tensor(b, ctx.dtype_of(x))] if b is not None else [])
    if transposed:
        attrs["output_padding"] = _window(ctx, output_padding, spatial, "output_padding")
        y = ctx.emit("ConvTranspose", ins, attrs)
    else:
        y = ctx.emit("Conv", ins, attrs)
    return _unbatch(ctx, y, added)


@converter("aten::conv1d", "aten::conv2d", "aten::conv3d")
def _conv_nd(ctx: ConvertContext, ins):
    x, w, b, stride, padding, dilation, groups = (list(ins) + [None, [1], [0], [1], 1][len(ins) - 2:])[:7]
    return _conv(ctx, x, w, b, stride, padding, dilation, groups)


@converter("aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d")
def _conv_transpose_nd(ctx: ConvertContext, ins):
    x, w, b, stride, padding, output_padding, groups, dilation = \
        (list(ins) + [None, [1], [0], [0], 1, [1]][len(ins) - 2:])[:8]
    return _conv(ctx, x, w, b, stride, padding, dilation, groups, True, output_padding)


@converter("aten::_convolution", "aten::convolution")
def _convolution(ctx: ConvertContext, ins):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = ins[:9]
    return _conv(ctx, x, w, b, stride, padding, dilation, groups, bool(ctx.const(transposed, "transposed")),
                 output_padding)


# ---- normalizations


@converter("aten::batch_norm")
def _batch_norm(ctx: ConvertContext, ins):
    x, w, b, mean, var, training, _momentum, eps = ins[:8]
    eps = _float_const(ctx, eps, "eps")
    r = ctx.rank_of(x)
    if r < 2:
        raise ctx.error(f"batch_norm expects an input of rank >= 2 ([N, C, ...]), got rank {r}")
    _expect_float(ctx, x, "batch_norm")
    dt = ctx.dtype_of(x)
    if bool(ctx.const(training, "training")):
        # Batch statistics (training mode, or track_running_stats=False): normalize over N and the spatial dims
        # with the biased variance. Updating the running buffers is a side effect inference does not keep.
        return _normalize(ctx, x, [0] + list(range(2, r)), eps, w, b, r)
    if mean is None or var is None:
        raise ctx.error("batch_norm in evaluation mode needs running_mean and running_var")
    c = shape_of(ctx, mean)[0]
    w = _filled(ctx, 1.0, c, dt) if w is None else ctx.tensor(w, dt)
    b = _filled(ctx, 0.0, c, dt) if b is None else ctx.tensor(b, dt)
    return ctx.emit("BatchNormalization", [x, w, b, ctx.tensor(mean, dt), ctx.tensor(var, dt)], {"epsilon": eps})


def _normalize(ctx: ConvertContext, x, reduce_axes: list, eps: float, w, b, rank: int):
    """(x - mean) / sqrt(biased var + eps) over reduce_axes, then the per-channel affine transform."""
    dt = ctx.dtype_of(x)
    mean = ctx.emit("ReduceMean", [x, axes(reduce_axes)], {"keepdims": 1})
    d = ctx.emit("Sub", [x, mean])
    var = ctx.emit("ReduceMean", [ctx.emit("Mul", [d, d]), axes(reduce_axes)], {"keepdims": 1})
    y = ctx.emit("Div", [d, ctx.emit("Sqrt", [ctx.emit("Add", [var, np.array(eps, NUMPY_DTYPES[dt])])])])
    if w is not None:
        y = ctx.emit("Mul", [y, _channel_param(ctx, ctx.tensor(w, dt), rank)])
    if b is not None:
        y = ctx.emit("Add", [y, _channel_param(ctx, ctx.tensor(b, dt), rank)])
    return y


@converter("aten::instance_norm")
def _instance_norm(ctx: ConvertContext, ins):
    x, w, b, mean, var, use_input_stats, _momentum, eps = ins[:8]
    eps = _float_const(ctx, eps, "eps")
    r = ctx.rank_of(x)
    if r < 3:
        raise ctx.error(f"instance_norm expects an input of rank >= 3 ([N, C, spatial...]), got rank {r}")
    _expect_float(ctx, x, "instance_norm")
    dt = ctx.dtype_of(x)
    if not bool(ctx.const(use_input_stats, "use_input_stats")):
        if mean is None or var is None:
            raise ctx.error("instance_norm with use_input_stats=False needs running_mean and running_var")
        return _batch_norm(ctx, [x, w, b, mean, var, False, 0.0, eps])
    c = shape_of(ctx, x)[1]
    if not isinstance(c, int):
        return _normalize(ctx, x, list(range(2, r)), eps, w, b, r)
    w = _filled(ctx, 1.0, c, dt) if w is None else ctx.tensor(w, dt)
    b = _filled(ctx, 0.0, c, dt) if b is None else ctx.tensor(b, dt)
    return ctx.emit("InstanceNormalization", [x, w, b], {"epsilon": eps})


@converter("aten::layer_norm")
def _layer_norm(ctx: ConvertContext, ins):
    x, normalized_shape, w, b, eps = (list(ins) + [None, None, 1e-5][len(ins) - 2:])[:5]
    shape = int_list(ctx, normalized_shape, "normalized_shape")
    eps = _float_const(ctx, eps, "eps")
    r = ctx.rank_of(x)
    _expect_float(ctx, x, "layer_norm")
    if not shape or len(shape) > r:
        raise ctx.error(f"normalized_shape {shape} does not fit an input of rank {r}")
    tail = shape_of(ctx, x)[r - len(shape):]
    if any(isinstance(t, int) and t != s for t, s in zip(tail, shape)):
        raise ctx.error(f"normalized_shape {shape} does not match the input's last dims {tail}")
    dt = ctx.dtype_of(x)
    w = np.ones(shape, NUMPY_DTYPES[dt]) if w is None else ctx.tensor(w, dt)
    ins = [x, w] + ([ctx.tensor(b, dt)] if b is not None else [])
    return ctx.emit("LayerNormalization", ins, {"axis": r - len(shape), "epsilon": eps})


@converter("aten::group_norm")
def _group_norm(ctx: ConvertContext, ins):
    x, groups, w, b, eps = (list(ins) + [None, None, 1e-5][len(ins) - 2:])[:5]
    g = ctx.const(groups, "num_groups")
    eps = _float_const(ctx, eps, "eps")
    r = ctx.rank_of(x)
    if r < 2:
        raise ctx.error(f"group_norm expects an input of rank >= 2 ([N, C, ...]), got rank {r}")
    _expect_float(ctx, x, "group_norm")
    dt = ctx.dtype_of(x)
    dims = dims_of(ctx, x)
    c = dims[1]
    if not isinstance(c, int):
        raise ctx.error("group_norm needs the channel dim to be static")
    if g <= 0 or c % g:
        raise ctx.error(f"group_norm: {c} channels are not divisible into {g} groups")
    # Each (n, group) is one instance of InstanceNormalization over [N, G, C/G * spatial].
    grouped = reshape(ctx, x, [dims[0], g, product(ctx, [c // g] + dims[2:])])
    y = ctx.emit("InstanceNormalization", [grouped, _filled(ctx, 1.0, g, dt), _filled(ctx, 0.0, g, dt)],
                 {"epsilon": eps})
    y = reshape(ctx, y, dims)
    if w is not None:
        y = ctx.emit("Mul", [y, _channel_param(ctx, ctx.tensor(w, dt), r)])
    if b is not None:
        y = ctx.emit("Add", [y, _channel_param(ctx, ctx.tensor(b, dt), r)])
    return y


# ---- pooling


def _pool_window(ctx: ConvertContext, spatial: int, kernel, stride, padding, dilation=None):
    k = _window(ctx, kernel, spatial, "kernel_size")
    s = int_list(ctx, stride, "stride")
    s = k if not s else _window(ctx, s, spatial, "stride")
    p = _window(ctx, padding, spatial, "padding")
    d = [1] * spatial if dilation is None else _window(ctx, dilation, spatial, "dilation")
    if any(v <= 0 for v in k + s + d):
        raise ctx.error(f"kernel_size {k}, stride {s} and dilation {d} must be positive")
    for pi, ki, di in zip(p, k, d):
        if pi < 0 or pi > ((ki - 1) * di + 1) // 2:
            raise ctx.error(f"padding {p} must be non-negative and at most half of the effective kernel size")
    return k, s, p, d


def _max_pool(ctx: ConvertContext, ins, spatial: int, with_indices: bool):
    x, kernel, stride, padding, dilation, ceil_mode = (list(ins) + [[], [0], [1], False][len(ins) - 2:])[:6]
    x, added = _batched(ctx, x, spatial, ctx.node.kind())
    k, s, p, d = _pool_window(ctx, spatial, kernel, stride, padding, dilation)
    attrs = {"kernel_shape": k, "strides": s, "pads": p + p, "dilations": d,
             "ceil_mode": int(bool(ctx.const(ceil_mode, "ceil_mode")))}
    if not with_indices or not _uses(ctx, 1):
        y = _unbatch(ctx, ctx.emit("MaxPool", [x], attrs), added)
        return (y, None) if with_indices else y
    y, idx = emit_n(ctx, "MaxPool", [x], attrs, 2)
    return _unbatch(ctx, y, added), _unbatch(ctx, _plane_indices(ctx, x, idx), added)


def _plane_indices(ctx: ConvertContext, x, flat):
    """MaxPool's indices count over the whole tensor; torch's count within each (n, c) plane."""
    plane = product(ctx, dims_of(ctx, x)[2:])
    plane = np.array(plane, np.int64) if isinstance(plane, int) else plane
    return ctx.emit("Mod", [flat, plane])


for _n in (1, 2, 3):
    converter(f"aten::max_pool{_n}d")(lambda ctx, ins, n=_n: _max_pool(ctx, ins, n, False))
    converter(f"aten::max_pool{_n}d_with_indices")(lambda ctx, ins, n=_n: _max_pool(ctx, ins, n, True))


def _avg_pool(ctx: ConvertContext, ins, spatial: int):
    x, kernel, stride, padding, ceil_mode, count_include_pad, divisor = \
        (list(ins) + [[], [0], False, True, None][len(ins) - 2:])[:7]
    if ctx.const(divisor, "divisor_override") is not None:
        raise ctx.error("avg_pool with divisor_override is not supported")
    _expect_float(ctx, x, ctx.node.kind())
    x, added = _batched(ctx, x, spatial, ctx.node.kind())
    k, s, p, _ = _pool_window(ctx, spatial, kernel, stride, padding)
    attrs = {"kernel_shape": k, "strides": s, "pads": p + p,
             "ceil_mode": int(bool(ctx.const(ceil_mode, "ceil_mode"))),
             "count_include_pad": int(bool(ctx.const(count_include_pad, "count_include_pad")))}
    return _unbatch(ctx, ctx.emit("AveragePool", [x], attrs), added)


for _n in (1, 2, 3):
    converter(f"aten::avg_pool{_n}d")(lambda ctx, ins, n=_n: _avg_pool(ctx, ins, n))


def _adaptive_pool(ctx: ConvertContext, ins, spatial: int, is_max: bool):
    x, output_size = ins[0], ins[1]
    want_indices = is_max and _uses(ctx, 1)
    kind = ctx.node.kind()
    if not is_max:
        _expect_float(ctx, x, kind)
    x, added = _batched(ctx, x, spatial, kind)
    sizes = ctx.const(output_size, "output_size")
    sizes = [sizes] if not isinstance(sizes, (list, tuple)) else list(sizes)
    if len(sizes) == 1 and spatial > 1:
        sizes = sizes * spatial
    if len(sizes) != spatial:
        raise ctx.error(f"output_size {sizes} has {len(sizes)} values; expected {spatial}")
    ins_sp = shape_of(ctx, x)[2:]
    outs = [i if o is None else o for o, i in zip(sizes, ins_sp)]  # None keeps the input's size
    if any(isinstance(o, int) and o <= 0 for o in outs):
        raise ctx.error(f"output_size {sizes} must be positive")
    static = all(isinstance(i, int) for i in ins_sp)

    def done(y, idx=None):
        y = _unbatch(ctx, y, added)
        if not is_max:
            return y
        return y, (_unbatch(ctx, _plane_indices(ctx, x, idx), added) if idx is not None else None)

    if static and all(i % o == 0 for i, o in zip(ins_sp, outs)):
        if all(o == 1 for o in outs) and not want_indices:
            return done(ctx.emit("GlobalMaxPool" if is_max else "GlobalAveragePool", [x]))
        # Uniform windows: one pooling op with kernel = stride = in / out.
        k = [i // o for i, o in zip(ins_sp, outs)]
        attrs = {"kernel_shape": k, "strides": k}
        if is_max and want_indices:
            y, idx = emit_n(ctx, "MaxPool", [x], attrs, 2)
            return done(y, idx)
        return done(ctx.emit("MaxPool" if is_max else "AveragePool", [x], attrs))
    if want_indices:
        raise ctx.error(f"the indices of {kind} are supported only when each input size is a multiple of the "
                        f"output size (input {ins_sp}, output {outs})")
    # Otherwise one axis at a time: a max/mean over a rectangle is the max/mean over one axis of the max/means
    # over the other (every row of a window has the same length).
    reduce_op = "ReduceMax" if is_max else "ReduceMean"
    y = x
    for i, (n, o) in enumerate(zip(ins_sp, outs)):
        a = 2 + i
        if n == o:
            continue
        if o == 1:
            y = ctx.emit(reduce_op, [y, axes([a])], {"keepdims": 1})
            continue
        if not isinstance(n, int):
            raise ctx.error(f"{kind} to output size {o} needs spatial dim {i} to be static, but it is symbolic "
                            f"('{n}')")
        parts = []
        for j in range(o):
            start, end = (j * n) // o, -(-((j + 1) * n) // o)  # torch's window: [floor(j*n/o), ceil((j+1)*n/o))
            window = ctx.emit("Slice", [y, axes([start]), axes([end]), axes([a])])
            parts.append(ctx.emit(reduce_op, [window, axes([a])], {"keepdims": 1}))
        y = ctx.emit("Concat", parts, {"axis": a})
    return done(y)


for _n in (1, 2, 3):
    converter(f"aten::adaptive_avg_pool{_n}d")(lambda ctx, ins, n=_n: _adaptive_pool(ctx, ins, n, False))
    converter(f"aten::adaptive_max_pool{_n}d")(lambda ctx, ins, n=_n: _adaptive_pool(ctx, ins, n, True))


# ---- activations


def _float_input(ctx: ConvertContext, x, what: str):
    _expect_float(ctx, x, what)
    return ctx.tensor(x)


def _c(ctx: ConvertContext, x, v: float) -> np.ndarray:
    """A scalar constant of x's dtype."""
    return np.array(v, NUMPY_DTYPES[ctx.dtype_of(x)])


def _clip(ctx: ConvertContext, x, lo, hi):
    dt = ctx.dtype_of(x)
    return ctx.emit("Clip", [x, None if lo is None else _scalar(ctx, lo, dt, "min"),
                             None if hi is None else _scalar(ctx, hi, dt, "max")])


@converter("aten::hardtanh", "aten::hardtanh_")
def _hardtanh(ctx: ConvertContext, ins):
    x = ins[0]
    lo = ins[1] if len(ins) > 1 else -1.0
    hi = ins[2] if len(ins) > 2 else 1.0
    return _clip(ctx, x, lo, hi)


@converter("aten::relu6", "aten::relu6_")
def _relu6(ctx: ConvertContext, ins):
    return _clip(ctx, ins[0], 0, 6)


@converter("aten::leaky_relu", "aten::leaky_relu_")
def _leaky_relu(ctx: ConvertContext, ins):
    x = _float_input(ctx, ins[0], "leaky_relu")
    slope = _float_const(ctx, ins[1], "negative_slope") if len(ins) > 1 else 0.01
    return ctx.emit("LeakyRelu", [x], {"alpha": slope})


@converter("aten::rrelu", "aten::rrelu_")
def _rrelu(ctx: ConvertContext, ins):
    x, lower, upper, training = (list(ins) + [1 / 8, 1 / 3, False][len(ins) - 1:])[:4]
    if bool(ctx.const(training, "training")):
        raise ctx.error("rrelu in training mode (random slopes) is not supported")
    slope = (_float_const(ctx, lower, "lower") + _float_const(ctx, upper, "upper")) / 2
    return ctx.emit("LeakyRelu", [_float_input(ctx, x, "rrelu")], {"alpha": slope})


@converter("aten::elu", "aten::elu_")
def _elu(ctx: ConvertContext, ins):
    x, alpha, scale, input_scale = (list(ins) + [1.0, 1.0, 1.0][len(ins) - 1:])[:4]
    x = _float_input(ctx, x, "elu")
    alpha, scale, input_scale = (_float_const(ctx, v, n) for v, n in
                                 ((alpha, "alpha"), (scale, "scale"), (input_scale, "input_scale")))
    if scale == 1.0 and input_scale == 1.0:
        return ctx.emit("Elu", [x], {"alpha": alpha})
    # scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
    neg = ctx.emit("Mul", [ctx.emit("Sub", [ctx.emit("Exp", [ctx.emit("Mul", [x, _c(ctx, x, input_scale)])]),
                                            _c(ctx, x, 1.0)]), _c(ctx, x, alpha)])
    y = ctx.emit("Where", [ctx.emit("Greater", [x, _c(ctx, x, 0.0)]), x, neg])
    return y if scale == 1.0 else ctx.emit("Mul", [y, _c(ctx, x, scale)])


# torch's SELU constants (double precision)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@converter("aten::selu", "aten::selu_")
def _selu(ctx: ConvertContext, ins):
    return ctx.emit("Selu", [_float_input(ctx, ins[0], "selu")], {"alpha": _SELU_ALPHA, "gamma": _SELU_SCALE})


@converter("aten::celu", "aten::celu_")
def _celu(ctx: ConvertContext, ins):
    alpha = _float_const(ctx, ins[1], "alpha") if len(ins) > 1 else 1.0
    if alpha == 0:
        raise ctx.error("celu with alpha=0 is not defined")
    return ctx.emit("Celu", [_float_input(ctx, ins[0], "celu")], {"alpha": alpha})


@converter("aten::silu", "aten::silu_")
def _silu(ctx: ConvertContext, ins):
    x = _float_input(ctx, ins[0], "silu")
    return ctx.emit("Mul", [x, ctx.emit("Sigmoid", [x])])


@converter("aten::gelu", "aten::gelu_")
def _gelu(ctx: ConvertContext, ins):
    x = _float_input(ctx, ins[0], "gelu")
    approximate = ctx.const(ins[1], "approximate") if len(ins) > 1 else "none"
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"gelu approximate={approximate!r} is not supported (only 'none' and 'tanh')")
    return ctx.emit("Gelu", [x], {"approximate": approximate})


@converter("aten::hardswish", "aten::hardswish_")
def _hardswish(ctx: ConvertContext, ins):
    return ctx.emit("HardSwish", [_float_input(ctx, ins[0], "hardswish")])


@converter("aten::hardsigmoid", "aten::hardsigmoid_")
def _hardsigmoid(ctx: ConvertContext, ins):
    # relu6(x + 3) / 6 = clamp(x / 6 + 1/2, 0, 1)
    return ctx.emit("HardSigmoid", [_float_input(ctx, ins[0], "hardsigmoid")], {"alpha": 1.0 / 6.0, "beta": 0.5})


def _softplus(ctx: ConvertContext, x, beta: float, threshold: float):
    """torch's softplus: log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    bx = x if beta == 1.0 else ctx.emit("Mul", [x, _c(ctx, x, beta)])
    sp = ctx.emit("Softplus", [bx])
    if beta != 1.0:
        sp = ctx.emit("Div", [sp, _c(ctx, x, beta)])
    return ctx.emit("Where", [ctx.emit("Greater", [bx, _c(ctx, x, threshold)]), x, sp])


@converter("aten::softplus")
def _softplus_conv(ctx: ConvertContext, ins):
    x, beta, threshold = (list(ins) + [1.0, 20.0][len(ins) - 1:])[:3]
    return _softplus(ctx, _float_input(ctx, x, "softplus"), _float_const(ctx, beta, "beta"),
                     _float_const(ctx, threshold, "threshold"))


@converter("aten::mish", "aten::mish_")
def _mish(ctx: ConvertContext, ins):
    # x * tanh(log1p(exp(x))), with no threshold (as torch's kernel)
    x = _float_input(ctx, ins[0], "mish")
    return ctx.emit("Mul", [x, ctx.emit("Tanh", [ctx.emit("Softplus", [x])])])


@converter("aten::log_sigmoid")
def _log_sigmoid(ctx: ConvertContext, ins):
    x = _float_input(ctx, ins[0], "log_sigmoid")
    return ctx.emit("Neg", [ctx.emit("Softplus", [ctx.emit("Neg", [x])])])


@converter("aten::prelu")
def _prelu(ctx: ConvertContext, ins):
    x, w = ins
    x = _float_input(ctx, x, "prelu")
    r = ctx.rank_of(x)
    w = ctx.tensor(w, ctx.dtype_of(x))
    n = shape_of(ctx, w)
    if ctx.rank_of(w) != 1:
        raise ctx.error(f"prelu weights must be 1-D, got shape {n}")
    if n != [1]:
        if r < 2:
            raise ctx.error(f"prelu with {n[0]} weights needs an input with a channel dim (rank >= 2)")
        w = _channel_param(ctx, w, r)  # the weights apply along dim 1
    return ctx.emit("PRelu", [x, w])


@converter("aten::threshold", "aten::threshold_")
def _threshold(ctx: ConvertContext, ins):
    x, th, value = ins
    dt = ctx.dtype_of(x)
    return ctx.emit("Where", [ctx.emit("Greater", [x, _scalar(ctx, th, dt, "threshold")]), x,
                              _scalar(ctx, value, dt, "value")])


@converter("aten::hardshrink", "aten::softshrink")
def _shrink(ctx: ConvertContext, ins):
    x = _float_input(ctx, ins[0], ctx.node.kind())
    lambd = _float_const(ctx, ins[1], "lambd") if len(ins) > 1 else 0.5
    if lambd < 0:
        raise ctx.error(f"lambd must be non-negative, got {lambd}")
    bias = lambd if ctx.node.kind() == "aten::softshrink" else 0.0
    return ctx.emit("Shrink", [x], {"lambd": lambd, "bias": bias})


@converter("aten::glu")
def _glu(ctx: ConvertContext, ins):
    x = _float_input(ctx, ins[0], "glu")
    d = norm_dim(ctx, ins[1] if len(ins) > 1 else -1, ctx.rank_of(x))
    n = shape_of(ctx, x)[d]
    if not isinstance(n, int) or n % 2:
        raise ctx.error(f"glu needs dim {d} to have a static, even size, got {n}")
    a, b = emit_n(ctx, "Split", [x, axes([n // 2, n // 2])], {"axis": d}, 2)
    return ctx.emit("Mul", [a, ctx.emit("Sigmoid", [b])])


# ---- dropout (identity in evaluation)


@converter("aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_",
           "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout",
           "aten::feature_alpha_dropout_")
def _dropout(ctx: ConvertContext, ins):
    x, _p, train = ins
    if bool(ctx.const(train, "train")):
        raise ctx.error("dropout with train=True is random; only evaluation (train=False) is supported")
    return x


# ---- reductions


def _reduce_axes(ctx: ConvertContext, dims, rank: int):
    """Normalized reduction axes; None for all dims (dims None or [])."""
    if dims is None:
        return None
    dims = int_list(ctx, dims, "dim")
    if not dims:
        return None
    out = [norm_dim(ctx, d, rank) for d in dims]
    if len(set(out)) != len(out):
        raise ctx.error(f"dim {dims} lists a dim more than once")
    return out


def _reduce(ctx: ConvertContext, op: str, x, dims, keep):
    r = ctx.rank_of(x)
    ax = _reduce_axes(ctx, dims, r)
    if r == 0:
        return x
    keep = int(bool(ctx.const(keep, "keepdim")))
    return ctx.emit(op, [x, None if ax is None else axes(ax)], {"keepdims": keep})


@converter("aten::mean")
def _mean(ctx: ConvertContext, ins):
    x = ins[0]
    if len(ins) <= 2:  # mean(x, *, dtype)
        dims, keep, dtype = None, False, ins[1] if len(ins) > 1 else None
    else:
        dims, keep, dtype = ins[1], ins[2], ins[3] if len(ins) > 3 else None
    dtype = ctx.const(dtype, "dtype")
    if dtype is not None:
        x = ctx.tensor(x, TORCH_TO_CUVIL[SCALAR_TYPE_TO_TORCH[dtype]])
    _expect_float(ctx, x, "mean")
    return _reduce(ctx, "ReduceMean", x, dims, keep)


@converter("aten::amax", "aten::amin")
def _amax(ctx: ConvertContext, ins):
    x = ins[0]
    dims = ins[1] if len(ins) > 1 else []
    keep = ins[2] if len(ins) > 2 else False
    return _reduce(ctx, "ReduceMax" if ctx.node.kind() == "aten::amax" else "ReduceMin", x, dims, keep)


def _max_min(is_max: bool):
    reduce_op, arg_op, elem_op = ("ReduceMax", "ArgMax", "Max") if is_max else ("ReduceMin", "ArgMin", "Min")
    py = max if is_max else min

    def conv(ctx: ConvertContext, ins):
        x = ins[0]
        if isinstance(x, (list, tuple)):  # max(int[])
            return py(ctx.const(x, "the list"))
        if len(ins) == 1:  # over all elements
            return ctx.emit(reduce_op, [x], {"keepdims": 0}) if ctx.rank_of(x) else x
        other = ins[1]
        if len(ins) == 2 and not isinstance(other, int):  # max(x, other): elementwise
            return binary(ctx, elem_op, x, other)
        # max(x, dim, keepdim) -> (values, indices)
        r = ctx.rank_of(x)
        d = norm_dim(ctx, other, r)
        keep = int(bool(ctx.const(ins[2], "keepdim"))) if len(ins) > 2 else 0
        if r == 0:
            return x, np.array(0, np.int64)
        values = ctx.emit(reduce_op, [x, axes([d])], {"keepdims": keep})
        indices = ctx.emit(arg_op, [x], {"axis": d, "keepdims": keep}) if _uses(ctx, 1) else None
        return values, indices
    return conv


@converter("aten::argmax", "aten::argmin")
def _argmax(ctx: ConvertContext, ins):
    x, dim, keep = (list(ins) + [None, False][len(ins) - 1:])[:3]
    op = "ArgMax" if ctx.node.kind() == "aten::argmax" else "ArgMin"
    keep = int(bool(ctx.const(keep, "keepdim")))
    dim = ctx.const(dim, "dim")
    r = ctx.rank_of(x)
    if dim is None:  # the position in the flattened tensor (the first of ties, as torch picks)
        out = ctx.emit(op, [reshape(ctx, x, [-1])], {"axis": 0, "keepdims": 0})
        return reshape(ctx, out, [1] * r) if keep else out  # keepdim: every dim 1, as torch 1.13 returns
    if r == 0:
        return np.array(0, np.int64)
    return ctx.emit(op, [x], {"axis": norm_dim(ctx, dim, r), "keepdims": keep})


converter("aten::max")(_max_min(True))
converter("aten::min")(_max_min(False))


@converter("aten::maximum", "aten::minimum")
def _maximum(ctx: ConvertContext, ins):
    return binary(ctx, "Max" if ctx.node.kind() == "aten::maximum" else "Min", ins[0], ins[1])


# ---- classification losses

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _class_loss(ctx: ConvertContext, op: str, x, target, w, reduction, ignore_index):
    """SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss over class indices: input [N, C, d...] or unbatched
    [C] (target [N, d...] or a scalar), torch's reduction enum and ignore_index (every target equal to it is
    skipped, as in ONNX when set)."""
    _expect_float(ctx, x, op)
    if ctx.dtype_of(target) not in ("i64", "i32"):
        raise ctx.error(f"{op}: the target must hold class indices (int64); class probabilities "
                        f"(a {ctx.dtype_of(target)} target) are not supported")
    red = _REDUCTIONS.get(ctx.const(reduction, "reduction"))
    if red is None:
        raise ctx.error(f"{op}: unknown reduction {ctx.const(reduction)}")
    attrs = {"reduction": red, "ignore_index": int(ctx.const(ignore_index, "ignore_index"))}
    unbatched = ctx.rank_of(x) == 1
    if unbatched:  # [C] with a scalar target: a batch of one
        x = reshape(ctx, x, [1] + shape_of(ctx, x))
        target = reshape(ctx, target, [1])
    ins = [x, target] + ([ctx.tensor(w, ctx.dtype_of(x))] if w is not None else [])
    y = ctx.emit(op, ins, attrs)
    return reshape(ctx, y, []) if unbatched and red == "none" else y


@converter("aten::cross_entropy_loss")
def _cross_entropy(ctx: ConvertContext, ins):
    x, target, w, reduction, ignore_index, smoothing = (list(ins) + [None, 1, -100, 0.0][len(ins) - 2:])[:6]
    if _float_const(ctx, smoothing, "label_smoothing") != 0:
        raise ctx.error("cross_entropy with label_smoothing is not supported")
    return _class_loss(ctx, "SoftmaxCrossEntropyLoss", x, target, w, reduction, ignore_index)


@converter("aten::nll_loss", "aten::nll_loss2d", "aten::nll_loss_nd")
def _nll_loss(ctx: ConvertContext, ins):
    x, target, w, reduction, ignore_index = (list(ins) + [None, 1, -100][len(ins) - 2:])[:5]
    return _class_loss(ctx, "NegativeLogLikelihoodLoss", x, target, w, reduction, ignore_index)


# ---- clamp


@converter("aten::clamp", "aten::clamp_", "aten::clip", "aten::clip_")
def _clamp(ctx: ConvertContext, ins):
    x, lo, hi = (list(ins) + [None, None][len(ins) - 1:])[:3]
    return _clamp_impl(ctx, x, lo, hi)


@converter("aten::clamp_min", "aten::clamp_min_")
def _clamp_min(ctx: ConvertContext, ins):
    return _clamp_impl(ctx, ins[0], ins[1], None)


@converter("aten::clamp_max", "aten::clamp_max_")
def _clamp_max(ctx: ConvertContext, ins):
    return _clamp_impl(ctx, ins[0], None, ins[1])


def _clamp_impl(ctx: ConvertContext, x, lo, hi):
    if lo is None and hi is None:
        raise ctx.error("clamp needs at least one of min and max")
    dt = result_dtype(ctx, x, *[v for v in (lo, hi) if v is not None])
    x = ctx.tensor(x, dt)
    if all(v is None or isinstance(v, (int, float)) for v in (lo, hi)):
        return _clip(ctx, x, lo, hi)
    # tensor bounds broadcast: min(max(x, lo), hi) (as torch, hi wins where lo > hi)
    if lo is not None:
        x = ctx.emit("Max", [x, ctx.tensor(lo, dt)])
    if hi is not None:
        x = ctx.emit("Min", [x, ctx.tensor(hi, dt)])
    return x


# ---- padding


def _onnx_pads(ctx: ConvertContext, x, pad) -> list:
    """torch's pad list (last dim first, (begin, end) pairs) as ONNX pads (all begins, then all ends)."""
    pad = int_list(ctx, pad, "pad")
    r = ctx.rank_of(x)
    if len(pad) % 2 or len(pad) // 2 > r:
        raise ctx.error(f"the pad list {pad} must have an even length of at most 2 * rank ({2 * r})")
    begins, ends = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        begins[r - 1 - i], ends[r - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return begins + ends


def _pad(ctx: ConvertContext, x, pad, mode: str, value=None):
    pads = _onnx_pads(ctx, x, pad)
    if not any(pads):
        return x
    r = ctx.rank_of(x)
    if mode == "constant":
        v = 0 if value is None else ctx.const(value, "value")
        return ctx.emit("Pad", [x, axes(pads), _scalar(ctx, v, ctx.dtype_of(x), "value")], {"mode": "constant"})
    if value is not None and ctx.const(value, "value") not in (None, 0, 0.0):
        raise ctx.error(f"padding mode '{mode}' does not take a fill value")
    if any(p < 0 for p in pads):
        raise ctx.error(f"negative padding {int_list(ctx, pad, 'pad')} is not supported in mode '{mode}'")
    shape = shape_of(ctx, x)
    if mode == "reflect":
        for d in range(r):
            if isinstance(shape[d], int) and (pads[d] or pads[r + d]) and max(pads[d], pads[r + d]) >= shape[d]:
                raise ctx.error(f"reflection padding {max(pads[d], pads[r + d])} must be smaller than the input "
                                f"size {shape[d]} of dim {d}")
        return ctx.emit("Pad", [x, axes(pads)], {"mode": "reflect"})
    if mode in ("replicate", "edge"):
        return ctx.emit("Pad", [x, axes(pads)], {"mode": "edge"})
    if mode == "circular":
        # Wrap around one dim at a time: [x[-b:], x, x[:e]] (corners come out right, indices are modular per dim).
        for d in range(r):
            b, e = pads[d], pads[r + d]
            if isinstance(shape[d], int) and max(b, e) > shape[d]:
                raise ctx.error(f"circular padding {max(b, e)} wraps around dim {d} of size {shape[d]} more than once")
            parts = []
            if b:
                parts.append(ctx.emit("Slice", [x, axes([-b]), axes([INT64_MAX]), axes([d])]))
            parts.append(x)
            if e:
                parts.append(ctx.emit("Slice", [x, axes([0]), axes([e]), axes([d])]))
            if len(parts) > 1:
                x = ctx.emit("Concat", parts, {"axis": d})
        return x
    raise ctx.error(f"padding mode {mode!r} is not supported (constant, reflect, replicate, circular)")


@converter("aten::constant_pad_nd")
def _constant_pad_nd(ctx: ConvertContext, ins):
    return _pad(ctx, ins[0], ins[1], "constant", ins[2] if len(ins) > 2 else 0)


@converter("aten::pad")
def _pad_conv(ctx: ConvertContext, ins):
    x, pad, mode, value = (list(ins) + ["constant", None][len(ins) - 2:])[:4]
    return _pad(ctx, x, pad, ctx.const(mode, "mode"), value)


for _n in (1, 2, 3):
    converter(f"aten::reflection_pad{_n}d")(lambda ctx, ins: _pad(ctx, ins[0], ins[1], "reflect"))
    converter(f"aten::replication_pad{_n}d")(lambda ctx, ins: _pad(ctx, ins[0], ins[1], "replicate"))


@converter("aten::_pad_circular")
def _pad_circular(ctx: ConvertContext, ins):
    return _pad(ctx, ins[0], ins[1], "circular")
