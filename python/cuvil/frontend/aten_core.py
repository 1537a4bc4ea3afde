"""Core converters: prim:: list/tuple plumbing, scalars and shapes, arithmetic, and a first set of NN ops."""
from __future__ import annotations

import math

import numpy as np
import torch

from .context import CATEGORY, SCALAR_TYPE_TO_TORCH, TORCH_TO_CUVIL, ConvertContext, converter, onnx_dtype_id

# ---- prim:: plumbing


@converter("prim::ListConstruct", "prim::TupleConstruct")
def _list_construct(ctx: ConvertContext, ins):
    if ctx.node.kind() == "prim::TupleConstruct":
        return tuple(ins)
    return note_list(ctx, list(ins))


# Lists are mutable in TorchScript: aten::append changes the list every later use sees, which converting in program
# order reproduces by appending to the Python list -- but only where the list was made in the region being built.
# A region converted once for a run-time If or Loop must not mutate a list from outside it.


def note_list(ctx: ConvertContext, lst: list) -> list:
    """Records that `lst` was made in the region being built now; returns it."""
    ctx.list_regions[id(lst)] = (lst, ctx.builder)
    return lst


def list_made_here(ctx: ConvertContext, lst) -> bool:
    entry = ctx.list_regions.get(id(lst))
    return entry is not None and entry[0] is lst and entry[1] is ctx.builder


@converter("prim::ListUnpack", "prim::TupleUnpack")
def _list_unpack(ctx: ConvertContext, ins):
    seq = ins[0]
    if not isinstance(seq, (list, tuple)):
        raise ctx.error("unpacking a list computed at run time is not supported")
    return tuple(seq)


@converter("prim::TupleIndex", "aten::__getitem__")
def _getitem(ctx: ConvertContext, ins):
    seq, idx = ins
    return seq[ctx.const(idx, "the index")]


@converter("aten::size")
def _size(ctx: ConvertContext, ins):
    x = ins[0]
    shape = ctx.emit("Shape", [x])
    if len(ins) == 1:
        return [_dim(ctx, x, shape, d) for d in range(ctx.rank_of(x))]
    return _dim(ctx, x, shape, ctx.const(ins[1], "the dim"))


def _dim(ctx: ConvertContext, x, shape, d: int):
    """Dim d of x: a Python int when static, else a 0-d i64 tensor."""
    dims = x.shape
    if d < 0:
        d += len(dims)
    if isinstance(dims[d], int):
        return dims[d]
    g = ctx.emit("Gather", [shape, np.array(d, np.int64)], {"axis": 0})
    note_symbol(ctx, g, dims[d])
    return g


# ---- symbolic dims of run-time ints
# A run-time int read from a symbolic dim (x.size(0) of x: f32[batch, ...]) remembers the dim's expression, so that
# shape checks comparing such ints (e.g. nn.MultiheadAttention's asserts) fold when compiling.


def note_symbol(ctx: ConvertContext, v, sym: str) -> None:
    ctx.dim_symbols[id(v)] = (v, sym)  # keeps v alive, so its id stays its own


def symbol_of(ctx: ConvertContext, x):
    """A Python int as itself, a noted run-time dim as its symbol (a str), anything else as None."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if ctx.is_value(x):
        if x.is_constant and x.shape == [] and x.dtype in ("i64", "i32"):
            return int(ctx.constant_data(x, "an int"))
        entry = ctx.dim_symbols.get(id(x))
        if entry is not None and entry[0] is x:
            return entry[1]
    return None


def static_equal(ctx: ConvertContext, a, b):
    """a == b for ints (static or noted symbolic dims) and lists/tuples of them, when decidable while compiling:
    True, False, or None (only known at run time)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return False
        results = [static_equal(ctx, x, y) for x, y in zip(a, b)]
        if any(r is False for r in results):
            return False
        return True if all(r is True for r in results) else None
    sa, sb = symbol_of(ctx, a), symbol_of(ctx, b)
    if sa is None or sb is None:
        return None
    if sa == sb:
        return True
    return False if isinstance(sa, int) and isinstance(sb, int) else None


@converter("prim::NumToTensor", "aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit")
def _scalar(ctx: ConvertContext, ins):
    x = ins[0]
    kind = ctx.node.kind()
    target = {"aten::Int": "i64", "aten::Float": "f32", "aten::Bool": "bool"}.get(kind)
    if not ctx.is_value(x):
        if target == "i64":
            return int(x)
        if target == "f32":
            return float(x)
        if target == "bool":
            return bool(x)
        return x
    if target is not None and x.dtype != target:
        x = ctx.emit("Cast", [x], {"to": onnx_dtype_id(target)})
    if x.shape not in ([], None) and kind != "prim::NumToTensor":
        x = ctx.emit("Reshape", [x, np.zeros((0,), np.int64)])
    return x


# ---- arithmetic with PyTorch's type promotion


_ORDER = ["bool", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]


def result_dtype(ctx: ConvertContext, *xs) -> str:
    """torch.result_type for tensors, 0-d tensors and Python scalars (dimensioned tensors win within a
    category; a higher category from a scalar gives the default dtype of that category)."""
    tensors = [x for x in xs if ctx.is_value(x) or isinstance(x, torch.Tensor)]
    scalars = [x for x in xs if not (ctx.is_value(x) or isinstance(x, torch.Tensor)) and x is not None]
    dimmed = [ctx.dtype_of(t) for t in tensors if ctx.rank_of(t) > 0]
    zero_d = [ctx.dtype_of(t) for t in tensors if ctx.rank_of(t) == 0]

    def best(ds):
        return max(ds, key=lambda d: (CATEGORY[d], _ORDER.index(d))) if ds else None

    r = best(dimmed)
    for group in (zero_d, [ctx.dtype_of(s) for s in scalars]):
        g = best(group)
        if g is None:
            continue
        if r is None:
            r = g
        elif CATEGORY[g] > CATEGORY[r]:
            r = g if group is zero_d else {0: "bool", 1: "i64", 2: "f32"}[CATEGORY[g]]
    return r or "f32"


def binary(ctx: ConvertContext, op: str, a, b, out_dtype: str = None):
    dt = result_dtype(ctx, a, b)
    out = ctx.emit(op, [ctx.tensor(a, dt), ctx.tensor(b, dt)])
    if out_dtype is not None and out.dtype != out_dtype:
        out = ctx.emit("Cast", [out], {"to": onnx_dtype_id(out_dtype)})
    return out


def _is_static(ctx, *xs):
    return all(not ctx.is_value(x) for x in xs)


@converter("aten::add", "aten::add_")
def _add(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    alpha = ins[2] if len(ins) > 2 else 1
    if isinstance(a, (list, tuple)):  # list concatenation
        return list(a) + list(b)
    if _is_static(ctx, a, b, alpha):
        return a + alpha * b
    if ctx.const(alpha, "alpha") != 1:
        b = binary(ctx, "Mul", b, alpha)
    return binary(ctx, "Add", a, b)


@converter("aten::sub", "aten::sub_", "aten::rsub")
def _sub(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    if ctx.node.kind() == "aten::rsub":
        a, b = b, a
    alpha = ins[2] if len(ins) > 2 else 1
    if _is_static(ctx, a, b, alpha):
        return a - alpha * b
    if ctx.const(alpha, "alpha") != 1:
        b = binary(ctx, "Mul", b, alpha)
    return binary(ctx, "Sub", a, b)


@converter("aten::mul", "aten::mul_")
def _mul(ctx: ConvertContext, ins):
    a, b = ins
    if _is_static(ctx, a, b):
        return a * b
    return binary(ctx, "Mul", a, b)


@converter("aten::div", "aten::div_")
def _div(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    mode = ins[2] if len(ins) > 2 else None
    if _is_static(ctx, a, b) and mode is None:
        return a / b
    dt = result_dtype(ctx, a, b)
    if mode is None and CATEGORY[dt] < 2:
        dt = "f32"  # true division of integers gives floats
    out = ctx.emit("Div", [ctx.tensor(a, dt), ctx.tensor(b, dt)])
    if mode == "floor" and CATEGORY[dt] == 2:
        out = ctx.emit("Floor", [out])
    elif mode == "trunc" and CATEGORY[dt] == 2:
        sign = ctx.emit("Sign", [out])
        out = ctx.emit("Mul", [ctx.emit("Floor", [ctx.emit("Abs", [out])]), sign])
    elif mode == "floor":
        raise ctx.error("floor division of integer tensors is not supported yet")
    return out


@converter("aten::pow", "aten::pow_")
def _pow(ctx: ConvertContext, ins):
    a, b = ins[0], ins[1]
    if _is_static(ctx, a, b):
        return a ** b
    # Base and exponent in the promoted dtype, as torch computes it (integer ** integer stays integer).
    return binary(ctx, "Pow", a, b)


@converter("aten::floordiv")
def _floordiv(ctx: ConvertContext, ins):
    a, b = ins
    if _is_static(ctx, a, b):
        return a // b
    # Shape arithmetic on non-negative ints: Div truncates, which equals floor there.
    return binary(ctx, "Div", a, b)


@converter("aten::neg")
def _neg(ctx: ConvertContext, ins):
    return -ins[0] if _is_static(ctx, ins[0]) else ctx.emit("Neg", [ins[0]])


def _compare(op: str, py):
    def conv(ctx: ConvertContext, ins):
        a, b = ins
        if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            return _list_compare(ctx, op, a, b)
        if _is_static(ctx, a, b):
            return py(a, b)
        if _scalar_output(ctx):  # ints (e.g. sizes): equal symbolic dims decide it while compiling
            same = static_equal(ctx, a, b)
            if same is True:
                return op in ("Equal", "GreaterOrEqual", "LessOrEqual")
            if same is False and op == "Equal":
                return False
        dt = result_dtype(ctx, a, b)
        return ctx.emit(op, [ctx.tensor(a, dt), ctx.tensor(b, dt)])
    return conv


def _scalar_output(ctx: ConvertContext) -> bool:
    """Whether the node being converted yields a TorchScript bool (an int/float comparison), not a Tensor."""
    return isinstance(ctx.node.output().type(), torch._C.BoolType)


def _list_compare(ctx: ConvertContext, op: str, a, b):
    """TorchScript list equality (e.g. `x.shape == (n, m)` checks): folded when decidable, else a 0-d bool."""
    if op != "Equal":
        raise ctx.error("ordering comparisons of lists are not supported")
    if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
        raise ctx.error(f"cannot compare a {type(a).__name__} with a {type(b).__name__}")
    if _is_static(ctx, *a, *b):
        return list(a) == list(b)
    same = static_equal(ctx, list(a), list(b))
    if same is not None:
        return same
    eq = ctx.emit("Equal", [ctx.stack_scalars(a), ctx.stack_scalars(b)])
    # all(eq): the minimum over 0/1 values
    as_int = ctx.emit("Cast", [eq], {"to": onnx_dtype_id("i64")})
    low = ctx.emit("ReduceMin", [as_int, None], {"keepdims": 0})
    return ctx.emit("Cast", [low], {"to": onnx_dtype_id("bool")})


for _kind, _op, _py in [("gt", "Greater", lambda a, b: a > b), ("lt", "Less", lambda a, b: a < b),
                        ("ge", "GreaterOrEqual", lambda a, b: a >= b), ("le", "LessOrEqual", lambda a, b: a <= b),
                        ("eq", "Equal", lambda a, b: a == b)]:
    converter(f"aten::{_kind}")(_compare(_op, _py))


@converter("aten::ne")
def _ne(ctx: ConvertContext, ins):
    a, b = ins
    if _is_static(ctx, a, b) and not isinstance(a, (list, tuple)) and not isinstance(b, (list, tuple)):
        return a != b
    eq = _compare("Equal", lambda x, y: x == y)(ctx, ins)
    return (not eq) if isinstance(eq, bool) else ctx.emit("Not", [eq])


# ---- unary elementwise

# TorchScript's math on Python numbers, evaluated while compiling (torch computes these in double).
_SCALAR_MATH = {"Exp": math.exp, "Log": math.log, "Sqrt": math.sqrt, "Abs": abs, "Erf": math.erf, "Sin": math.sin,
                "Cos": math.cos, "Tanh": math.tanh, "Floor": math.floor, "Ceil": math.ceil, "Tan": math.tan,
                "Asin": math.asin, "Acos": math.acos, "Atan": math.atan, "Sinh": math.sinh, "Cosh": math.cosh,
                "Asinh": math.asinh, "Acosh": math.acosh, "Atanh": math.atanh}
_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "abs": "Abs", "neg": None, "erf": "Erf", "sin": "Sin", "cos": "Cos", "floor": "Floor", "ceil": "Ceil",
          "reciprocal": "Reciprocal", "sign": "Sign", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan",
          "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh"}
# The unary ops that promote integer inputs to the default float, as torch does.
_FLOAT_RESULT = {"Exp", "Log", "Sqrt", "Sigmoid", "Tanh", "Erf", "Sin", "Cos", "Reciprocal", "Tan", "Asin", "Acos",
                 "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}
for _name, _op in _UNARY.items():
    if _op is None:
        continue

    def _make(op):
        def conv(ctx: ConvertContext, ins):
            x = ins[0]
            if isinstance(x, (int, float)) and op in _SCALAR_MATH:  # math on Python numbers (math.sqrt(d))
                return _SCALAR_MATH[op](x)
            if op in _FLOAT_RESULT and CATEGORY[ctx.dtype_of(x)] < 2:
                x = ctx.tensor(x, "f32")  # these promote integers to the default float
            return ctx.emit(op, [x])
        return conv

    converter(f"aten::{_name}", f"aten::{_name}_")(_make(_op))


# ---- linear algebra and a first set of NN ops


@converter("aten::linear")
def _linear(ctx: ConvertContext, ins):
    x, w, b = ins
    if isinstance(w, torch.Tensor) or (ctx.is_value(w) and w.is_constant and not ctx.is_state(w)):
        # Frozen weights: transpose once, now, not on every call (a state_dict entry is transposed by a node
        # that constant folding evaluates, so that update_weights folds it again).
        wc = w if isinstance(w, torch.Tensor) else torch.from_numpy(np.array(ctx.constant_data(w, "the weight")))
        wt = ctx.tensor(wc.t().contiguous())
    else:
        wt = ctx.emit("Transpose", [w], {"perm": [1, 0]})
    y = ctx.emit("MatMul", [x, wt])
    return ctx.emit("Add", [y, b]) if b is not None else y


@converter("aten::matmul")
def _matmul(ctx: ConvertContext, ins):
    return ctx.emit("MatMul", ins)


@converter("aten::sum")
def _sum(ctx: ConvertContext, ins):
    x = ins[0]
    dims = ins[1] if len(ins) > 1 else None
    keep = bool(ctx.const(ins[2])) if len(ins) > 2 else False
    dtype = ins[3] if len(ins) > 3 else None
    if dtype is not None:
        x = ctx.tensor(x, TORCH_TO_CUVIL[SCALAR_TYPE_TO_TORCH[ctx.const(dtype)]])
    elif CATEGORY[ctx.dtype_of(x)] < 2 and ctx.dtype_of(x) != "i64":
        x = ctx.tensor(x, "i64")  # torch sums bools and small ints into int64
    axes = None if dims is None or ctx.const(dims) == [] else np.array(ctx.const(dims), np.int64)
    return ctx.emit("ReduceSum", [x, axes], {"keepdims": int(keep)})
