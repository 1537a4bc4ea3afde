"""Whole models whose non-convolution work lands in generated kernels that reduce over the channels of NCHW
(columns kernels), normalize per channel (InstanceNorm/GroupNorm views) or compute trigonometric functions,
checked against PyTorch in float64. Each test also checks that the work ran as generated code rather than op by
op: the profile must hold no standalone node of the ops the kernels are meant to absorb."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

import cuvil


def reference(model: nn.Module, x: torch.Tensor):
    return copy.deepcopy(model).double().eval()(x.double())


def rel_l2(got, want) -> float:
    got, want = np.asarray(got, np.float64), want.detach().numpy()
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def standalone_ops(compiled, x) -> set:
    """The op names of the profiled run's nodes that are not fused kernels."""
    return {op for op in compiled.profile(x).by_op() if not op.startswith("Fused")}


class ChannelsFirstLayerNorm(nn.Module):
    """ConvNeXt's LayerNorm for NCHW, written out the way its reference implementation does."""

    def __init__(self, c: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(c))
        self.bias = nn.Parameter(torch.randn(c))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtStem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 4, stride=4)
        self.norm = ChannelsFirstLayerNorm(32)
        self.dw = nn.Conv2d(32, 32, 7, padding=3, groups=32)

    def forward(self, x):
        return self.dw(self.norm(self.conv(x)))


def test_channels_first_layer_norm_is_one_kernel():
    torch.manual_seed(0)
    model = ConvNeXtStem().eval()
    x = torch.randn(2, 3, 64, 64)
    compiled = cuvil.compile(model, (x,))
    err = rel_l2(compiled(x), reference(model, x))
    assert err < 1e-4, f"relative L2 error {err:.3e}"
    ops = standalone_ops(compiled, x)
    assert not ops & {"ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Mul", "Add"}, ops


class GroupNormBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 64, 3, padding=1)
        self.norm = nn.GroupNorm(8, 64)

    def forward(self, x):
        return nn.functional.silu(self.norm(self.conv(x)))


def test_group_norm_generates():
    torch.manual_seed(1)
    model = GroupNormBlock().eval()
    with torch.no_grad():
        model.norm.weight.normal_()
        model.norm.bias.normal_()
    x = torch.randn(2, 16, 20, 20)
    compiled = cuvil.compile(model, (x,))
    err = rel_l2(compiled(x), reference(model, x))
    assert err < 1e-4, f"relative L2 error {err:.3e}"
    assert "InstanceNormalization" not in standalone_ops(compiled, x)


class SegmentationHead(nn.Module):
    """Class scores over the channels of NCHW: softmax and argmax along dim 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 21, 1)

    def forward(self, x):
        scores = self.conv(x)
        return torch.softmax(scores, dim=1), torch.argmax(scores, dim=1)


def test_softmax_and_argmax_over_channels():
    torch.manual_seed(2)
    model = SegmentationHead().eval()
    x = torch.randn(2, 8, 17, 19)
    compiled = cuvil.compile(model, (x,))
    probs, labels = compiled(x)
    want_probs, want_labels = reference(model, x)
    assert rel_l2(probs, want_probs) < 1e-4
    # Ties in float64 scores are practically impossible, so the float32 winners must agree.
    np.testing.assert_array_equal(np.asarray(labels), want_labels.numpy())
    ops = standalone_ops(compiled, x)
    assert not ops & {"Softmax", "ArgMax"}, ops


class SinusoidalEmbedding(nn.Module):
    """Timestep embedding as diffusion models compute it: sin and cos of t times a frequency ladder."""

    def forward(self, t):
        freqs = torch.exp(torch.arange(32, dtype=torch.float32) * (-9.21 / 32))
        args = t[:, None] * freqs[None, :]
        return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


def test_sinusoidal_embedding():
    model = SinusoidalEmbedding().eval()
    t = torch.rand(16) * 1000
    compiled = cuvil.compile(model, (t,))
    err = rel_l2(compiled(t), reference(model, t))
    assert err < 1e-4, f"relative L2 error {err:.3e}"
    assert not standalone_ops(compiled, t) & {"Sin", "Cos"}


class Trig(nn.Module):
    def forward(self, a):
        return torch.sin(a) * torch.cos(a) + torch.tan(a) * 1e-3 + torch.atan(a)


@pytest.mark.parametrize("scale", [1.0, 1e4, 1e7, 1e30])
def test_trigonometric_functions_at_any_scale(scale):
    """The float32 arguments themselves, compared in float64: sin/cos/tan reduce huge arguments exactly."""
    model = Trig().eval()
    a = (torch.rand(4, 33) * 2 - 1) * scale
    compiled = cuvil.compile(model, (a,))
    err = rel_l2(compiled(a), reference(model, a))
    assert err < 1e-5, f"scale {scale}: relative L2 error {err:.3e}"
    assert not standalone_ops(compiled, a) & {"Sin", "Cos", "Tan", "Atan"}


class PowForms(nn.Module):
    def forward(self, x, e, k):
        return (x.abs() ** 1.7 + x ** e + 2.0 ** e, k ** 3, torch.argmin(k, dim=0, keepdim=True), torch.argmax(x),
                torch.argmax(x, keepdim=True))


def test_pow_and_arg_forms():
    torch.manual_seed(3)
    x, e = torch.randn(5, 7), torch.randint(-3, 4, (7,)).float()
    k = torch.randint(-4, 5, (5, 7))
    model = PowForms().eval()
    compiled = cuvil.compile(model, (x, e, k))
    got = compiled(x, e, k)
    want = model(x.double(), e.double(), k)
    assert rel_l2(got[0], want[0]) < 1e-5
    np.testing.assert_array_equal(np.asarray(got[1]), want[1].numpy())  # integer ** integer stays exact
    np.testing.assert_array_equal(np.asarray(got[2]), want[2].numpy())
    assert int(np.asarray(got[3])) == int(want[3])
    assert np.asarray(got[4]).shape == tuple(want[4].shape) and np.asarray(got[4]).item() == int(want[4])
