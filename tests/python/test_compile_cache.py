"""The compiled-model cache (cuvil.cache): hits give the same bits, every kind of miss is explained, damaged
entries are replaced with a warning, the directory is pruned least recently used first, concurrent writers are
safe, and `cuvil cache` lists, verifies, prunes and explains. Each test has its own CUVIL_CACHE_DIR."""
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import cuvil
from cuvil import cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUVIL = os.path.join(ROOT, "build", "bin", "cuvil")

MODEL_SOURCE = '''
import torch


class Mlp(torch.nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.scale = scale

    def forward(self, x):
        return self.fc2(torch.{act}(self.fc1(x))) * self.scale
'''


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(d))
    monkeypatch.setenv("CUVIL_MODEL_CACHE", "on")
    monkeypatch.setenv("CUVIL_LOG", "cache")
    monkeypatch.delenv("CUVIL_MODEL_CACHE_MAX_MB", raising=False)
    return d / "models"


_counter = [0]


def _module(tmp_path, act="relu"):
    """A fresh Python module defining Mlp with this activation (a new file: a source change)."""
    _counter[0] += 1
    name = f"cache_test_model_{_counter[0]}"
    (tmp_path / f"{name}.py").write_text(MODEL_SOURCE.replace("{act}", act))
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def _mlp(tmp_path, act="relu", seed=0, **kw):
    torch.manual_seed(seed)
    return _module(tmp_path, act).Mlp(**kw).eval()


def _log(capfd) -> str:
    return capfd.readouterr().err


def _records(d):
    return sorted(p for p in os.listdir(d) if p.endswith(".json")) if os.path.isdir(d) else []


def test_hit_gives_bit_identical_outputs(cache_dir, tmp_path, capfd):
    m = _mlp(tmp_path)
    x = torch.randn(3, 8)
    first = cuvil.compile(m, (x,))
    assert "miss" in _log(capfd) and len(_records(cache_dir)) == 1
    second = cuvil.compile(m, (x,))
    assert "hit" in _log(capfd)
    assert getattr(second, "_cache_key", None)
    x2 = torch.randn(3, 8)
    for inp in (x, x2):
        a, b = first(inp), second(inp)
        assert torch.equal(a, b)  # the same machine code, bit for bit
        torch.testing.assert_close(b, m(inp), rtol=1e-5, atol=1e-5)
    assert second.input_names == first.input_names and second.output_types == first.output_types


def test_dynamic_shapes_hit_keeps_ranges(cache_dir, tmp_path, capfd):
    m = _mlp(tmp_path)
    x = torch.randn(4, 8)
    ds = {"x": {0: torch.export.Dim("batch", min=2, max=16)}}
    first = cuvil.compile(m, (x,), dynamic_shapes=ds, capture="export")
    second = cuvil.compile(m, (x,), dynamic_shapes=ds, capture="export")
    assert "hit" in _log(capfd).splitlines()[-1]
    for n in (2, 7, 16):
        xi = torch.randn(n, 8)
        assert torch.equal(first(xi), second(xi))
    with pytest.raises(cuvil.InputError, match="outside the range"):
        second(torch.randn(17, 8))
    # another range is another input signature
    cuvil.compile(m, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2, max=32)}}, capture="export")
    assert "differs in 1 part(s): inputs" in _log(capfd)


def _miss_line(capfd) -> str:
    lines = [ln for ln in _log(capfd).splitlines() if ln.startswith("cuvil cache: miss")]
    assert lines, "no miss logged"
    return lines[-1]


def test_every_kind_of_miss_is_explained(cache_dir, tmp_path, capfd, monkeypatch):
    m = _mlp(tmp_path)
    x = torch.randn(3, 8)
    ref = cuvil.compile(m, (x,))
    _log(capfd)

    # configuration
    cuvil.compile(m, (x,), capture="export")
    line = _miss_line(capfd)
    assert "differs in 1 part(s): config" in line, line

    # input signature
    cuvil.compile(m, (torch.randn(5, 8),))
    line = _miss_line(capfd)
    assert "differs in 1 part(s): inputs" in line, line

    # a plain attribute forward reads
    torch.manual_seed(0)
    cuvil.compile(type(m)(scale=2.0).eval(), (x,))
    line = _miss_line(capfd)
    assert "differs in 1 part(s): module_state" in line and ": (root)" in line, line

    # weights: names the tensors; the generated kernels' code is reused (no LLVM code generation)
    m2 = _mlp(tmp_path)
    m2.load_state_dict(m.state_dict())
    cuvil.compile(m2, (x,))
    line = _miss_line(capfd)
    # same code and weights in another module: its file and class name differ, not the weights
    assert "differs in 2 part(s): source" in line and "module_state" in line and "weights" not in line, line
    with torch.no_grad():
        m.fc2.weight.add_(0.5)
    before = cuvil.CompiledModule.stats(ref)["generated_kernels_compiled"]
    changed = cuvil.compile(m, (x,))
    line = _miss_line(capfd)
    assert "differs in 1 part(s): weights" in line and "fc2.weight" in line and "fc1" not in line, line
    assert changed.stats()["generated_kernels_compiled"] == before
    torch.testing.assert_close(changed(x), m(x), rtol=1e-5, atol=1e-5)

    # a Cuvil version and a CPU: simulated by overriding those parts of this process's key
    real = cache._build_parts()
    for part in ("version", "cpu", "deps"):
        fake = dict(real)
        fake[part] = ("0" * 32, "another " + part)
        monkeypatch.setattr(cache.keys, "_build_parts", lambda fake=fake: dict(fake))
        cuvil.compile(m, (x,))
        line = _miss_line(capfd)
        assert f"differs in 1 part(s): {part}" in line, line
    monkeypatch.setattr(cache.keys, "_build_parts", lambda: dict(real))
    cuvil.compile(m, (x,))
    assert "hit" in _log(capfd).splitlines()[-1]


def test_source_change_misses_and_never_serves_stale_code(cache_dir, tmp_path, capfd):
    x = torch.randn(3, 8)
    relu = _mlp(tmp_path, "relu")
    a = cuvil.compile(relu, (x,))
    # the module's file edited (forward: relu -> tanh) and reloaded
    mod = sys.modules[type(relu).__module__]
    path = mod.__file__
    with open(path, "w") as f:
        f.write(MODEL_SOURCE.replace("{act}", "tanh"))
    shutil.rmtree(os.path.join(os.path.dirname(path), "__pycache__"), ignore_errors=True)  # (same size, same second)
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.reload(mod)
    finally:
        sys.path.remove(str(tmp_path))
    tanh = mod.Mlp().eval()
    tanh.load_state_dict(relu.state_dict())
    b = cuvil.compile(tanh, (x,))
    line = _miss_line(capfd)
    assert "differs in 1 part(s): source" in line and f"{os.path.basename(path)} changed" in line, line
    torch.testing.assert_close(b(x), tanh(x), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(a(x), b(x))

    # forward replaced at run time, file untouched: the byte code differs
    cls = type(relu)
    old = cls.forward
    try:
        cls.forward = lambda self, x: self.fc2(torch.sigmoid(self.fc1(x))) * self.scale
        c = cuvil.compile(relu, (x,), capture="export")
        line = _miss_line(capfd)
        assert "source" in line and "byte code" in line, line
        torch.testing.assert_close(c(x), relu(x), rtol=1e-5, atol=1e-5)
    finally:
        cls.forward = old
    assert cuvil.cache.explain_torch(tanh, (x,)).startswith("hit")
    # the old class object (relu's byte code) with the edited file: a combination never compiled
    assert "byte code" in cuvil.cache.explain_torch(relu, (x,))


def test_damaged_entries_warn_miss_and_are_replaced(cache_dir, tmp_path, capfd):
    m = _mlp(tmp_path)
    x = torch.randn(3, 8)
    good = cuvil.compile(m, (x,))(x)
    (rec_name,) = _records(cache_dir)
    rec_path = cache_dir / rec_name

    def artifact():
        return cache_dir / json.loads(rec_path.read_text())["artifact"]

    damages = {
        "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        "bit flip": lambda p: p.write_bytes((lambda b: b[:-100] + bytes([b[-100] ^ 0x10]) + b[-99:])(p.read_bytes())),
        "missing": lambda p: p.unlink(),
    }
    for what, damage in damages.items():
        damage(artifact())
        with pytest.warns(cuvil.CacheWarning, match="damaged entry"):
            out = cuvil.compile(m, (x,))(x)
        assert torch.equal(out, good), what
        assert "replaced" in _log(capfd), what
        assert cache.verify_entry(str(cache_dir), cache._read_record(str(rec_path)), deep=True) is None, what
    rec_path.write_text("{not json")
    with pytest.warns(cuvil.CacheWarning, match="record is unreadable"):
        cuvil.compile(m, (x,))
    with warnings.catch_warnings():
        warnings.simplefilter("error", cuvil.CacheWarning)
        assert torch.equal(cuvil.compile(m, (x,))(x), good)  # a hit again
    cache.prune(str(cache_dir), None, now=1e12)  # (the artifact of the unreadable record: unnamed now)
    assert [n for n in os.listdir(cache_dir) if n.endswith(".cuv")] == [json.loads(rec_path.read_text())["artifact"]]


def test_lru_prune_and_size_bound(cache_dir, tmp_path, monkeypatch):
    m = _mlp(tmp_path)
    paths = []
    for n in (1, 2, 3):
        cuvil.compile(m, (torch.randn(n, 8),))
        new = [p for p in _records(cache_dir) if p not in paths]
        paths += new
    assert len(paths) == 3
    for i, p in enumerate(paths):  # used in the order 0, 1, 2; then 0 again (a hit refreshes it)
        os.utime(cache_dir / p, (1000 + i, 1000 + i))
    cuvil.compile(m, (torch.randn(1, 8),))
    sizes = {e["path"]: e["bytes"] for e in cache.entries(str(cache_dir))}
    keep = sizes[str(cache_dir / paths[0])] + sizes[str(cache_dir / paths[2])]
    removed = cache.prune(str(cache_dir), keep)
    assert [os.path.basename(p) for p in removed] == [paths[1]]
    assert _records(cache_dir) == sorted([paths[0], paths[2]])
    assert len([n for n in os.listdir(cache_dir) if n.endswith(".cuv")]) == 2
    # by age
    removed = cache.prune(str(cache_dir), None, max_age_s=3600, now=1002 + 3600 + 1)
    assert [os.path.basename(p) for p in removed] == [paths[2]]
    # the configured bound applies at every store: a tiny one keeps nothing but the newest... or nothing
    monkeypatch.setenv("CUVIL_MODEL_CACHE_MAX_MB", "0")
    cuvil.compile(m, (torch.randn(4, 8),))
    assert _records(cache_dir) == []
    monkeypatch.setenv("CUVIL_MODEL_CACHE_MAX_MB", "lots")
    with pytest.raises(ValueError, match="CUVIL_MODEL_CACHE_MAX_MB"):
        cuvil.compile(m, (torch.randn(5, 8),))


WRITER = r'''
import sys, importlib, torch
sys.path.insert(0, sys.argv[1])
import cuvil
mod = importlib.import_module(sys.argv[2])
torch.manual_seed(0)
m = mod.Mlp().eval()
x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
for _ in range(3):
    y = cuvil.compile(m, (x,))(x)
print(repr(y.sum().item()))
'''


def test_concurrent_writers(cache_dir, tmp_path):
    mod = _module(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), mod.__name__], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "CacheWarning" not in err and "damaged" not in err, err
    assert outs[0][0] == outs[1][0]
    (rec,) = _records(cache_dir)
    assert cache.verify_entry(str(cache_dir), cache._read_record(str(cache_dir / rec)), deep=True) is None
    cache.prune(str(cache_dir), None, now=1e12)  # (orphans of the overtaken writer, if any)
    assert len([n for n in os.listdir(cache_dir) if n.endswith(".cuv")]) == 1


def _onnx_model(path, w_offset=0.0):
    import onnx
    from onnx import TensorProto, helper
    # 20 weights: more than print inline in the IR, so they count as the graph's weights, not its structure
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 5], np.arange(20, dtype=np.float32) / 10 - 0.5 + w_offset)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
                           helper.make_node("Tanh", ["xw"], ["y"], name="tanh")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def test_onnx_external_data_is_keyed_after_import(cache_dir, tmp_path, capfd):
    import onnx
    model = onnx.load(_onnx_model(tmp_path / "inline.onnx"))
    w = model.graph.initializer[0]
    w.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(w), "W"))  # raw data: can go external
    ext = str(tmp_path / "ext.onnx")
    onnx.save(model, ext, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
              size_threshold=0)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    a = cuvil.load_onnx(ext)
    b = cuvil.load_onnx(ext)
    log = _log(capfd)
    assert "keyed after import" in log and "hit" in log, log
    assert np.array_equal(a(x), b(x))
    # the external weights change, the .onnx file does not: a miss naming the graph's constants
    assert (tmp_path / "ext.bin").exists()
    data = np.fromfile(tmp_path / "ext.bin", dtype=np.float32)
    (data + 1).tofile(tmp_path / "ext.bin")
    c = cuvil.load_onnx(ext)
    line = _miss_line(capfd)
    assert "differs in 1 part(s): graph_weights" in line, line
    assert not np.array_equal(a(x), c(x))


TRACED = '''
import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum().numpy() > 0:  # not scriptable (.numpy()): traced, this branch frozen
            return self.fc(x)
        return -self.fc(x)
'''


def test_traced_model_needs_the_same_example_values(cache_dir, tmp_path, capfd):
    (tmp_path / "cache_traced_model.py").write_text(TRACED)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("cache_traced_model")
    finally:
        sys.path.remove(str(tmp_path))
    m = mod.Branchy().eval()
    pos = torch.ones(2, 4)
    with pytest.warns(cuvil.CaptureWarning, match="torch.jit.trace") as first:
        cuvil.compile(m, (pos,), capture="torchscript")
    with pytest.warns(cuvil.CaptureWarning, match="replayed") as again:  # a hit replays the capture's warning
        cuvil.compile(m, (pos,), capture="torchscript")
    for w in (first, again):  # pointing at the caller, as without the cache
        assert [x.filename for x in w if issubclass(x.category, cuvil.CaptureWarning)] == [__file__]
    assert "hit" in _log(capfd)
    neg = -torch.ones(2, 4)
    with pytest.warns(cuvil.CaptureWarning):
        c = cuvil.compile(m, (neg,), capture="torchscript")
    assert "example_values" in _log(capfd)
    torch.testing.assert_close(c(neg), m(neg))


def _cli(capfd, *args, ok=True):
    """`cuvil cache ARGS` in this process (cuvil.cache_cli.main; the native CLI's hand-over is tested once)."""
    from cuvil import cache_cli
    code = cache_cli.main(list(args))
    out = capfd.readouterr().out
    if ok:
        assert code == 0, out
    return code, out


def test_onnx_cache_and_cli(cache_dir, tmp_path, capfd):
    src = _onnx_model(tmp_path / "m.onnx")
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    a = cuvil.load_onnx(src)
    b = cuvil.load_onnx(src)
    assert "hit" in _log(capfd)
    assert np.array_equal(a(x), b(x))
    # the native CLI hands `cuvil cache` to Python
    r = subprocess.run([CUVIL, "cache", "ls"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, CUVIL_PYTHON=sys.executable))
    assert r.returncode == 0 and "1 entries" in r.stdout and "m.onnx" in r.stdout, r.stderr + r.stdout
    assert "hit: entry" in _cli(capfd, "explain", src)[1]
    out = _cli(capfd, "explain", src, "--precision", "bf16")[1]
    assert "differs in 1 part(s): config" in out and "precision: fp32 -> bf16" in out, out
    other = _onnx_model(tmp_path / "m2.onnx", w_offset=1.0)
    out = _cli(capfd, "explain", other)[1]
    assert "differs in 1 part(s): model_file" in out, out
    assert json.loads(_cli(capfd, "ls", "--json")[1])[0]["kind"] == "onnx"
    assert "1 entries, 0 damaged" in _cli(capfd, "verify", "--deep")[1]
    (rec,) = _records(cache_dir)
    art = cache_dir / json.loads((cache_dir / rec).read_text())["artifact"]
    data = bytearray(art.read_bytes())
    data[len(data) // 2] ^= 1
    art.write_bytes(bytes(data))
    code, out = _cli(capfd, "verify", ok=False)
    assert code == 1 and "DAMAGED" in out and "hash differs" in out, out
    assert "removed 1 entries; 0 left" in _cli(capfd, "prune", "--all")[1]
    assert _records(cache_dir) == []
    assert _cli(capfd, "dir")[1].strip() == str(cache_dir)


def test_directories_others_can_write_are_refused(cache_dir, tmp_path, capfd):
    m = _mlp(tmp_path)
    x = torch.randn(3, 8)
    cuvil.compile(m, (x,))
    os.chmod(cache_dir, 0o777)
    cache._refused.clear()
    with pytest.warns(cuvil.CacheWarning, match="compiled-model cache is off"):
        cuvil.compile(m, (x,))
    assert "hit" not in _log(capfd)
    os.chmod(cache_dir, 0o700)
    (rec,) = _records(cache_dir)
    art = cache_dir / json.loads((cache_dir / rec).read_text())["artifact"]
    assert art.stat().st_mode & 0o777 == 0o600
    os.chmod(art, 0o666)
    with pytest.warns(cuvil.CacheWarning, match="not a regular file of this user"):
        cuvil.compile(m, (x,))
    cuvil.compile(m, (x,))
    assert "hit" in _log(capfd).splitlines()[-1]


class _Anchored(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.anchors = [torch.zeros(1000)]  # a plain list attribute: not a buffer, its repr elides the middle

    def forward(self, x):
        return self.fc(x) + self.anchors[0][500]


def test_tensors_in_plain_attributes_count(cache_dir, capfd):
    torch.manual_seed(0)
    m = _Anchored().eval()
    x = torch.randn(2, 4)
    cuvil.compile(m, (x,), capture="export")
    m.anchors[0][500] = 1.0
    c = cuvil.compile(m, (x,), capture="export")
    line = _miss_line(capfd)
    assert "differs in 1 part(s): module_state" in line, line
    torch.testing.assert_close(c(x), m(x))


def test_update_weights_on_a_hit(cache_dir, tmp_path, capfd):
    m = _mlp(tmp_path)
    x = torch.randn(3, 8)
    cuvil.compile(m, (x,))
    hit = cuvil.compile(m, (x,))
    assert "hit" in _log(capfd)
    old = {k: v.clone() for k, v in m.state_dict().items()}
    new = {k: v + 0.25 for k, v in old.items()}
    assert hit.update_weights(new) == 2
    m.load_state_dict(new)
    torch.testing.assert_close(hit(x), m(x), rtol=1e-5, atol=1e-5)
    # the entry still holds the weights it was stored with
    m.load_state_dict(old)
    again = cuvil.compile(m, (x,))
    assert "hit" in _log(capfd)
    torch.testing.assert_close(again(x), m(x), rtol=1e-5, atol=1e-5)
