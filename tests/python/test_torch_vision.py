"""CNN-side aten converters (aten_nn.py, aten_shape.py): torchvision models compiled with a symbolic batch match
PyTorch eager, and focused tests per converter family (odd shapes, negative dims, dynamic dims, and the error for an
unsupported argument value).

Models run on the reference (plain-loop) backend, so most run at 64x64 inputs: every architecture here accepts it
(global pooling before the classifier) and it is ~12x cheaper than 224x224. resnet18 also runs at 224x224.
"""
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

import cuvil

# ---- helpers


def rel_l2(got, ref) -> float:
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def assert_same(got, ref, tol=1e-5, what="output"):
    if isinstance(ref, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(ref), f"{what}: {type(got)} vs {type(ref)}"
        for i, (g, r) in enumerate(zip(got, ref)):
            assert_same(g, r, tol, f"{what}[{i}]")
        return
    assert isinstance(got, torch.Tensor), f"{what}: got {type(got).__name__}"
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} vs {ref.dtype}"
    if ref.is_floating_point():
        assert torch.equal(torch.isnan(got), torch.isnan(ref)), f"{what}: NaNs differ"
        assert torch.equal(got[torch.isinf(ref)], ref[torch.isinf(ref)]), f"{what}: infinities differ"
        ok = torch.isfinite(ref)
        err = rel_l2(got[ok], ref[ok])
        assert err < tol, f"{what}: relative L2 error {err:.3e}"
    else:
        assert torch.equal(got, ref), f"{what}: {got} vs {ref}"


def check(model, inputs, dynamic=None, runs=None, tol=1e-5):
    """Compiles `model` for `inputs` and compares with eager PyTorch on `inputs` and each tuple in `runs`."""
    if isinstance(model, nn.Module):
        model.eval()
    compiled = cuvil.compile(model, inputs, dynamic_shapes=dynamic)
    for ins in [inputs] + list(runs or []):
        with torch.no_grad():
            ref = model(*ins)
        assert_same(compiled(*ins), ref, tol)
    return compiled


def randn(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


# ---- torchvision parity


def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random weights that keep activations O(1) and make the output depend on the input. (torchvision's own
    initialization leaves several models, e.g. mobilenet_v3_small and shufflenet, with outputs that are nearly
    constant, which would hide conversion errors; BN gets non-trivial running statistics.)"""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * math.sqrt(2.0 / m.weight[0].numel()))
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):  # convnext: 1e-6 at init would switch the blocks off
                p.copy_(0.2 + 0.3 * torch.rand(p.shape, generator=g))
    return model.eval()


# (model, input size): 64x64 except resnet18, which also covers the standard 224x224.
VISION_MODELS = [
    ("resnet18", 224), ("mobilenet_v2", 64), ("mobilenet_v3_small", 64), ("efficientnet_b0", 64),
    ("densenet121", 64), ("squeezenet1_0", 64), ("shufflenet_v2_x0_5", 64), ("regnet_y_400mf", 64),
    ("convnext_tiny", 64),
]


@pytest.mark.parametrize("name,size", VISION_MODELS, ids=[m for m, _ in VISION_MODELS])
def test_torchvision_parity(name, size):
    torch.manual_seed(0)
    model = randomize(getattr(torchvision.models, name)(), seed=1)
    compiled = cuvil.compile(model, (randn(1, 3, size, size),), dynamic_shapes={"x": {0: "batch"}})
    assert compiled.input_types == [f"f32[batch, 3, {size}, {size}]"]
    assert compiled.output_types == ["f32[batch, 1000]"]  # the batch stays symbolic through the whole graph
    reference = copy.deepcopy(model).double()
    for batch in (1, 4):
        x = randn(batch, 3, size, size, seed=batch)
        got = compiled(x)
        with torch.no_grad():
            ref = reference(x.double())
        assert got.shape == (batch, 1000) and got.dtype == torch.float32
        err = rel_l2(got, ref)
        assert err < 1e-4, f"{name} batch {batch}: relative L2 error {err:.3e}"
        if batch > 1:
            # The part of the output that varies with the input (not just the classifier's bias) matches too.
            centered = rel_l2(got - got.mean(0), ref - ref.mean(0))
            assert centered < 1e-3, f"{name}: relative L2 error of the input-dependent part {centered:.3e}"


@pytest.mark.parametrize("name", ["shufflenet_v2_x0_5", "mobilenet_v3_small"])
def test_torchvision_dynamic_spatial_dims(name):
    """Batch, height and width all symbolic: pooling windows, shufflenet's view/transpose/view and the global
    pooling before the classifier keep working for sizes other than the example's."""
    model = randomize(getattr(torchvision.models, name)(), seed=2)
    compiled = cuvil.compile(model, (randn(1, 3, 64, 64),), dynamic_shapes={"x": {0: "batch", 2: "h", 3: "w"}})
    assert compiled.output_types == ["f32[batch, 1000]"]
    reference = copy.deepcopy(model).double()
    for shape in [(2, 3, 64, 64), (1, 3, 96, 80)]:
        x = randn(*shape, seed=3)
        with torch.no_grad():
            ref = reference(x.double())
        err = rel_l2(compiled(x), ref)
        assert err < 1e-4, f"{name} {shape}: relative L2 error {err:.3e}"


# ---- convolutions


torch.manual_seed(0)  # the modules below are built (and initialized) at import
@pytest.mark.parametrize("conv,shape", [
    (nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), (2, 4, 13)),
    (nn.Conv2d(6, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2, bias=False), (2, 6, 9, 11)),
    (nn.Conv2d(3, 5, 1), (1, 3, 7, 5)),
    (nn.Conv2d(4, 4, 3, padding=1, groups=4), (3, 4, 6, 6)),  # depthwise
    (nn.Conv3d(2, 3, (2, 3, 1), stride=(1, 2, 1), padding=(1, 0, 0)), (1, 2, 5, 7, 3)),
    (nn.Conv2d(3, 4, 4, padding="same", dilation=2), (2, 3, 9, 10)),  # even kernel: the extra pad goes at the end
    (nn.Conv1d(3, 4, 5, padding="same"), (2, 3, 8)),
    (nn.Conv2d(3, 4, 3, padding="valid"), (2, 3, 6, 7)),
    (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1), (2, 4, 5, 6)),
    (nn.ConvTranspose2d(3, 2, (2, 3), stride=(3, 1), padding=(0, 1), dilation=(1, 2)), (1, 3, 4, 5)),
    (nn.ConvTranspose1d(2, 3, 4, stride=2, output_padding=1), (2, 2, 7)),
    (nn.ConvTranspose3d(2, 2, 2, stride=2, bias=False), (1, 2, 3, 2, 3)),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "x".join(map(str, v)))
def test_conv(conv, shape):
    torch.manual_seed(0)
    check(conv, (randn(*shape),), dynamic={"input": {0: "batch"}}, runs=[(randn(3, *shape[1:], seed=1),)])


def test_conv_unbatched_input():
    torch.manual_seed(0)
    check(nn.Conv2d(3, 4, 3, padding=1), (randn(3, 8, 8),))
    check(nn.Conv1d(3, 2, 2), (randn(3, 5),))


def test_traced_convolution():
    """torch.jit.trace records aten::_convolution (with the transposed flag) rather than aten::conv2d."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.ConvTranspose2d(4, 2, 2, stride=2)).eval()
    x = randn(1, 3, 9, 9)
    traced = torch.jit.trace(model, (x,))
    assert "aten::_convolution" in str(traced.inlined_graph)
    compiled = cuvil.compile(traced, (x,))
    assert_same(compiled(x), model(x).detach())


def strided_same(x, w):
    return F.conv2d(x, w, stride=2, padding="same")


def test_conv_same_padding_with_stride_is_an_error():
    with pytest.raises(cuvil.CompileError, match="padding='same' is not supported for strided"):
        cuvil.compile(strided_same, (randn(1, 2, 6, 6), randn(3, 2, 3, 3)))


def conv_with_weight_input(x, w, b):
    return F.conv2d(x, w, b, padding=1)


def test_conv_weights_as_inputs():
    check(conv_with_weight_input, (randn(2, 3, 5, 5), randn(4, 3, 3, 3, seed=1), randn(4, seed=2)))


# ---- normalizations


def _with_stats(bn, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        if getattr(bn, "running_mean", None) is not None:
            bn.running_mean.copy_(torch.randn(bn.running_mean.shape, generator=g))
            bn.running_var.copy_(0.5 + torch.rand(bn.running_var.shape, generator=g))
        if bn.weight is not None:
            bn.weight.copy_(torch.randn(bn.weight.shape, generator=g))
            bn.bias.copy_(torch.randn(bn.bias.shape, generator=g))
    return bn.eval()


torch.manual_seed(0)  # the modules below are built (and initialized) at import
@pytest.mark.parametrize("norm,shape", [
    (nn.BatchNorm2d(5), (2, 5, 3, 4)),
    (nn.BatchNorm2d(5, affine=False, eps=1e-3), (2, 5, 3, 4)),
    (nn.BatchNorm1d(6), (3, 6)),
    (nn.BatchNorm1d(6), (3, 6, 7)),
    (nn.BatchNorm3d(2), (2, 2, 3, 2, 3)),
    (nn.BatchNorm2d(3, track_running_stats=False), (4, 3, 5, 5)),  # batch statistics even in eval
    (nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 4)),
    (nn.InstanceNorm1d(4), (2, 4, 9)),
    (nn.InstanceNorm2d(3, track_running_stats=True), (2, 3, 5, 4)),  # running statistics in eval
    (nn.LayerNorm([5, 7]), (2, 3, 5, 7)),
    (nn.LayerNorm(7, elementwise_affine=False, eps=1e-6), (4, 7)),
    (nn.GroupNorm(3, 6), (2, 6, 4, 5)),
    (nn.GroupNorm(2, 4, affine=False), (3, 4, 7)),
    (nn.GroupNorm(1, 3), (2, 3)),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "x".join(map(str, v)))
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_norm(norm, shape):
    norm = _with_stats(norm)
    x = randn(*shape, scale=3.0) + 1.0
    model = norm
    if isinstance(norm, (nn.GroupNorm, nn.InstanceNorm1d, nn.InstanceNorm2d)) or \
            (isinstance(norm, nn.BatchNorm2d) and not norm.track_running_stats):
        # Traced here to test the converters themselves; test_scripted_group_norm covers the scripted form (its
        # size checks are loops over the dims, unrolled while compiling).
        model = torch.jit.trace(norm, (x,))
    runs = [(randn(shape[0] + 1, *shape[1:], seed=3, scale=2.0),)]
    compiled = cuvil.compile(model, (x,), dynamic_shapes={"input": {0: "batch"}})
    for ins in [(x,)] + runs:
        with torch.no_grad():
            assert_same(compiled(*ins), norm(*ins), 1e-5)


def test_scripted_group_norm():
    check(nn.GroupNorm(2, 4), (randn(2, 4, 3),))


def bn_train(x, m, v):
    return F.batch_norm(x, m, v, training=True)


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_batch_norm_functional_training_mode():
    x = randn(4, 3, 2, 2)
    m, v = torch.zeros(3), torch.ones(3)
    traced = torch.jit.trace(bn_train, (x, m, v))  # scripted, it carries the prim::Loop of _verify_batch_size
    compiled = cuvil.compile(traced, (x, m, v))
    assert_same(compiled(x, m, v), bn_train(x, m, v))


# ---- classification losses


def losses(x, t, w):
    lp = F.log_softmax(x, 1 if x.dim() > 1 else 0)
    return (F.cross_entropy(x, t), F.cross_entropy(x, t, w, reduction="sum"),
            F.cross_entropy(x, t, w, ignore_index=1), F.cross_entropy(x, t, reduction="none", ignore_index=2),
            F.nll_loss(lp, t, w), F.nll_loss(lp, t, reduction="none"))


@pytest.mark.parametrize("shape", [(8, 5), (3, 5, 4, 6), (5,)], ids=lambda v: "x".join(map(str, v)))
def test_classification_losses(shape):
    x = randn(*shape, seed=3, scale=2.0)
    t = torch.randint(0, shape[0] if len(shape) == 1 else shape[1], shape[:1] + shape[2:] if len(shape) > 1 else (),
                      generator=torch.Generator().manual_seed(4))
    w = torch.rand(shape[0] if len(shape) == 1 else shape[1], generator=torch.Generator().manual_seed(5)) + 0.5
    check(losses, (x, t, w))


@pytest.mark.filterwarnings("ignore::cuvil.CaptureWarning")  # the lambdas are traced
def test_classification_loss_errors():
    x, t = randn(4, 5), torch.tensor([0, 1, 2, 3])
    with pytest.raises(cuvil.CompileError, match="label_smoothing is not supported"):
        cuvil.compile(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), (x, t))
    with pytest.raises(cuvil.CompileError, match="class probabilities"):
        cuvil.compile(lambda x, p: F.cross_entropy(x, p), (x, torch.softmax(randn(4, 5), 1)))
    # A target that is no class: PyTorch raises, and so does the compiled model, naming the loss.
    compiled = cuvil.compile(lambda x, t: F.cross_entropy(x, t), (x, t))
    with pytest.raises(RuntimeError, match="NegativeLogLikelihoodLoss.*target value 7 is out of range"):
        compiled(x, torch.tensor([0, 7, 1, 2]))


# ---- pooling


@pytest.mark.parametrize("pool,shape", [
    (nn.MaxPool2d(3, stride=2, padding=1), (2, 3, 9, 8)),
    (nn.MaxPool2d(3, stride=2, ceil_mode=True), (1, 2, 10, 7)),
    (nn.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1)), (2, 2, 7, 9)),
    (nn.MaxPool1d(4, stride=3, padding=2, ceil_mode=True), (2, 3, 11)),
    (nn.MaxPool3d(2, stride=(1, 2, 2)), (1, 2, 4, 5, 6)),
    (nn.AvgPool2d(3, stride=2, padding=1), (2, 3, 9, 8)),
    (nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 3, 9, 8)),
    (nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 10, 7)),
    (nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 10, 7)),
    (nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), (2, 3, 10)),
    (nn.AvgPool3d((2, 2, 3), padding=(1, 0, 1)), (1, 2, 5, 4, 6)),
    (nn.AdaptiveAvgPool2d(1), (2, 3, 7, 5)),
    (nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 9, 8)),   # uniform windows: one AveragePool
    (nn.AdaptiveAvgPool2d((4, 3)), (2, 3, 10, 7)),  # overlapping, uneven windows
    (nn.AdaptiveAvgPool2d((None, 3)), (1, 2, 5, 7)),
    (nn.AdaptiveAvgPool1d(4), (2, 3, 9)),
    (nn.AdaptiveAvgPool3d((1, 2, 3)), (1, 2, 3, 4, 7)),
    (nn.AdaptiveMaxPool2d((4, 3)), (2, 3, 10, 7)),
    (nn.AdaptiveMaxPool2d(1), (2, 3, 5, 6)),
    (nn.AdaptiveMaxPool1d(3), (2, 3, 9)),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "x".join(map(str, v)))
@pytest.mark.filterwarnings("ignore::cuvil.CaptureWarning")  # AdaptiveAvgPool2d((None, 3)) is traced
def test_pool(pool, shape):
    check(pool, (randn(*shape),), dynamic={"input": {0: "batch"}}, runs=[(randn(3, *shape[1:], seed=1),)])


def pool_unbatched(x):
    return F.max_pool2d(x, 2), F.avg_pool1d(x[0], 3), F.adaptive_avg_pool2d(x, (2, 3))


def test_pool_unbatched_inputs():
    check(pool_unbatched, (randn(3, 6, 7),))


def max_pool_indices(x):
    return F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)


def adaptive_max_indices(x):
    return F.adaptive_max_pool2d(x, (2, 3), return_indices=True)


def adaptive_max_uneven_indices(x):
    return F.adaptive_max_pool2d(x, (4, 3), return_indices=True)


def test_pool_indices():
    x = randn(2, 3, 6, 9)
    check(max_pool_indices, (x,), dynamic={"x": {0: "batch"}}, runs=[(randn(3, 3, 6, 9, seed=1),)])
    check(adaptive_max_indices, (x,), dynamic={"x": {0: "batch"}}, runs=[(randn(1, 3, 6, 9, seed=1),)])
    with pytest.raises(cuvil.CompileError, match="indices of aten::adaptive_max_pool2d"):
        cuvil.compile(adaptive_max_uneven_indices, (randn(1, 2, 10, 7),))


def avg_divisor(x):
    return F.avg_pool2d(x, 2, divisor_override=3)


def test_avg_pool_divisor_override_is_an_error():
    with pytest.raises(cuvil.CompileError, match="divisor_override"):
        cuvil.compile(avg_divisor, (randn(1, 2, 4, 4),))


def adaptive_on_symbolic(x):
    return F.adaptive_avg_pool2d(x, (3, 1))


def test_adaptive_pool_symbolic_spatial_dims():
    x = randn(1, 2, 9, 5)
    # Output 1 along a symbolic dim is a plain mean; 3 of a symbolic 9 needs the size
    check(adaptive_on_symbolic, (x,), dynamic={"x": {0: "n", 3: "w"}}, runs=[(randn(2, 2, 9, 8, seed=1),)])
    with pytest.raises(cuvil.CompileError, match="needs spatial dim 0 to be static"):
        cuvil.compile(adaptive_on_symbolic, (x,), dynamic_shapes={"x": {2: "h"}})


# ---- activations and dropout


torch.manual_seed(0)  # the modules below are built (and initialized) at import
ACTIVATIONS = [
    nn.ReLU6(), nn.Hardtanh(-2.0, 3.0), nn.LeakyReLU(0.2), nn.ELU(0.7), nn.SELU(), nn.CELU(1.3), nn.SiLU(),
    nn.GELU(), nn.GELU(approximate="tanh"), nn.Hardswish(), nn.Hardsigmoid(), nn.Sigmoid(), nn.Mish(),
    nn.Softplus(), nn.Softplus(beta=2.0, threshold=5.0), nn.PReLU(), nn.PReLU(4), nn.Threshold(0.1, 20.0),
    nn.Hardshrink(0.7), nn.Softshrink(0.3), nn.GLU(1), nn.LogSigmoid(), nn.RReLU(), nn.Dropout(0.3),
    nn.Dropout2d(0.5), nn.AlphaDropout(0.2), nn.Tanh(),
]


@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda a: repr(a))
def test_activation(act):
    torch.manual_seed(0)
    x = randn(2, 4, 3, 6, scale=4.0)  # covers every kink/threshold (|x| up to ~12)
    check(act, (x,), dynamic={"input": {0: "batch"}}, runs=[(randn(1, 4, 3, 6, seed=1, scale=4.0),)], tol=1e-6)


def inplace_acts(x):
    y = x.clone()
    F.relu6(y, inplace=True)
    z = x * 1.0
    F.hardswish(z, inplace=True)
    w = x + 0.0
    F.leaky_relu(w, 0.3, inplace=True)
    return y, z, F.elu(w, inplace=True), F.hardtanh(x * 2, -0.5, 0.5, inplace=True)


def test_inplace_activations():
    check(inplace_acts, (randn(3, 5, scale=4.0),))


def elu_scaled(x):
    return torch._C._nn.elu(x, 0.5, 1.5, 2.0)


def test_elu_with_scale():
    check(elu_scaled, (randn(4, 5, scale=3.0),))


def gelu_bad(x):
    return F.gelu(x, approximate="erf")


def dropout_train(x):
    return F.dropout(x, 0.5, training=True)


def test_activation_errors():
    with pytest.raises(cuvil.CompileError, match="approximate='erf' is not supported"):
        cuvil.compile(gelu_bad, (randn(2, 3),))
    with pytest.raises(cuvil.CompileError, match="dropout with train=True"):
        cuvil.compile(dropout_train, (randn(2, 3),))


def int_clamps(x):
    return F.hardtanh(x, -1.5, 2.5), F.relu6(x * 2), torch.clamp(x, 0, 2), torch.clamp(x, min=0.5)


def test_clamp_family_on_ints():
    # hardtanh keeps the dtype (bounds truncate); clamp promotes an int tensor with a float bound (as torch does)
    check(int_clamps, (torch.tensor([[-4, -1, 0, 2, 5]]),))


# ---- reductions and clamp


def reductions(x):
    return (x.mean(), x.mean([-1, 1], keepdim=True), x.mean(2), torch.mean(x, (0,), dtype=torch.float64),
            x.amax((1, -1)), x.amin(0, keepdim=True), x.max(), x.min())


def max_min_dim(x):
    v, i = x.max(-1)
    w, j = torch.min(x, 1, keepdim=True)
    return v, i, w, j, x.max(dim=0)[0]


def elementwise_max(x, y):
    return torch.max(x, y), torch.min(x, y), torch.maximum(x, y * 2), torch.minimum(x.double(), y)


def clamps(x, lo, hi):
    return (torch.clamp(x, -0.5, 0.25), x.clamp(min=0.1), x.clamp(max=-0.2), torch.clamp(x, lo, hi),
            torch.clamp(x, min=lo), x.clamp_min(0.3), x.clamp_max(0.0), torch.clamp(x, 1.0, -1.0))


def test_reductions():
    x = randn(3, 4, 5)
    check(reductions, (x,), dynamic={"x": {0: "b"}}, runs=[(randn(2, 4, 5, seed=1),)])


def test_max_min_with_dim_ties():
    x = torch.tensor([[[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 1.0, 2.0], [0.5, -1.0, -1.0, 4.0]]])
    check(max_min_dim, (x,))  # ties pick the first index, as torch does
    check(max_min_dim, (randn(2, 3, 4),), dynamic={"x": {0: "b"}}, runs=[(randn(5, 3, 4, seed=2),)])


def test_elementwise_max_min_and_clamp():
    check(elementwise_max, (randn(3, 4), randn(4, seed=1)))
    x = randn(2, 3, 4)
    check(clamps, (x, randn(3, 1, seed=1) - 0.5, randn(4, seed=2) + 0.5), dynamic={"x": {0: "b"}},
          runs=[(randn(5, 3, 4, seed=3), randn(3, 1, seed=4), randn(4, seed=5))])


def clamp_nan(x):
    return torch.clamp(x, -1.0, 1.0), F.relu6(x), torch.max(x, torch.zeros_like(x))


def test_nan_propagation():
    x = torch.tensor([float("nan"), -3.0, 0.5, 7.0, float("inf"), -float("inf")])
    check(clamp_nan, (x,))


# ---- padding


def pads(x):
    return (F.pad(x, [1, 2]), F.pad(x, [1, 0, 2, 1], value=-3.5), F.pad(x, [-1, 1, 0, -2]),
            F.pad(x, [2, 1, 1, 2], mode="reflect"), F.pad(x, [3, 1, 0, 2], mode="replicate"),
            F.pad(x, [1, 2, 2, 0], mode="circular"), F.pad(x, [0, 0, 0, 0, 1, 1]))


def test_pad_modes():
    x = randn(2, 3, 5, 6)
    check(pads, (x,), dynamic={"x": {0: "batch"}}, runs=[(randn(1, 3, 5, 6, seed=1),)])


@pytest.mark.parametrize("pad,shape", [
    (nn.ZeroPad2d((1, 2, 0, 3)), (1, 2, 3, 4)),
    (nn.ConstantPad1d(2, 1.5), (2, 3, 4)),
    (nn.ConstantPad3d((1, 0, 0, 1, 2, 0), -1.0), (1, 1, 2, 3, 2)),
    (nn.ReflectionPad1d((2, 1)), (2, 3, 5)),
    (nn.ReflectionPad2d(2), (1, 2, 4, 5)),
    (nn.ReplicationPad1d((0, 3)), (1, 2, 4)),
    (nn.ReplicationPad2d((1, 2, 3, 0)), (1, 2, 3, 3)),
    (nn.ReplicationPad3d(1), (1, 1, 2, 3, 2)),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "x".join(map(str, v)))
def test_pad_modules(pad, shape):
    check(pad, (randn(*shape),))


def reflect_too_far(x):
    return F.pad(x, [4, 0], mode="reflect")


def test_pad_errors():
    with pytest.raises(cuvil.CompileError, match="reflection padding 4 must be smaller"):
        cuvil.compile(reflect_too_far, (randn(1, 2, 4),))


# ---- shapes


def views(x):
    n = x.size(0)
    a = x.view(n, -1)
    b = x.reshape(-1, 5)
    c = x.flatten(1)
    d = x.flatten(-2, -1)
    e = x.flatten()
    f = torch.flatten(x, 0, 1)
    g = x.view(n, 2, 3, 5).permute(0, -1, 2, 1).contiguous()
    h = a.unflatten(1, (3, -1))
    return a, b, c, d, e, f, g, h


def test_view_reshape_flatten():
    x = randn(2, 6, 5)
    compiled = check(views, (x,), dynamic={"x": {0: "batch"}}, runs=[(randn(3, 6, 5, seed=1),),
                                                                       (randn(1, 6, 5, seed=2),)])
    assert compiled.output_types[:3] == ["f32[batch, 30]", "f32[6*batch, 5]", "f32[batch, 30]"]


def transposes(x):
    return (x.transpose(0, -1), x.transpose(1, 1), torch.transpose(x, -2, 0), x[0].t(), x[0, 0].t(),
            x.permute(2, 0, 1), torch.movedim(x, 0, -1), torch.movedim(x, (0, 1), (2, 0)), x.swapaxes(1, 2))


def test_transpose_permute():
    x = randn(2, 3, 4)
    check(transposes, (x,), dynamic={"x": {0: "b"}}, runs=[(randn(5, 3, 4, seed=1),)])


def squeezes(x):
    return (x.unsqueeze(0), x.unsqueeze(-1), torch.unsqueeze(x, 2), x.squeeze(1), x.squeeze(-1), x.squeeze(2),
            x[:, :, :1].squeeze())


def squeeze_batch(x):
    # whether the batch is 1 is only known at run time
    # (the output's rank is then unknown when compiling, which most other converters cannot take as input)
    return x.squeeze(0), x.squeeze()


def test_squeeze_unsqueeze():
    x = randn(2, 1, 4, 1)
    check(squeezes, (x,))
    check(squeeze_batch, (randn(2, 3, 1),), dynamic={"x": {0: "b"}},
          runs=[(randn(1, 3, 1, seed=1),), (randn(4, 3, 1, seed=2),)])


def cats(x, y, i):
    return (torch.cat([x, y], -1), torch.cat((x, x, y), dim=2), torch.cat([x, i], 1), torch.stack([x, y]),
            torch.stack([x, y, x], -1), torch.stack([x[0, 0]], 0), torch.cat([x]))


def test_cat_stack():
    x, y = randn(2, 3, 4), randn(2, 3, 4, seed=1)
    i = torch.arange(24).reshape(2, 3, 4)  # int64 promotes to float in cat
    check(cats, (x, y, i), dynamic={"x": {0: "b"}, "y": {0: "b"}, "i": {0: "b"}},
          runs=[(randn(3, 3, 4), randn(3, 3, 4, seed=2), torch.arange(36).reshape(3, 3, 4))])


def splits(x):
    a = x.chunk(3, 1)            # 7 -> 3, 3, 1
    b = torch.chunk(x, 4, -1)    # 5 -> 2, 2, 1
    c = x.split(2, 1)            # 7 -> 2, 2, 2, 1
    d = torch.split(x, [1, 4], -1)
    e = x.unbind(1)
    f = x.split_with_sizes([3, 4], 1)
    return a, b, c, d, e, f, x.chunk(2, -1)[0]


def test_chunk_split_unbind():
    check(splits, (randn(2, 7, 5),), dynamic={"x": {0: "b"}}, runs=[(randn(4, 7, 5, seed=1),)])


def chunk_dynamic(x):
    return x.chunk(2, 0)


def test_chunk_on_symbolic_dim_is_an_error():
    with pytest.raises(cuvil.CompileError, match="needs dim 0 to be static"):
        cuvil.compile(chunk_dynamic, (randn(4, 3),), dynamic_shapes={"x": {0: "b"}})


def slicing(x):
    return (x[:, 1:-1:2], x[..., -3:], x[1:], x[:, :, ::3], x[:, -1], x[-1, 0], x.narrow(2, 1, 3),
            torch.narrow(x, -1, -3, 2), x.select(1, -2), x[:, 2:100], x[:, 5:2], x[:, :])


def test_slice_select_narrow():
    x = randn(3, 5, 6)
    check(slicing, (x,), dynamic={"x": {0: "b"}}, runs=[(randn(2, 5, 6, seed=1),)])


def slice_dynamic(x):
    n = x.size(0)
    return x[: n - 1], x[1:n], x.narrow(0, 0, 1), x[n // 2]


def test_slice_with_runtime_bounds():
    check(slice_dynamic, (randn(4, 3),), dynamic={"x": {0: "b"}}, runs=[(randn(7, 3, seed=1),)])


def expands(x, y):
    return (x.expand(2, -1, 4), x.expand(3, 2, 3, 4), y.expand_as(x.expand(2, 3, 4)), x.repeat(2, 1, 2),
            x.repeat(2, 1, 1, 3), y.expand(x.size(0), 3, 4))


def test_expand_repeat():
    check(expands, (randn(1, 3, 1), randn(3, 1, seed=1)))
    check(expands, (randn(1, 3, 1), randn(3, 1, seed=1)), dynamic={"x": {2: "k"}}, runs=[])


def shuffles(x):
    return F.channel_shuffle(x, 3), F.pixel_shuffle(x, 3), F.pixel_unshuffle(x[:, :, :, :3], 3)


def shufflenet_shuffle(x):
    # torchvision's shufflenet: view / transpose / view with the batch read from x.size()
    b, c, h, w = x.size()
    x = x.view(b, 3, c // 3, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


def test_channel_rearrangements():
    x = randn(2, 18, 3, 6)
    check(shuffles, (x,), dynamic={"x": {0: "b"}}, runs=[(randn(1, 18, 3, 6, seed=1),)])
    compiled = check(shufflenet_shuffle, (x,), dynamic={"x": {0: "b"}}, runs=[(randn(3, 18, 3, 6, seed=1),)])
    assert compiled.output_types == ["f32[b, 18, 3, 6]"]


def dims(x):
    return x * x.dim(), x.size(-1) * x.flatten(x.dim() - 2)


def test_dim():
    check(dims, (randn(2, 3, 4),), dynamic={"x": {0: "b"}}, runs=[(randn(5, 3, 4, seed=1),)])
