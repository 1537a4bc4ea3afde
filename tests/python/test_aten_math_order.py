"""The converters of aten_math.py and aten_order.py against eager PyTorch, through both capture paths: values,
shapes and dtypes, on inputs that reach the edge cases (negative divisors, .5 ties, the quadrants of atan2,
repeated values for sort and median, empty dims of scatter's src)."""
import math

import pytest
import torch

import cuvil

F = torch.nn.functional
IDX = torch.tensor([[0, 1], [1, 1], [2, 4]])

CASES = {
    # division and rounding
    "remainder": lambda x: torch.remainder(x, 0.7),
    "remainder_neg_divisor": lambda x: torch.remainder(x, -0.7),
    "remainder_int": lambda x: torch.remainder((x * 10).long(), -3),
    "fmod": lambda x: torch.fmod(x, 0.7),
    "floor_divide": lambda x: torch.floor_divide(x, 0.7),
    "floor_divide_int": lambda x: torch.floor_divide((x * 10).long(), -3),
    "round_ties_even": lambda x: torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5])) + x.sum() * 0,
    "round": lambda x: torch.round(x * 10),
    "round_decimals": lambda x: torch.round(x, decimals=2),
    "round_negative_decimals": lambda x: torch.round(x * 1000, decimals=-2),
    # two-argument math
    "atan2": lambda x: torch.atan2(x, x.flip(0)),
    "atan2_axes": lambda x: torch.atan2(torch.tensor([0.0, 1.0, -1.0, 0.0, 1.0, -3.0]),
                                        torch.tensor([-1.0, 0.0, 0.0, 0.0, -2.0, -2.0])) + x.sum() * 0,
    "hypot": lambda x: torch.hypot(x, x + 1),
    "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
    "addcdiv": lambda x: torch.addcdiv(x, x, x.abs() + 1, value=-0.5),
    "lerp_scalar": lambda x: torch.lerp(x, x * 2 + 1, 0.3),
    "lerp_tensor": lambda x: torch.lerp(x, x * 2 + 1, torch.sigmoid(x * 3)),
    # reductions and statistics
    "prod": lambda x: torch.prod(x, 1),
    "prod_all": lambda x: torch.prod(x),
    "prod_int": lambda x: torch.prod((x * 3).int(), 1),
    "logsumexp": lambda x: torch.logsumexp(x * 100, dim=(0, 1)),
    "std": lambda x: torch.std(x, dim=1),
    "std_biased": lambda x: torch.std(x, dim=1, unbiased=False),
    "var_all": lambda x: torch.var(x),
    "var_correction": lambda x: torch.var(x, dim=1, correction=0, keepdim=True),
    "var_mean": lambda x: torch.var_mean(x, dim=1),
    "std_mean_keep": lambda x: torch.std_mean(x, dim=0, keepdim=True),
    "norm": lambda x: torch.norm(x, dim=1),
    "norm_all": lambda x: torch.norm(x),
    "norm_p3": lambda x: torch.norm(x, p=3, dim=1),
    "norm_fro_dims": lambda x: torch.norm(x, p="fro", dim=(0, 1)),
    "vector_norm_1": lambda x: torch.linalg.vector_norm(x, ord=1, dim=-1, keepdim=True),
    "vector_norm_inf": lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=0),
    "vector_norm_0": lambda x: torch.linalg.vector_norm(x.round(), ord=0),
    "normalize": lambda x: F.normalize(x, dim=1),
    "count_nonzero": lambda x: torch.count_nonzero(x.round(), dim=1),
    # classification of values, accurate exp/log near 0
    "isnan_isinf": lambda x: torch.stack([torch.isnan(x / x.round()), torch.isinf(1 / x.round()),
                                          torch.isfinite(x / x.round()), torch.isneginf(-1 / x.round())]),
    "signbit": lambda x: torch.signbit(torch.cat([x.flatten(), torch.tensor([0.0, -0.0])])),
    "trunc_frac": lambda x: torch.stack([torch.trunc(x * 3), torch.frac(x * 3)]),
    "rsqrt_log2_log10": lambda x: torch.stack([torch.rsqrt(x.abs() + 0.1), torch.log2(x.abs() + 0.1),
                                               torch.log10(x.abs() + 0.1)]),
    "expm1_log1p_tiny": lambda x: torch.stack([torch.expm1(x * 1e-6), torch.log1p(x * 1e-6)]) * 1e6,
    "expm1_log1p": lambda x: torch.stack([torch.expm1(x), torch.log1p(x.abs())]),
    "logaddexp": lambda x: torch.logaddexp(x * 50, x.flip(0) * 50),
    "logaddexp_infinities": lambda x: torch.logaddexp(torch.tensor([-math.inf, math.inf, 1.0]),
                                                      torch.tensor([-math.inf, math.inf, -math.inf])) + x.sum() * 0,
    "logaddexp2": lambda x: torch.logaddexp2(x, x * 2),
    "xlogy": lambda x: torch.xlogy(x.round(), x.abs()),
    "nan_to_num": lambda x: torch.nan_to_num(torch.log(x) / x.round(), posinf=9.0),
    "heaviside": lambda x: torch.heaviside(x.round(), torch.tensor(0.5)),
    "det": lambda x: torch.linalg.det(x[:3, :3]),
    # products and differences
    "outer": lambda x: torch.outer(x[0], x[1]),
    "cross": lambda x: torch.linalg.cross(x[:, :3], x[:, 1:4]),
    "cross_dim0": lambda x: torch.linalg.cross(x[:3, :3], x[:3, 1:4], dim=0),
    "diff": lambda x: torch.diff(x, dim=1),
    "diff_twice_prepend": lambda x: torch.diff(x, n=2, dim=0, prepend=x[:1]),
    "cdist": lambda x: torch.cdist(x, x * 0.5 + 1),
    "cdist_p1": lambda x: torch.cdist(x, x * 0.5, p=1),
    "cosine_similarity": lambda x: F.cosine_similarity(x, x + 1, dim=1),
    # ordering
    "topk": lambda x: torch.topk(x, 2, dim=1),
    "topk_smallest_dim0": lambda x: torch.topk(x, 2, dim=0, largest=False),
    "sort": lambda x: torch.sort(x, dim=1),
    "sort_descending": lambda x: torch.sort(x, dim=0, descending=True),
    "sort_stable_ties": lambda x: torch.sort(x.round(), dim=1, stable=True),
    "argsort": lambda x: torch.argsort(x, dim=1),
    "median": lambda x: torch.median(x),
    "median_dim": lambda x: torch.median(x, 1, keepdim=True),
    "flip": lambda x: torch.flip(x, [1]),
    "flip_two": lambda x: torch.flip(x, [0, 1]),
    "roll": lambda x: torch.roll(x, 1, 1),
    "roll_negative": lambda x: torch.roll(x, -2, 1),
    "roll_flat": lambda x: torch.roll(x, 4),
    "roll_two": lambda x: torch.roll(x, (1, 2), (0, 1)),
    "nonzero": lambda x: torch.nonzero(x > 0),
    "unique": lambda x: torch.unique((x * 2).round(), return_inverse=True, return_counts=True),
    "isin": lambda x: torch.isin((x * 2).round(), torch.tensor([0.0, 1.0, -1.0])),
    "isin_invert": lambda x: torch.isin((x * 2).round(), torch.tensor([0.0, 1.0]), invert=True),
    "triu_indices": lambda x: x[torch.triu_indices(3, 3)[0]],
    "T": lambda x: x.T + 1,
    "where_indices": lambda x: torch.where(x > 0),
    "masked_select": lambda x: torch.masked_select(x, x[0] > 0),
    "kthvalue": lambda x: torch.kthvalue(x, 2, 1),
    "searchsorted": lambda x: torch.searchsorted(torch.tensor([-1.0, 0.0, 1.0]), x, right=True),
    # scatter, repetition, buckets
    "scatter": lambda x: torch.zeros(3, 5).scatter(1, IDX[:, :1], x[:, :2]),
    "scatter_value": lambda x: x.scatter(0, torch.tensor([[0, 1, 2, 0, 1]]), 7.0),
    "scatter_add": lambda x: torch.zeros(3, 5).scatter_add(1, IDX, x),
    "scatter_reduce_amax": lambda x: torch.ones(3, 5).scatter_reduce(1, IDX, x[:, :2], "amax"),
    "scatter_reduce_sum": lambda x: torch.ones(3, 5).scatter_reduce(1, IDX, x[:, :2], "sum"),
    "repeat_interleave": lambda x: torch.repeat_interleave(x, 2, dim=0),
    "repeat_interleave_dim1": lambda x: torch.repeat_interleave(x, 3, dim=1),
    "repeat_interleave_counts": lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 2]), dim=0),
    "bucketize": lambda x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])),
    "bucketize_right_i32": lambda x: torch.bucketize(x.round(), torch.tensor([-1.0, 0.0, 1.0]), right=True,
                                                     out_int32=True),
    # resampling
    "nearest_scale": lambda x: F.interpolate(x[None, None], scale_factor=2, mode="nearest"),
    "nearest_size": lambda x: F.interpolate(x[None, None], size=(5, 7), mode="nearest"),
    "nearest_exact": lambda x: F.interpolate(x[None, None], size=(7, 8), mode="nearest-exact"),
    "bilinear_scale": lambda x: F.interpolate(x[None, None], scale_factor=2, mode="bilinear"),
    "bilinear_size": lambda x: F.interpolate(x[None, None], size=(7, 4), mode="bilinear"),
    "bilinear_align_corners": lambda x: F.interpolate(x[None, None], size=(6, 9), mode="bilinear",
                                                      align_corners=True),
    "bicubic": lambda x: F.interpolate(x[None, None], scale_factor=2, mode="bicubic"),
    "linear_1d": lambda x: F.interpolate(x[None], scale_factor=1.5, mode="linear"),
    "trilinear": lambda x: F.interpolate(x[None, None, None], scale_factor=(1, 2, 2), mode="trilinear"),
}


def _module(fn):
    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)
    return M().eval()


def _close(got, want):
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = torch.as_tensor(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("capture", ["torchscript", "export"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_eager(name, capture):
    torch.manual_seed(hash(name) % 1000)
    model = _module(CASES[name])
    x = torch.randn(3, 5)
    compiled = cuvil.compile(model, (x,), capture=capture)
    _close(compiled(x), model(x))
    x2 = torch.randn(3, 5) * 3
    _close(compiled(x2), model(x2))


@pytest.mark.parametrize("name", ["std", "norm", "sort", "topk", "median_dim", "cosine_similarity", "remainder",
                                  "atan2", "flip", "repeat_interleave", "var_mean", "bucketize"])
def test_symbolic_batch(name):
    """One compiled object across batch sizes (reductions count their elements at run time)."""
    model = _module(CASES[name])
    compiled = cuvil.compile(model, (torch.randn(3, 5),), capture="export",
                             dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2, max=16)}})
    for n in (2, 7, 16):
        x = torch.randn(n, 5)
        _close(compiled(x), model(x))


def test_refusals_name_the_construct():
    with pytest.raises(cuvil.CompileError, match="scatter_reduce with reduce='mean'"):
        cuvil.compile(_module(lambda x: torch.ones(3, 5).scatter_reduce(1, IDX, x[:, :2], "mean")),
                      (torch.randn(3, 5),), capture="export")
    with pytest.raises(cuvil.CompileError, match="roll needs dim 1 to be static"):
        cuvil.compile(_module(lambda x: torch.roll(x, 1, 1)), (torch.randn(3, 5),), capture="export",
                      dynamic_shapes={"x": {1: torch.export.Dim("n", min=2, max=16)}})


def test_atan2_matches_math():
    ys = [0.0, 1.0, -1.0, 2.0, -2.0, 1e-30]
    xs = [1.0, -1.0, 0.0, -3.0, 3.0, -1e-30]
    model = _module(lambda t: torch.atan2(t[0], t[1]))
    t = torch.tensor([[y for y in ys for _ in xs], [x for _ in ys for x in xs]])
    got = cuvil.compile(model, (t,), capture="export")(t)
    want = torch.tensor([math.atan2(y, x) for y in ys for x in xs])
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
