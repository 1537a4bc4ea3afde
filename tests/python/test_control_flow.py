"""Python control flow on tensor values and dynamic shapes, compiled once with cuvil.compile (scripted, so loops
and branches stay in the graph as If/Loop regions) and run on the fast kernels: every branch, loop counts 0, 1
and many, early exits, and a transformer encoder over many batch sizes and sequence lengths from one compile.
Each is compared with PyTorch eager."""
import numpy as np
import pytest
import torch
from torch import nn

import cuvil

pytestmark = pytest.mark.filterwarnings(r"error:cuvil.compile. torch.jit.script failed:cuvil.CaptureWarning")  # every model here must script
# (torch.export's fallback to TorchScript may warn: it is the control flow these models test)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rel_l2(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref.detach(), np.float64)
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(got - ref) / (den if den > 0 else 1.0))


def check(compiled, model, inputs, what=""):
    with torch.no_grad():
        ref = model(*inputs)
    err = rel_l2(compiled(*inputs), ref)
    assert err < 1e-5, f"{what}: relative L2 error {err:.3e}"


class DataDependentIf(nn.Module):
    def forward(self, x):
        if bool(x.mean() > 0):
            y = torch.relu(x) * 2.0
            if bool(x.max() > 3):
                y = y - x.max()
        else:
            y = torch.sigmoid(x) + 1.0
        return y


def test_every_branch_of_a_nested_if():
    model = DataDependentIf()
    x = torch.randn(4, 8)
    c = cuvil.compile(model, (x,), dynamic_shapes={"x": {0: "batch"}})
    assert "If" in c.ir()
    for name, v in [("then/then", x.abs() + 3.5), ("then/else", x.abs() * 0.1 + 0.1), ("else", -x.abs() - 0.1)]:
        check(c, model, (v,), name)
    check(c, model, (torch.randn(1, 8) + 1,), "batch 1")


class RangeOfTensor(nn.Module):
    """for i in range(n) with n a tensor value: the trip count is data."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x, n):
        for i in range(int(n)):
            x = torch.tanh(self.lin(x)) + float(i)
        return x


@pytest.mark.parametrize("steps", [0, 1, 7])
def test_for_range_of_a_tensor_value(steps):
    model = RangeOfTensor().eval()
    c = cuvil.compile(model, (torch.randn(2, 16), torch.tensor(3)))
    assert "Loop" in c.ir()
    check(c, model, (torch.randn(2, 16), torch.tensor(steps)), f"{steps} steps")


class WhileConverges(nn.Module):
    """Newton's iteration for sqrt(a) until it converges (a data-dependent while loop)."""

    def forward(self, a):
        x = a.clone()
        i = 0
        while bool((x * x - a).abs().max() > 1e-5) and i < 50:
            x = 0.5 * (x + a / x)
            i += 1
        return x


@pytest.mark.parametrize("start", ["converged", "one step", "many steps"])
def test_while_with_a_convergence_test(start):
    model = WhileConverges()
    a = {"converged": torch.ones(5), "one step": torch.full((5,), 1.000001),
         "many steps": torch.tensor([2.0, 10.0, 1e4, 0.5, 3.0])}[start]
    c = cuvil.compile(model, (torch.tensor([2.0, 3.0, 4.0, 5.0, 6.0]),), dynamic_shapes={"a": {0: "n"}})
    check(c, model, (a,), start)


class EarlyExit(nn.Module):
    """A loop left with `break` from inside nested blocks as soon as a running sum crosses a threshold."""

    def forward(self, x, limit):
        acc = torch.zeros_like(x[0])
        steps = 0
        for i in range(x.shape[0]):
            acc = acc + x[i]
            steps = i + 1
            if bool(acc.sum() > limit):
                if bool(acc.max() > 0):
                    break
                acc = acc * 0.5
        return acc * float(steps)


@pytest.mark.parametrize("limit,what", [(-1e9, "exit at the first row"), (4.0, "exit midway"), (1e9, "no exit")])
def test_early_exit_from_a_stack_of_blocks(limit, what):
    model = EarlyExit()
    x = torch.rand(6, 3)
    c = cuvil.compile(model, (x, torch.tensor(2.0)), dynamic_shapes={"x": {0: "rows"}})
    check(c, model, (x, torch.tensor(limit)), what)
    check(c, model, (torch.rand(1, 3), torch.tensor(limit)), what + ", one row")


class ReturnFromLoop(nn.Module):
    def forward(self, x):
        for i in range(x.shape[0]):
            if bool(x[i].sum() > 0):
                return x[i]
        return x[0]


def test_return_inside_a_loop_is_a_clear_compile_error():
    # TorchScript turns it into a loop carrying an uninitialized tensor, whose dtype and shape are unknown.
    with pytest.raises(cuvil.CompileError, match="return.*inside a loop"):
        cuvil.compile(ReturnFromLoop(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "rows"}})


class Rnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.u = nn.Linear(32, 64), nn.Linear(64, 64)

    def forward(self, xs, h):
        for t in range(xs.shape[0]):
            h = torch.tanh(self.w(xs[t]) + self.u(h))
        return h


def test_rnn_loop_over_symbolic_steps():
    model = Rnn().eval()
    c = cuvil.compile(model, (torch.randn(8, 2, 32), torch.zeros(2, 64)), dynamic_shapes={"xs": {0: "steps"}})
    for steps in (0, 1, 64):
        check(c, model, (torch.randn(steps, 2, 32), torch.randn(2, 64)), f"{steps} steps")


def test_encoder_compiled_once_serves_every_batch_and_length():
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    model = nn.TransformerEncoder(layer, 2).eval()
    c = cuvil.compile(model, (torch.randn(2, 6, 32),), dynamic_shapes={"src": {0: "batch", 1: "seq"}})
    for batch in (1, 3, 8):
        for seq in (1, 7, 64, 128, 300):
            x = torch.randn(batch, seq, 32)
            got = c(x)
            ref = model(x)  # autograd on: PyTorch's general path (no nested-tensor fast path)
            err = rel_l2(got, ref)
            assert err < 1e-4, f"batch {batch} seq {seq}: relative L2 error {err:.3e}"


def test_views_as_inputs():
    """Slices of a bigger batch (offset, strided, transposed-back) are valid inputs at any batch size."""
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval()
    c = cuvil.compile(model, (torch.randn(3, 8),), dynamic_shapes={"input": {0: "batch"}})
    big = torch.randn(10, 16)
    views = {"offset rows (contiguous)": torch.randn(6, 8)[1:4], "strided columns": big[2:7, :8],
             "every other row": big[::2, 4:12], "transposed twice": big.t()[:8].t()[:5]}
    for what, v in views.items():
        check(c, model, (v,), what)
    # NumPy views the engine copies itself: reversed rows (negative strides), a broadcast row (zero strides,
    # read-only), a column slice; the caller's arrays are left untouched.
    base = np.random.default_rng(0).standard_normal((10, 16)).astype(np.float32)
    keep = base.copy()
    for what, a in {"reversed rows": base[::-1, 3:11], "broadcast row": np.broadcast_to(base[0, :8], (4, 8)),
                    "every third row": base[::3, 8:]}.items():
        assert not a.flags.c_contiguous
        with torch.no_grad():
            ref = model(torch.from_numpy(np.ascontiguousarray(a))).numpy()
        got = c(a)
        assert np.abs(got - ref).max() < 1e-5 * (1 + np.abs(ref).max()), what
    assert np.array_equal(base, keep)


class EarlyExitClassifier(torch.nn.Module):
    """Returns a tuple from inside a data-dependent `if` (an early-exit head), another after it."""

    def __init__(self):
        super().__init__()
        self.a, self.h1 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 3)
        self.b, self.h2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        y = torch.relu(self.a(x))
        p = torch.softmax(self.h1(y), -1)
        if p.max() > 0.9:
            return p, torch.zeros(1)
        z = torch.relu(self.b(y))
        return torch.softmax(self.h2(z), -1), torch.ones(1)


def test_tuple_returned_from_inside_an_if():
    torch.manual_seed(0)
    model = EarlyExitClassifier().eval()
    x = torch.randn(2, 8)
    compiled = cuvil.compile(model, (x,), capture="torchscript", dynamic_shapes={"x": {0: "batch"}})
    exits = set()
    for scale in (0.01, 1.0, 100.0):
        for n in (1, 2, 5):
            xi = torch.randn(n, 8) * scale
            got, want = compiled(xi), model(xi)
            assert isinstance(got, tuple) and len(got) == 2
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
            exits.add(float(want[1]))
    assert exits == {0.0, 1.0}  # both exits were taken
