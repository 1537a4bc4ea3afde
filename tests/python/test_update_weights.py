"""Hot weight swap: CompiledModule.update_weights / weights_version / call_with_version.

Results after an update equal a model compiled fresh with the new weights, bit for bit (the same kernels run):
a torch MLP, a conv + BatchNorm net (the BatchNorm folded into the convolution again), an ONNX model and a
.cuv artifact. Bad updates (names, shapes, dtypes, a missing weight under strict=True) raise InputError and leave
the old weights serving. Under load, 8 threads call the model while its weights are swapped 100 times, and every
output is the reference output of exactly the version it reports.
"""
import threading
import time

import numpy as np
import pytest

import cuvil

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5)).eval()


class ConvBN(torch.nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)
        with torch.no_grad():  # statistics that make the fold matter
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)
        self.eval()

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("make, shape", [(_mlp, (3, 12)), (ConvBN, (2, 3, 9, 9))])
def test_torch_update_equals_fresh_compile(make, shape):
    x = torch.randn(*shape)
    m1, m2 = make(1), make(2)
    compiled = cuvil.compile(m1, (x,))
    assert compiled.weights_version == 1
    before = compiled(x)
    fresh = cuvil.compile(m2, (x,))
    assert set(compiled.weight_names()) == set(m1.state_dict())
    assert compiled.update_weights(m2.state_dict()) == 2
    assert compiled.weights_version == 2
    out, version = compiled.call_with_version(x)
    assert version == 2
    assert _same(out, fresh(x))
    assert not _same(out, before)
    torch.testing.assert_close(out, m2(x), rtol=1e-4, atol=1e-4)
    # The module compiled first is untouched.
    assert _same(m1.state_dict()[next(iter(m1.state_dict()))], make(1).state_dict()[next(iter(m1.state_dict()))])


def test_torch_subset_update_folds_batch_norm_again():
    x = torch.randn(2, 3, 9, 9)
    m = ConvBN(1)
    compiled = cuvil.compile(m, (x,))
    var = torch.rand(8) + 0.5
    with pytest.raises(cuvil.InputError, match="strict update: missing"):
        compiled.update_weights({"bn.running_var": var})
    assert compiled.weights_version == 1
    assert compiled.update_weights({"bn.running_var": var}, strict=False) == 2
    ref = ConvBN(1)
    with torch.no_grad():
        ref.bn.running_var.copy_(var)
    assert _same(compiled(x), cuvil.compile(ref, (x,))(x))
    # A second subset builds on the first.
    w = torch.randn(4, 8)
    compiled.update_weights({"fc.weight": w}, strict=False)
    with torch.no_grad():
        ref.fc.weight.copy_(w)
    assert _same(compiled(x), cuvil.compile(ref, (x,))(x))


def test_torch_bad_updates_keep_the_old_weights():
    x = torch.randn(3, 12)
    m = _mlp(1)
    compiled = cuvil.compile(m, (x,))
    want = compiled(x)
    sd = {k: v.clone() for k, v in _mlp(2).state_dict().items()}
    bad = [({**sd, "0.wieght": sd["0.weight"]}, "'0.wieght' is not in the module's state_dict"),
           ({**sd, "0.bias": torch.zeros(33)}, r"'0.bias' has shape \[32\], given \[33\]"),
           ({**sd, "2.bias": torch.zeros(5, dtype=torch.float64)}, "'2.bias' is float32, given float64")]
    for weights, message in bad:
        with pytest.raises(cuvil.InputError, match=message):
            compiled.update_weights(weights)
        assert compiled.weights_version == 1
        assert _same(compiled(x), want)
    with pytest.raises(TypeError):
        compiled.update_weights([("0.bias", sd["0.bias"])])


# ---- ONNX models and artifacts

def _onnx_weights(seed):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {"conv.w": f(8, 3, 3, 3), "conv.b": f(8), "bn.scale": rng.uniform(0.5, 1.5, 8).astype(np.float32),
            "bn.bias": f(8), "bn.mean": f(8), "bn.var": rng.uniform(0.5, 2, 8).astype(np.float32),
            "fc.w": f(4, 8), "fc.b": f(4)}


def _onnx_model(path, weights):
    nodes = [helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["n"],
                              name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["y"], transB=1, name="fc")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                          [numpy_helper.from_array(v, k) for k, v in weights.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


X = np.random.default_rng(7).standard_normal((2, 3, 9, 9)).astype(np.float32)


def test_onnx_update_equals_fresh_load(tmp_path):
    w1, w2 = _onnx_weights(1), _onnx_weights(2)
    m = cuvil.load_onnx(_onnx_model(tmp_path / "a.onnx", w1))
    assert set(m.weight_names()) == set(w1)
    before = m(X)
    assert m.update_weights(w2) == 2
    fresh = cuvil.load_onnx(_onnx_model(tmp_path / "b.onnx", w2))(X)
    assert _same(m(X), fresh)
    assert not _same(m(X), before)
    # A subset, then errors that change nothing.
    assert m.update_weights({"bn.var": w1["bn.var"]}, strict=False) == 3
    w3 = {**w2, "bn.var": w1["bn.var"]}
    assert _same(m(X), cuvil.load_onnx(_onnx_model(tmp_path / "c.onnx", w3))(X))
    want = m(X)
    for weights, message in [({"nope": w1["fc.b"]}, "'nope' is not a weight of this model"),
                             ({"fc.b": w1["fc.b"][:3]}, r"'fc.b' has shape f32\[4\], given f32\[3\]"),
                             ({"fc.b": w1["fc.b"].astype(np.float64)}, "'fc.b' is f32, given f64"),
                             ({"fc.b": w1["fc.b"]}, "strict update: missing")]:
        with pytest.raises(cuvil.InputError, match=message):
            m.update_weights(weights, strict=message == "strict update: missing")
        assert m.weights_version == 3
        assert _same(m(X), want)
    # torch tensors work too.
    assert m.update_weights({k: torch.from_numpy(v) for k, v in w1.items()}) == 4
    assert _same(m(X), before)


def test_onnx_file_changed_since_load(tmp_path):
    # An ONNX model's update imports its file again (the unoptimized graph is not kept in memory): a file that
    # changed since the load is refused, and the old weights keep serving.
    path = _onnx_model(tmp_path / "a.onnx", _onnx_weights(1))
    m = cuvil.load_onnx(path)
    want = m(X)
    _onnx_model(tmp_path / "a.onnx", _onnx_weights(3))
    import os
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(cuvil.Error, match="changed since the model was loaded"):
        m.update_weights(_onnx_weights(2))
    assert m.weights_version == 1 and _same(m(X), want)


def test_artifact_update_equals_fresh_artifact(tmp_path):
    # An artifact holds the optimized graph, plus the original weights the passes folded and each fold's recipe
    # (runtime/weight_recipes.h): it updates by the ONNX initializers' names, the BatchNorm's included, and gives
    # bit for bit a fresh compile with those weights.
    w1, w2 = _onnx_weights(1), _onnx_weights(2)
    cuvil.load_onnx(_onnx_model(tmp_path / "a.onnx", w1)).save(tmp_path / "a.cuv")
    cuvil.load_onnx(_onnx_model(tmp_path / "b.onnx", w2)).save(tmp_path / "b.cuv")
    a, b = cuvil.load(tmp_path / "a.cuv"), cuvil.load(tmp_path / "b.cuv")
    assert set(w1) <= set(a.weight_names()) and not any(n.endswith("_bn") for n in a.weight_names())
    assert a.weight_names() == b.weight_names()
    assert a.update_weights({"fc.w": w2["fc.w"], "fc.b": w2["fc.b"]}, strict=False) == 2
    mixed_w = {**w1, "fc.w": w2["fc.w"], "fc.b": w2["fc.b"]}
    assert _same(a(X), cuvil.load_onnx(_onnx_model(tmp_path / "m.onnx", mixed_w))(X))
    # Folded weights by their original names: the fold is made again.
    assert a.update_weights({"bn.var": w2["bn.var"], "conv.w": w2["conv.w"]}, strict=False) == 3
    mixed_w.update({"bn.var": w2["bn.var"], "conv.w": w2["conv.w"]})
    mixed = cuvil.load_onnx(_onnx_model(tmp_path / "m2.onnx", mixed_w))
    assert _same(a(X), mixed(X))
    # The folded constant's own name is refused, naming the originals; nothing changes.
    with pytest.raises(cuvil.InputError, match="BatchNormalization folded in: update 'conv.w'"):
        a.update_weights({"conv.w_bn": w2["conv.w"]}, strict=False)
    assert a.weights_version == 3
    assert a.update_weights(w2) == 4
    assert _same(a(X), b(X))
    # Saving after an update writes the new weights, and the new originals: the copy updates by name too.
    a.update_weights(mixed_w)
    a.save(tmp_path / "a2.cuv")
    a2 = cuvil.load(tmp_path / "a2.cuv")
    assert _same(a2(X), mixed(X))
    a2.update_weights({"bn.scale": w2["bn.scale"]}, strict=False)
    assert _same(a2(X), cuvil.load_onnx(_onnx_model(tmp_path / "m3.onnx", {**mixed_w, "bn.scale": w2["bn.scale"]}))(X))


def test_cli_artifact_updates_folded_weights_by_name(tmp_path, cuvil_bin):
    # `cuvil compile` finds the folds too; a C API session (here through cuvil.load) takes the same names.
    import subprocess
    w1, w2 = _onnx_weights(1), _onnx_weights(2)
    src = _onnx_model(tmp_path / "a.onnx", w1)
    r = subprocess.run([cuvil_bin, "compile", src, "-o", str(tmp_path / "a.cuv")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    a = cuvil.load(tmp_path / "a.cuv")
    assert set(w1) <= set(a.weight_names())
    a.update_weights(w2)
    assert _same(a(X), cuvil.load_onnx(_onnx_model(tmp_path / "b.onnx", w2))(X))


def test_swaps_under_load(tmp_path):
    """8 threads call the model continuously while its weights are swapped 100 times; each output is the
    reference of exactly one weights set: the one its reported version was built from."""
    sets = [_onnx_weights(s) for s in range(4)]
    refs = [cuvil.load_onnx(_onnx_model(tmp_path / f"r{k}.onnx", w), threads=1)(X) for k, w in enumerate(sets)]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not _same(refs[i], refs[j])
    m = cuvil.load_onnx(_onnx_model(tmp_path / "m.onnx", sets[0]), threads=1)
    set_of = {1: 0}
    lock = threading.Lock()
    stop = threading.Event()
    failures, versions_seen, calls, ended = [], set(), [0] * 8, [False] * 8

    def worker(i):
        try:
            while not stop.is_set():
                out, v = m.call_with_version(X)
                with lock:
                    k = set_of[v]
                    versions_seen.add(v)
                    calls[i] += 1
                matches = [i for i, r in enumerate(refs) if _same(out, r)]
                if matches != [k]:
                    failures.append(f"version {v}: output matches sets {matches}, expected [{k}]")
                    return
        except Exception as e:  # noqa: BLE001
            failures.append(repr(e))
        finally:
            ended[i] = True

    def each_called():  # every thread calls before the first swap and after the last (or has failed)
        before = list(calls)
        while any(calls[i] == before[i] and not ended[i] for i in range(8)):
            time.sleep(0.001)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        each_called()
        for s in range(1, 101):
            k = s % 4
            with lock:  # the version the update will publish (updates are serialized; runs read it after)
                set_of[m.weights_version + 1] = k
            assert m.update_weights(sets[k]) == s + 1
        each_called()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:3]
    assert m.weights_version == 101
    assert {1, 101} <= versions_seen and min(calls) >= 2
