"""Shape and data-movement converters: view/reshape/flatten, permute/transpose, squeeze/unsqueeze, cat/stack,
chunk/split/unbind, slice/select/narrow, expand/repeat, channel_shuffle, aten::dim.

Sizes stay symbolic where they can: a dim that is static is a Python int, a dynamic one (e.g. the batch) is read at
run time with Shape/Gather, and size lists that mix the two become Concat'ed i64 tensors. Shape inference follows
those values, so Reshape(x, [batch, 512]) still types as [batch, 512].
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .context import ConvertContext, converter
from .. import _C
from .aten_core import result_dtype

# Ends at or past this mean "to the end of the axis" (what torch passes for a missing end).
INT64_MAX = 2 ** 63 - 1


# ---- helpers shared with aten_nn.py


def norm_dim(ctx: ConvertContext, d, rank: int, what: str = "dim") -> int:
    """A constant dim in [0, rank) (torch's wrapping: a scalar accepts -1 and 0 as if it had rank 1)."""
    d = ctx.const(d, what)
    if not isinstance(d, int) or isinstance(d, bool):
        raise ctx.error(f"{what} must be an int, got {d!r}")
    n = max(rank, 1)
    if not -n <= d < n:
        raise ctx.error(f"{what} {d} is out of range for a tensor of rank {rank} (expected [{-n}, {n - 1}])")
    return d + n if d < 0 else d


def shape_of(ctx: ConvertContext, x) -> list:
    """x's dims as known when compiling: ints, or strings for symbolic dims."""
    if ctx.is_value(x):
        if x.shape is None:
            raise ctx.error("the rank of this input is unknown when compiling")
        return list(x.shape)
    if hasattr(x, "shape"):
        return list(x.shape)
    return []


def dims_of(ctx: ConvertContext, x) -> list:
    """x's dims: Python ints where static, 0-d i64 Values (read from Shape(x) at run time) where symbolic."""
    dims = shape_of(ctx, x)
    if all(isinstance(d, int) for d in dims):
        return dims
    shape = ctx.emit("Shape", [x])
    return [d if isinstance(d, int) else ctx.emit("Gather", [shape, np.array(i, np.int64)], {"axis": 0})
            for i, d in enumerate(dims)]


def static_dim(ctx: ConvertContext, x, d: int, why: str) -> int:
    """Dim d of x, which must be known when compiling (`why` says what needs it)."""
    dim = shape_of(ctx, x)[d]
    if not isinstance(dim, int):
        raise ctx.error(f"{why} needs dim {d} to be static, but it is symbolic ('{dim}')")
    return dim


def product(ctx: ConvertContext, dims: list):
    """The product of ints and 0-d i64 Values: an int when all are static."""
    static = 1
    dynamic = None
    for d in dims:
        if isinstance(d, int):
            static *= d
        else:
            dynamic = d if dynamic is None else ctx.emit("Mul", [dynamic, d])
    if dynamic is None:
        return static
    return dynamic if static == 1 else ctx.emit("Mul", [dynamic, np.array(static, np.int64)])


def size_tensor(ctx: ConvertContext, dims: list):
    """A list of ints and 0-d/1-element run-time ints as a 1-D i64 tensor: one constant when all are static,
    else a Concat in which each run of static ints is a single constant."""
    if all(isinstance(d, int) for d in dims):
        return np.array(dims, np.int64).reshape(len(dims))
    parts, run = [], []
    for d in dims:
        if isinstance(d, int):
            run.append(d)
            continue
        if run:
            parts.append(np.array(run, np.int64))
            run = []
        v = ctx.tensor(d, "i64")
        if v.shape != [1]:
            v = ctx.emit("Reshape", [v, np.array([1], np.int64)])
        parts.append(v)
    if run:
        parts.append(np.array(run, np.int64))
    return parts[0] if len(parts) == 1 else ctx.emit("Concat", parts, {"axis": 0})


def reshape(ctx: ConvertContext, x, dims: list):
    """Reshape with torch's meaning of the size list (0 is an empty dim, not "copy the input's dim")."""
    if all(isinstance(d, int) for d in dims) and shape_of(ctx, x) == list(dims):
        return x
    return ctx.emit("Reshape", [x, size_tensor(ctx, list(dims))], {"allowzero": 1})


def int_list(ctx: ConvertContext, v, what: str) -> list:
    """A constant int list argument (a single int counts as a list of one)."""
    v = ctx.const(v, what)
    if isinstance(v, int):
        return [v]
    return list(v)


def axes(values) -> np.ndarray:
    return np.array(list(values), np.int64)


def emit_n(ctx: ConvertContext, op: str, inputs: list, attrs: dict, n: int) -> list:
    """ctx.emit for a node with n > 1 outputs, as a list. Each output gets its own name hint: GraphBuilder.add_node
    derives every output's name from the hint "t" and gives them all "t" while no value has that name yet."""
    file, line, stack = ctx.source()
    ins = [None if x is None else ctx.tensor(x) for x in inputs]
    try:
        return list(ctx.builder.add_node(op, ins, n, attrs, file, line, "", [f"{op.lower()}{k}" for k in range(n)],
                                         stack=stack))
    except (_C.Error, ValueError) as e:
        raise ctx.error(str(e)) from None


# ---- view / reshape / flatten


@converter("aten::view", "aten::reshape", "aten::_reshape_alias")
def _view(ctx: ConvertContext, ins):
    x, size = ins[0], ins[1]
    if not isinstance(size, (list, tuple)):
        # aten::view.dtype reinterprets bits: not a shape operation
        raise ctx.error(f"view with a {type(size).__name__} argument (a dtype view) is not supported")
    if sum(1 for d in size if isinstance(d, int) and d == -1) > 1:
        raise ctx.error(f"only one dimension can be inferred (-1) in the size {size}")
    return reshape(ctx, x, list(size))


@converter("aten::view_as", "aten::reshape_as")
def _view_as(ctx: ConvertContext, ins):
    return reshape(ctx, ins[0], dims_of(ctx, ins[1]))


@converter("aten::flatten")
def _flatten(ctx: ConvertContext, ins):
    x = ins[0]
    start = ins[1] if len(ins) > 1 else 0
    end = ins[2] if len(ins) > 2 else -1
    r = ctx.rank_of(x)
    if r == 0:
        return reshape(ctx, x, [1])
    s, e = norm_dim(ctx, start, r, "start_dim"), norm_dim(ctx, end, r, "end_dim")
    if s > e:
        raise ctx.error(f"start_dim {ctx.const(start)} comes after end_dim {ctx.const(end)}")
    if s == e:
        return x
    dims = dims_of(ctx, x)
    return reshape(ctx, x, dims[:s] + [product(ctx, dims[s:e + 1])] + dims[e + 1:])


@converter("aten::unflatten")
def _unflatten(ctx: ConvertContext, ins):
    x, dim, sizes = ins[0], ins[1], ctx.const(ins[2], "sizes")
    r = ctx.rank_of(x)
    d = norm_dim(ctx, dim, r)
    if not sizes:
        raise ctx.error("unflatten needs a non-empty sizes list")
    if sizes.count(-1) > 1:
        raise ctx.error(f"only one dimension can be inferred (-1) in the sizes {sizes}")
    dims = dims_of(ctx, x)
    if -1 in sizes:
        # Resolve -1 against the unflattened dim itself, so another dynamic dim elsewhere stays exact.
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        inner = dims[d]
        fill = inner // known if isinstance(inner, int) else ctx.emit("Div", [inner, np.array(known, np.int64)])
        sizes = [fill if s == -1 else s for s in sizes]
    return reshape(ctx, x, dims[:d] + list(sizes) + dims[d + 1:])


@converter("aten::contiguous", "aten::clone", "aten::detach", "aten::alias")
def _identity(ctx: ConvertContext, ins):
    # Values have no layout or aliasing in Cuvil (remove_mutation already turned in-place updates into copies).
    return ins[0]


@converter("aten::dim")
def _dim(ctx: ConvertContext, ins):
    return ctx.rank_of(ins[0])


# ---- permutations


def _transpose_perm(ctx: ConvertContext, x, perm: list):
    if perm == list(range(len(perm))):
        return x
    return ctx.emit("Transpose", [x], {"perm": perm})


@converter("aten::permute")
def _permute(ctx: ConvertContext, ins):
    x, dims = ins[0], ctx.const(ins[1], "dims")
    r = ctx.rank_of(x)
    if len(dims) != r:
        raise ctx.error(f"permute got {len(dims)} dims {dims} for a tensor of rank {r}")
    perm = [norm_dim(ctx, d, r) for d in dims]
    if len(set(perm)) != r:
        raise ctx.error(f"permute dims {dims} repeat a dim")
    return _transpose_perm(ctx, x, perm)


@converter("aten::transpose", "aten::transpose_", "aten::swapaxes", "aten::swapdims")
def _transpose(ctx: ConvertContext, ins):
    x = ins[0]
    r = ctx.rank_of(x)
    a, b = norm_dim(ctx, ins[1], r, "dim0"), norm_dim(ctx, ins[2], r, "dim1")
    if r < 2:
        return x
    perm = list(range(r))
    perm[a], perm[b] = perm[b], perm[a]
    return _transpose_perm(ctx, x, perm)


@converter("aten::t", "aten::t_")
def _t(ctx: ConvertContext, ins):
    x = ins[0]
    r = ctx.rank_of(x)
    if r > 2:
        raise ctx.error(f"t() expects a tensor with <= 2 dims, got rank {r}")
    return x if r < 2 else _transpose_perm(ctx, x, [1, 0])


@converter("aten::movedim", "aten::moveaxis")
def _movedim(ctx: ConvertContext, ins):
    x = ins[0]
    r = ctx.rank_of(x)
    src = [norm_dim(ctx, d, r, "source") for d in int_list(ctx, ins[1], "source")]
    dst = [norm_dim(ctx, d, r, "destination") for d in int_list(ctx, ins[2], "destination")]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ctx.error(f"movedim needs as many distinct source dims as destination dims, got {src} and {dst}")
    perm: list[Optional[int]] = [None] * r
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(r) if i not in src)
    perm = [p if p is not None else next(rest) for p in perm]
    return _transpose_perm(ctx, x, perm)


# ---- squeeze / unsqueeze


@converter("aten::unsqueeze", "aten::unsqueeze_")
def _unsqueeze(ctx: ConvertContext, ins):
    x = ins[0]
    d = norm_dim(ctx, ins[1], ctx.rank_of(x) + 1)
    return ctx.emit("Unsqueeze", [x, axes([d])])


@converter("aten::squeeze", "aten::squeeze_")
def _squeeze(ctx: ConvertContext, ins):
    x = ins[0]
    shape = shape_of(ctx, x)
    r = len(shape)
    if len(ins) == 1:
        if all(isinstance(d, int) for d in shape):
            ones = [i for i, d in enumerate(shape) if d == 1]
            return ctx.emit("Squeeze", [x, axes(ones)]) if ones else x
        # Whether a symbolic dim is 1 is decided at run time: Squeeze without axes does exactly that (the output
        # rank is then unknown when compiling).
        return ctx.emit("Squeeze", [x])
    d = norm_dim(ctx, ins[1], r)
    if r == 0:
        return x
    if isinstance(shape[d], int):
        return ctx.emit("Squeeze", [x, axes([d])]) if shape[d] == 1 else x
    # A symbolic dim is removed only when it is 1 at run time: keep every dim but that one where it is 1.
    sizes = ctx.emit("Shape", [x])
    size_d = ctx.emit("Slice", [sizes, axes([d]), axes([d + 1])])
    keep_d = ctx.emit("Not", [ctx.emit("Equal", [size_d, np.array([1], np.int64)])])
    parts = ([np.ones((d,), np.bool_)] if d else []) + [keep_d] + \
        ([np.ones((r - d - 1,), np.bool_)] if d < r - 1 else [])
    mask = parts[0] if len(parts) == 1 else ctx.emit("Concat", parts, {"axis": 0})
    return ctx.emit("Reshape", [x, ctx.emit("Compress", [sizes, mask], {"axis": 0})], {"allowzero": 1})


# ---- cat / stack


def _tensor_list(ctx: ConvertContext, tensors, what: str) -> list:
    if not isinstance(tensors, (list, tuple)):
        raise ctx.error(f"{what} of a tensor list computed at run time is not supported")
    if not tensors:
        raise ctx.error(f"{what} needs at least one tensor")
    return list(tensors)


@converter("aten::cat", "aten::concat", "aten::concatenate")
def _cat(ctx: ConvertContext, ins):
    tensors = _tensor_list(ctx, ins[0], "cat")
    dim = ins[1] if len(ins) > 1 else 0
    # torch skips legacy empty 1-D tensors (shape [0]) when other inputs have another rank
    ranks = [ctx.rank_of(t) for t in tensors]
    legacy = [r == 1 and shape_of(ctx, t) == [0] for t, r in zip(tensors, ranks)]
    kept = [t for t, skip in zip(tensors, legacy) if not skip] or tensors[:1]
    rank = ctx.rank_of(kept[0])
    if rank == 0:
        raise ctx.error("zero-dimensional tensors cannot be concatenated")
    d = norm_dim(ctx, dim, rank)
    dt = result_dtype(ctx, *kept)
    vals = [ctx.tensor(t, dt) for t in kept]
    return vals[0] if len(vals) == 1 else ctx.emit("Concat", vals, {"axis": d})


@converter("aten::stack")
def _stack(ctx: ConvertContext, ins):
    tensors = _tensor_list(ctx, ins[0], "stack")
    dim = ins[1] if len(ins) > 1 else 0
    d = norm_dim(ctx, dim, ctx.rank_of(tensors[0]) + 1)
    dt = result_dtype(ctx, *tensors)
    parts = [ctx.emit("Unsqueeze", [ctx.tensor(t, dt), axes([d])]) for t in tensors]
    return parts[0] if len(parts) == 1 else ctx.emit("Concat", parts, {"axis": d})


# ---- chunk / split / unbind


def _split(ctx: ConvertContext, x, d: int, sizes: list) -> list:
    if len(sizes) == 1:
        return [x]
    return emit_n(ctx, "Split", [x, axes(sizes)], {"axis": d}, len(sizes))


@converter("aten::chunk")
def _chunk(ctx: ConvertContext, ins):
    x, chunks = ins[0], ctx.const(ins[1], "chunks")
    dim = ins[2] if len(ins) > 2 else 0
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    if chunks <= 0:
        raise ctx.error(f"chunk expects `chunks` to be greater than 0, got {chunks}")
    n = static_dim(ctx, x, d, "chunk (the number of chunks depends on the size)")
    size = -(-n // chunks) if n else 0
    if size == 0:
        return [x] if n == 0 else []
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split(ctx, x, d, sizes)


@converter("aten::split", "aten::split_with_sizes", "aten::unsafe_split", "aten::unsafe_split_with_sizes")
def _split_conv(ctx: ConvertContext, ins):
    x, spec = ins[0], ctx.const(ins[1], "split_size")
    dim = ins[2] if len(ins) > 2 else 0
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    if isinstance(spec, (list, tuple)):
        sizes = list(spec)
        if any(s < 0 for s in sizes):
            raise ctx.error(f"split sizes must be non-negative, got {sizes}")
        n = shape_of(ctx, x)[d]
        if isinstance(n, int) and sum(sizes) != n:
            raise ctx.error(f"split sizes {sizes} add up to {sum(sizes)}, but dim {d} has size {n}")
        return _split(ctx, x, d, sizes)
    n = static_dim(ctx, x, d, "split with a split_size (the number of parts depends on the size)")
    if spec <= 0:
        if spec == 0 and n == 0:
            return [x]
        raise ctx.error(f"split_size must be positive, got {spec}")
    sizes = [spec] * (n // spec) + ([n % spec] if n % spec else [])
    return _split(ctx, x, d, sizes or [0])


@converter("aten::unbind")
def _unbind(ctx: ConvertContext, ins):
    x = ins[0]
    dim = ins[1] if len(ins) > 1 else 0
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    n = static_dim(ctx, x, d, "unbind (the number of outputs depends on the size)")
    return [ctx.emit("Gather", [x, np.array(i, np.int64)], {"axis": d}) for i in range(n)]


# ---- slicing and indexing


def _index_value(ctx: ConvertContext, v):
    """A start/end/index: a Python int, or a 0-d/1-element run-time value as i64."""
    return v if isinstance(v, int) else ctx.tensor(v, "i64")


@converter("aten::slice")
def _slice(ctx: ConvertContext, ins):
    if isinstance(ins[0], (list, tuple)):  # aten::slice.t: slicing a Python list
        seq, start, end, step = list(ins) + [None, None, 1][len(ins) - 1:]
        s, e, st = (ctx.const(v, "the slice bounds") for v in (start, end, step))
        return list(seq[slice(s, e, st)])
    x = ins[0]
    dim, start, end, step = (list(ins[1:]) + [0, None, None, 1][len(ins) - 1:])[:4]
    r = ctx.rank_of(x)
    d = norm_dim(ctx, dim, r)
    step = ctx.const(step, "step")
    if step <= 0:
        raise ctx.error(f"slice step must be positive, got {step}")
    start = 0 if start is None else _index_value(ctx, start)
    end = INT64_MAX if end is None else _index_value(ctx, end)
    if isinstance(start, int) and isinstance(end, int) and step == 1:
        n = shape_of(ctx, x)[d]
        if start == 0 and (end >= INT64_MAX // 2 or (isinstance(n, int) and end >= n)):
            return x  # the whole axis: x[:, :] and friends
    return ctx.emit("Slice", [x, size_tensor(ctx, [start]), size_tensor(ctx, [end]), axes([d]), axes([step])])


@converter("aten::select")
def _select(ctx: ConvertContext, ins):
    x, dim, index = ins
    if isinstance(x, (list, tuple)):  # aten::select.t: list indexing
        return x[ctx.const(index, "the index")]
    r = ctx.rank_of(x)
    if r == 0:
        raise ctx.error("select() cannot be applied to a 0-dim tensor")
    d = norm_dim(ctx, dim, r)
    if isinstance(index, int):
        n = shape_of(ctx, x)[d]
        if isinstance(n, int) and not -n <= index < n:
            raise ctx.error(f"index {index} is out of range for dim {d} of size {n}")
        idx = np.array(index, np.int64)
    else:
        idx = ctx.tensor(index, "i64")
        if idx.shape not in ([], None):
            idx = ctx.emit("Reshape", [idx, np.zeros((0,), np.int64)])
    return ctx.emit("Gather", [x, idx], {"axis": d})


@converter("aten::narrow")
def _narrow(ctx: ConvertContext, ins):
    x, dim, start, length = ins
    d = norm_dim(ctx, dim, ctx.rank_of(x))
    length = ctx.const(length, "length")
    if length < 0:
        raise ctx.error(f"narrow length must be non-negative, got {length}")
    start = _index_value(ctx, start)
    if isinstance(start, int):
        n = shape_of(ctx, x)[d]
        if start < 0:
            if not isinstance(n, int):
                raise ctx.error(f"narrow with a negative start needs dim {d} to be static")
            start += n
        if isinstance(n, int) and start + length > n:
            raise ctx.error(f"start ({start}) + length ({length}) exceeds dimension size ({n})")
        end = start + length
    else:
        if start.shape not in ([], None):
            start = ctx.emit("Reshape", [start, np.zeros((0,), np.int64)])
        end = ctx.emit("Add", [start, np.array(length, np.int64)])
    return ctx.emit("Slice", [x, size_tensor(ctx, [start]), size_tensor(ctx, [end]), axes([d])])


# ---- expand / repeat


@converter("aten::expand")
def _expand(ctx: ConvertContext, ins):
    x, size = ins[0], list(ins[1])
    r = ctx.rank_of(x)
    if len(size) < r:
        raise ctx.error(f"the expanded size {size} has fewer dims than the tensor (rank {r})")
    lead = len(size) - r
    target = []
    for i, s in enumerate(size):
        if isinstance(s, int) and s == -1:
            if i < lead:
                raise ctx.error(f"the expanded size {size} uses -1 for a new leading dim")
            target.append(1)  # broadcasting against 1 keeps x's own dim, symbolic or not
        else:
            target.append(s)
    return ctx.emit("Expand", [x, size_tensor(ctx, target)])


@converter("aten::expand_as")
def _expand_as(ctx: ConvertContext, ins):
    x, other = ins
    if shape_of(ctx, x) == shape_of(ctx, other) and all(isinstance(d, int) for d in shape_of(ctx, x)):
        return x
    return ctx.emit("Expand", [x, ctx.emit("Shape", [other])])


@converter("aten::repeat")
def _repeat(ctx: ConvertContext, ins):
    x, reps = ins[0], list(ins[1])
    r = ctx.rank_of(x)
    if len(reps) < r:
        raise ctx.error(f"repeat got {len(reps)} repeats for a tensor of rank {r}; it needs at least {r}")
    if len(reps) > r:  # new leading dims
        x = ctx.emit("Unsqueeze", [x, axes(range(len(reps) - r))])
    if all(isinstance(v, int) and v == 1 for v in reps):
        return x
    return ctx.emit("Tile", [x, size_tensor(ctx, reps)])


# ---- channel rearrangements


@converter("aten::channel_shuffle", "aten::native_channel_shuffle")
def _channel_shuffle(ctx: ConvertContext, ins):
    x, groups = ins[0], ctx.const(ins[1], "groups")
    if ctx.rank_of(x) < 3:
        raise ctx.error(f"channel_shuffle expects a tensor with at least 3 dims, got rank {ctx.rank_of(x)}")
    c = static_dim(ctx, x, 1, "channel_shuffle")
    if groups <= 0 or c % groups:
        raise ctx.error(f"channel_shuffle: {c} channels are not divisible into {groups} groups")
    dims = dims_of(ctx, x)
    y = reshape(ctx, x, [dims[0], groups, c // groups] + dims[2:])
    perm = list(range(len(dims) + 1))
    perm[1], perm[2] = 2, 1
    y = ctx.emit("Transpose", [y], {"perm": perm})
    return reshape(ctx, y, dims)


@converter("aten::pixel_shuffle", "aten::pixel_unshuffle")
def _pixel_shuffle(ctx: ConvertContext, ins):
    x, f = ins[0], ctx.const(ins[1], "the factor")
    r = ctx.rank_of(x)
    if r < 3:
        raise ctx.error(f"{ctx.node.kind()} expects a tensor with at least 3 dims, got rank {r}")
    dims = dims_of(ctx, x)
    lead, (c, h, w) = dims[:-3], dims[-3:]
    nl = len(lead)
    if ctx.node.kind() == "aten::pixel_shuffle":
        c = static_dim(ctx, x, r - 3, "pixel_shuffle")
        if c % (f * f):
            raise ctx.error(f"pixel_shuffle: {c} channels are not divisible by upscale_factor^2 = {f * f}")
        y = reshape(ctx, x, lead + [c // (f * f), f, f, h, w])
        # [.., oc, f1, f2, h, w] -> [.., oc, h, f1, w, f2]
        perm = list(range(nl)) + [nl + i for i in (0, 3, 1, 4, 2)]
        y = ctx.emit("Transpose", [y], {"perm": perm})
        return reshape(ctx, y, lead + [c // (f * f), product(ctx, [h, f]), product(ctx, [w, f])])
    h, w = static_dim(ctx, x, r - 2, "pixel_unshuffle"), static_dim(ctx, x, r - 1, "pixel_unshuffle")
    if h % f or w % f:
        raise ctx.error(f"pixel_unshuffle: spatial size {h}x{w} is not divisible by downscale_factor {f}")
    y = reshape(ctx, x, lead + [c, h // f, f, w // f, f])
    # [.., c, oh, f1, ow, f2] -> [.., c, f1, f2, oh, ow]
    perm = list(range(nl)) + [nl + i for i in (0, 2, 4, 1, 3)]
    y = ctx.emit("Transpose", [y], {"perm": perm})
    return reshape(ctx, y, lead + [product(ctx, [c, f * f]), h // f, w // f])
