"""The Python API: calling semantics, input validation, threads, zero-copy, outputs, profile, load_onnx, capture
(script / trace fall-back), compile-time errors, and the examples/ scripts."""
import copy
import inspect
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from typing import Optional

import numpy as np
import pytest
import torch

import cuvil
from cuvil.compiled import _to_array

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rel_l2(got, ref) -> float:
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()


@pytest.fixture(scope="module")
def compiled_mlp():
    m = mlp()
    return m, cuvil.compile(m, (torch.randn(2, 16),), dynamic_shapes={"input": {0: "batch"}})


class TwoInputs(torch.nn.Module):
    """Two inputs sharing the symbolic batch dim; a nested output structure."""

    def forward(self, x, y):
        s = x + y
        return s, (x * y, [torch.relu(s), None])


@pytest.fixture(scope="module")
def compiled_two():
    x = torch.randn(3, 5)
    return cuvil.compile(TwoInputs(), (x, x), dynamic_shapes={"x": {0: "batch"}, "y": {0: "batch"}})


# ---- calling semantics


def test_torch_in_torch_out_matches_eager(compiled_mlp):
    m, c = compiled_mlp
    torch.manual_seed(1)
    for batch in (1, 2, 7):
        x = torch.randn(batch, 16)
        y = c(x)
        assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.shape == (batch, 4)
        with torch.no_grad():
            ref = copy.deepcopy(m).double()(x.double())
        assert rel_l2(y.numpy(), ref.numpy()) < 1e-4


def test_numpy_in_numpy_out(compiled_mlp):
    m, c = compiled_mlp
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    y = c(x)
    assert type(y) is np.ndarray and y.dtype == np.float32 and y.shape == (3, 4)
    with torch.no_grad():
        ref = m(torch.from_numpy(x)).numpy()
    assert rel_l2(y, ref) < 1e-4


def test_keyword_arguments_by_forward_names(compiled_two):
    c = compiled_two
    assert c.input_names == ["x", "y"]
    x, y = torch.randn(2, 5), torch.randn(2, 5)
    a = c(x, y)
    for b in (c(x, y=y), c(x=x, y=y), c(y=y, x=x)):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1][0], b[1][0])


def test_mixed_torch_and_numpy_returns_torch(compiled_two):
    x, y = torch.randn(2, 5), np.ones((2, 5), np.float32)
    s, (p, _) = compiled_two(x, y)
    assert isinstance(s, torch.Tensor) and isinstance(p, torch.Tensor)
    assert torch.allclose(s, x + 1)


def test_output_structure_is_preserved(compiled_two):
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    got = compiled_two(x, y)
    ref = TwoInputs()(x, y)
    assert isinstance(got, tuple) and len(got) == 2
    assert isinstance(got[1], tuple) and isinstance(got[1][1], list) and got[1][1][1] is None
    assert torch.allclose(got[0], ref[0]) and torch.allclose(got[1][0], ref[1][0])
    assert torch.allclose(got[1][1][0], ref[1][1][0])
    np_got = compiled_two(x.numpy(), y.numpy())
    assert type(np_got[1][1][0]) is np.ndarray


def test_non_contiguous_and_odd_layout_inputs(compiled_mlp):
    m, c = compiled_mlp
    base = torch.randn(16, 5)
    xt = base.t()  # non-contiguous view
    assert not xt.is_contiguous()
    with torch.no_grad():
        ref = m(xt.contiguous())
    assert torch.allclose(c(xt), ref, atol=1e-6)
    xn = xt.numpy()  # Fortran-ordered NumPy view
    assert np.allclose(c(xn), ref.numpy(), atol=1e-6)
    big_endian = xt.contiguous().numpy().astype(">f4")
    assert np.allclose(c(big_endian), ref.numpy(), atol=1e-6)
    raw = np.zeros(5 * 16 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(5, 16)  # misaligned
    raw[...] = xt.contiguous().numpy()
    assert np.allclose(c(raw), ref.numpy(), atol=1e-6)


def test_requires_grad_input(compiled_mlp):
    m, c = compiled_mlp
    x = torch.randn(2, 16, requires_grad=True)
    y = c(x)
    assert not y.requires_grad
    with torch.no_grad():
        assert torch.allclose(y, m(x), atol=1e-6)


# ---- input validation: a ValueError (cuvil.InputError) naming the input


@pytest.mark.parametrize("make_args, pattern", [
    (lambda: (torch.randn(2, 5),), r"missing input.*'y'"),
    (lambda: (torch.randn(2, 5),) * 3, r"expected 2 input.*got 3"),
    (lambda: (torch.randn(2, 5), torch.randn(2, 5).double()), r"input 'y'.*dtype f32.*f64"),
    (lambda: (torch.randn(2, 5), torch.randn(2, 5).to(torch.bfloat16)), r"input 'y'.*dtype f32.*bf16"),
    (lambda: (torch.randn(2, 5), torch.randn(2, 5, 1)), r"input 'y'.*rank 2"),
    (lambda: (torch.randn(2, 5), torch.randn(2, 6)), r"input 'y'.*dim 1 must be 5"),
    (lambda: (torch.randn(2, 5), torch.randn(3, 5)), r"input 'y'.*'batch' = 2.*3"),
    (lambda: (np.zeros((2, 5), np.complex64), np.zeros((2, 5), np.float32)), r"input 'x'.*complex"),
    (lambda: (np.zeros((2, 5), np.float32), np.zeros((2, 5), np.int32)), r"input 'y'.*dtype f32.*i32"),
])
def test_bad_inputs_raise_value_error_naming_the_input(compiled_two, make_args, pattern):
    with pytest.raises(ValueError, match=pattern) as e:
        compiled_two(*make_args())
    assert isinstance(e.value, cuvil.InputError)


def test_bad_keywords(compiled_two):
    x = torch.randn(2, 5)
    with pytest.raises(cuvil.InputError, match="'x' given both by position and by keyword"):
        compiled_two(x, x=x, y=x)
    with pytest.raises(cuvil.InputError, match="unknown input.*z"):
        compiled_two(x, y=x, z=x)
    with pytest.raises(TypeError, match="input 'y' must be a torch.Tensor or numpy.ndarray, got list"):
        compiled_two(x, [[1.0] * 5] * 2)


# ---- zero-copy


def test_inputs_are_passed_without_copies():
    """The native side wraps each array's buffer (Tensor::view, or a strided view it copies once itself); here:
    the arrays it receives share memory with what the caller passed, strided views included."""
    t = torch.randn(3, 4)
    a, is_torch = _to_array(t, "x", "f32[3, 4]")
    assert is_torch and a.ctypes.data == t.data_ptr()
    n = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    a, is_torch = _to_array(n, "x", "f32[3, 4]")
    assert not is_torch and a is n
    b = torch.randn(3, 4).to(torch.bfloat16)
    a, _ = _to_array(b, "x", "bf16[3, 4]")
    assert a.ctypes.data == b.data_ptr() and a.dtype == np.uint16
    a, _ = _to_array(t.t(), "x", "f32[4, 3]")  # strided: passed as it is
    assert not a.flags.c_contiguous and a.ctypes.data == t.data_ptr()
    # Only layouts the engine cannot read are copied: misaligned data, other byte orders.
    raw = np.zeros(3 * 4 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(3, 4)
    a, _ = _to_array(raw, "x", "f32[3, 4]")
    assert a.flags.aligned and not np.shares_memory(a, raw)
    a, _ = _to_array(n.astype(">f4"), "x", "f32[3, 4]")
    assert a.dtype.isnative


def test_outputs_are_fresh_buffers_returned_without_copies(compiled_two):
    x, y = np.ones((2, 5), np.float32), np.ones((2, 5), np.float32)
    out1 = compiled_two(x, y)[0]
    out2 = compiled_two(x, y)[0]
    # The array wraps the engine's buffer: it does not own its data; its base (a capsule) keeps it alive.
    assert not out1.flags.owndata and type(out1.base).__name__ == "PyCapsule"
    assert out1.flags.writeable and not np.shares_memory(out1, out2)
    assert not np.shares_memory(out1, x) and not np.shares_memory(out1, y)
    out1[...] = 7  # the caller owns it: writing does not disturb the next call
    assert np.array_equal(compiled_two(x, y)[0], np.full((2, 5), 2, np.float32))
    t = compiled_two(torch.from_numpy(x), torch.from_numpy(y))[0]
    del out2
    assert torch.equal(t, torch.full((2, 5), 2.0))  # torch.from_numpy: still the engine's buffer


def test_identity_output_does_not_alias_the_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def identity(a):
        return a

    c = cuvil.compile(identity, (torch.from_numpy(x),))
    y = c(x)
    assert np.array_equal(y, x) and not np.shares_memory(y, x)


# ---- threads


def test_concurrent_calls_from_8_threads():
    torch.manual_seed(0)
    # Big enough (about a millisecond a call) for calls to overlap.
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8)).eval()
    c = cuvil.compile(m, (torch.randn(1, 256),), dynamic_shapes={"input": {0: "batch"}})
    inputs = [torch.randn(1 + k % 5, 256) for k in range(8 * 30)]
    with torch.no_grad():
        refs = [m(x) for x in inputs]
    results = [None] * len(inputs)
    errors = []
    start = threading.Barrier(8)

    def worker(t):
        try:
            start.wait()
            for k in range(t, len(inputs), 8):
                results[k] = c(inputs[k]) if k % 2 else c(inputs[k].numpy())
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for k, (got, ref) in enumerate(zip(results, refs)):
        got = torch.as_tensor(got)
        assert got.shape == ref.shape and rel_l2(got.numpy(), ref.numpy()) < 1e-5, f"call {k}"


def test_gil_is_released_while_running():
    """While one thread is inside a long call, another thread keeps running Python, and a second concurrent call
    gets its own executor from the pool."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).eval()
    c = cuvil.compile(m, (torch.randn(64, 512),), dynamic_shapes={"input": {0: "batch"}})
    # Grow the batch until one call is long enough for the check to mean something (the machine's speed varies).
    batch = 64
    while True:
        x = torch.randn(batch, 512)
        t0 = time.perf_counter()
        c(x)
        if time.perf_counter() - t0 > 0.1 or batch >= 16384:
            break
        batch *= 2
    window = {}
    ticks = []

    def call():
        window["start"] = time.perf_counter()
        c(x)
        window["end"] = time.perf_counter()

    th = threading.Thread(target=call)
    th.start()
    while th.is_alive():
        ticks.append(time.perf_counter())
    th.join()
    start, end = window["start"], window["end"]
    third = (end - start) / 3
    assert end - start > 0.02, f"the call is too short ({end - start:.3f} s) to tell"
    inside = [t for t in ticks if start + third < t < end - third]
    assert inside, "the main thread made no progress during the call: the GIL was held"

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=lambda: (barrier.wait(), c(x))) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert c._model.executors_created >= 2


# ---- introspection: ir, profile, repr, version, docstrings


def test_ir_and_types(compiled_mlp):
    _, c = compiled_mlp
    text = c.ir()
    assert text.startswith("graph @main(%input: f32[batch, 16])")
    assert "MatMul" in text and "elided" in text
    assert "elided" not in c.ir(elide_large_constants=False)
    assert c.input_types == ["f32[batch, 16]"] and c.output_types == ["f32[batch, 4]"]
    assert "f32[batch, 16]" in repr(c)


class ProfiledModel(torch.nn.Module):
    def forward(self, x):
        y = torch.sigmoid(x)  # PROFILE-LINE
        return y * x


def test_profile_rows_table_and_totals():
    c = cuvil.compile(ProfiledModel(), (torch.randn(4, 4),))
    p = c.profile(torch.randn(4, 4))
    assert isinstance(p, cuvil.Profile)
    ops = [r.op for r in p.nodes]
    assert ops == ["Fused(Sigmoid+Mul)"]  # one generated kernel, named after what it fuses
    line = next(i for i, s in enumerate(open(__file__), 1) if "# PROFILE-LINE" in s and "def" not in s)
    sig = p.nodes[0]
    assert sig.location.endswith(f"test_api.py:{line}") and sig.ms >= 0
    assert abs(sum(ms for ms, _ in p.by_op().values()) - p.total_ms) < 1e-9
    text = str(p)
    assert re.search(rf"%\s+Fused\(Sigmoid\+Mul\)\s+.*test_api.py:{line}", text)
    assert "total" in text and "share" in text
    assert p.by_op()["Fused(Sigmoid+Mul)"][1] == 1
    with pytest.raises(cuvil.InputError):
        c.profile(torch.randn(4, 5))


def test_version_and_docstrings():
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", cuvil.__version__)
    for name in cuvil.__all__:
        obj = getattr(cuvil, name)
        if name != "__version__":
            assert inspect.getdoc(obj), f"cuvil.{name} has no docstring"
    for cls in (cuvil.CompiledModule, cuvil.Profile):
        for name, member in vars(cls).items():
            if not name.startswith("_") or name == "__call__":
                assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"


# ---- load_onnx


@pytest.fixture(scope="module")
def onnx_mlp(tmp_path_factory):
    m = mlp()
    path = str(tmp_path_factory.mktemp("onnx") / "mlp.onnx")
    torch.onnx.export(m, (torch.randn(1, 16),), path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13, dynamo=False)
    return m, path


def test_load_onnx_returns_a_compiled_module(onnx_mlp):
    m, path = onnx_mlp
    c = cuvil.load_onnx(path)
    assert isinstance(c, cuvil.CompiledModule) and c.input_names == ["x"]
    x = torch.randn(3, 16)
    with torch.no_grad():
        ref = m(x)
    assert isinstance(c(x), torch.Tensor) and rel_l2(c(x).numpy(), ref.numpy()) < 1e-4
    assert rel_l2(c(x=x.numpy()), ref.numpy()) < 1e-4
    assert "Gemm" in c.ir() or "MatMul" in c.ir()
    assert len(c.profile(x).nodes) >= 2
    c2 = cuvil.load_onnx(path, precision="fp32", device="cpu", threads=2)
    assert np.array_equal(c2(x.numpy()), c(x.numpy()))


def test_load_onnx_errors(onnx_mlp, tmp_path):
    _, path = onnx_mlp
    with pytest.raises(TypeError, match="unknown option.*fast"):
        cuvil.load_onnx(path, fast=True)
    with pytest.raises(FileNotFoundError):
        cuvil.load_onnx(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(cuvil.CompileError, match="bad.onnx"):
        cuvil.load_onnx(bad)


# ---- capture: torch.jit.script first, torch.jit.trace fall-back


class Branchy(torch.nn.Module):
    """Data-dependent control flow that torch.jit.script keeps."""

    def forward(self, x):
        if bool(x.sum() > 0):
            return x * 2.0
        return x - 1.0


class BranchyUnscriptable(torch.nn.Module):
    """The same branch, plus a lambda (TorchScript has none), so only tracing can capture it."""

    def forward(self, x):
        if bool(x.sum() > 0):
            y = x * 2.0
        else:
            y = x - 1.0
        shift = lambda t: t + 0.5  # noqa: E731 - the point of this test
        return shift(y)


def test_script_keeps_control_flow():
    x = torch.rand(2, 3) + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error", cuvil.CaptureWarning)
        c = cuvil.compile(Branchy(), (x,))
    assert torch.allclose(c(x), x * 2) and torch.allclose(c(-x), -x - 1)
    assert "If" in c.ir()


def test_trace_fallback_warns_and_freezes_control_flow():
    x = torch.rand(2, 3) + 0.1
    with pytest.warns(cuvil.CaptureWarning) as record:
        c = cuvil.compile(BranchyUnscriptable(), (x,))
    first = next(w for w in record if issubclass(w.category, cuvil.CaptureWarning))
    msg = str(first.message)
    assert "torch.jit.script failed" in msg and "Lambda" in msg  # why scripting failed
    assert "test_api.py:" in msg  # where
    assert "torch.jit.trace" in msg and "frozen" in msg and "control flow" in msg
    assert first.filename == __file__  # points at the caller's compile() line
    assert torch.allclose(c(x), x * 2 + 0.5)
    # The branch taken by the example is now baked in: a negative input still takes it (eager would not).
    assert torch.allclose(c(-x), -x * 2 + 0.5)
    assert not torch.allclose(BranchyUnscriptable()(-x), c(-x))


def test_capture_fails_both_ways_is_a_compile_error():
    class Bad(torch.nn.Module):
        def forward(self, x):
            fn = lambda t: t.numpy()  # noqa: E731 - neither scriptable nor traceable (returns an ndarray)
            return fn(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fall-back warning, and the tracer's own
        with pytest.raises(cuvil.CompileError, match="torch.jit.script failed.*torch.jit.trace failed"):
            cuvil.compile(Bad(), (torch.randn(2),))


def test_script_module_and_plain_function():
    x, y = torch.randn(2, 3), torch.randn(2, 3)

    def f(a, b):
        return torch.relu(a) * b

    for fn in (f, torch.jit.script(f)):  # a Python function, a ScriptFunction
        c = cuvil.compile(fn, (x, y))
        assert c.input_names == ["a", "b"] and torch.allclose(c(x, b=y), f(x, y))
    c = cuvil.compile(torch.jit.script(Branchy()), (x,))  # a ScriptModule is used as it is
    assert c.input_names == ["x"] and torch.allclose(c(x), Branchy()(x)) and torch.allclose(c(-x), Branchy()(-x))


class WithDefaults(torch.nn.Module):
    def forward(self, x, mask: Optional[torch.Tensor] = None, scale: float = 2.0):
        if mask is None:
            return x * scale
        return x * mask


def test_arguments_with_defaults_can_be_left_out():
    x = torch.randn(2, 3)
    c = cuvil.compile(WithDefaults(), (x,))
    assert c.input_names == ["x"] and torch.allclose(c(x), x * 2)
    assert "If" not in c.ir()  # `mask is None` was folded away with the default bound
    c = cuvil.compile(WithDefaults(), (x, torch.full((2, 3), 3.0)))  # given: then it is an input
    assert c.input_names == ["x", "mask"] and torch.allclose(c(x, mask=torch.ones(2, 3)), x)
    with pytest.raises(ValueError, match=r"missing: y"):
        cuvil.compile(TwoInputs(), (x,))


def test_training_flags_are_restored():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
    m.train()
    m[0].eval()
    before = [s.training for s in m.modules()]
    c = cuvil.compile(m, (torch.randn(1, 4),))
    assert [s.training for s in m.modules()] == before
    x = torch.randn(1, 4)
    m.eval()
    with torch.no_grad():
        assert torch.allclose(c(x), m(x), atol=1e-6)  # compiled in eval mode: dropout is off


# ---- compile-time errors


class UsesFFT(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return torch.fft.fft(y).abs()  # FFT-LINE


def test_unsupported_op_names_the_op_its_line_and_alternatives():
    with pytest.raises(cuvil.CompileError) as e:
        cuvil.compile(UsesFFT(), (torch.randn(8),))
    msg = str(e.value)
    line = next(i for i, s in enumerate(open(__file__), 1) if s.rstrip().endswith("# FFT-LINE"))
    assert "aten::fft_fft" in msg or "aten::_fft_r2c" in msg  # as TorchScript or as torch.export names it
    assert f"test_api.py:{line}" in msg
    assert "supported" in msg and "CONVERTERS" in msg


@pytest.mark.parametrize("kwargs, exc, pattern", [
    (dict(fast=True), TypeError, "unknown option.*fast"),
    (dict(precision="int4"), ValueError, "precision 'int4'"),
    (dict(device="cuda"), ValueError, "device 'cuda'"),
    (dict(threads=0), ValueError, "threads"),
    (dict(dynamic_shapes={"z": {0: "batch"}}), ValueError, r"'z'.*not an argument of forward\(\) with an example input \(x\)"),
    (dict(dynamic_shapes={"x": {2: "batch"}}), ValueError, r"dim 2.*rank 2"),
    (dict(dynamic_shapes={"x": {0: "2batch"}}), ValueError, "not a valid symbol name"),
    (dict(dynamic_shapes={"x": {0: 7}}), ValueError, "not a valid symbol name"),
    (dict(dynamic_shapes={"x": 5}), ValueError, r"must be a dict \{axis: 'symbol' or torch.export.Dim\}"),
    (dict(dynamic_shapes={"x": [0]}), ValueError, r"lists 1 dims, but 'x' has rank 2"),
    (dict(dynamic_shapes={"x": {0: "a", -2: "b"}}), ValueError, "names dim 0 twice"),
    (dict(dynamic_shapes=7), ValueError, "dynamic_shapes must be a dict"),
    (dict(dynamic_shapes=[{0: "a"}, {0: "b"}]), ValueError, "one entry per input"),
])
def test_bad_compile_arguments(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        cuvil.compile(Branchy(), (torch.randn(2, 3),), **kwargs)


def test_bad_example_inputs():
    with pytest.raises(TypeError, match=r"example input 1 \('y'\) is a int; cuvil.compile takes tensors only"):
        cuvil.compile(TwoInputs(), (torch.randn(2), 3))
    with pytest.raises(TypeError, match="example_inputs must be a tensor or a tuple"):
        cuvil.compile(Branchy(), {"x": torch.randn(2)})
    with pytest.raises(TypeError, match="complex"):
        cuvil.compile(Branchy(), (torch.randn(2, dtype=torch.complex64),))
    with pytest.raises(ValueError, match=r"forward\(\) takes 2 argument\(s\) \(x, y\) but 1 example"):
        cuvil.compile(TwoInputs(), (torch.randn(2),))
    # NumPy example inputs are fine.
    c = cuvil.compile(Branchy(), (np.ones((2, 3), np.float32),))
    assert np.array_equal(c(np.ones((2, 3), np.float32)), np.full((2, 3), 2, np.float32))


# ---- examples/


EXAMPLES = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py"))


def test_there_is_an_example_per_use():
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name)], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{name} failed:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip(), f"{name} printed nothing"
