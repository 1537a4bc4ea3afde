"""The .cuv artifact: compiled.save(path) / cuvil.load(path) give the same outputs bit for bit, also in a fresh
process without the compile cache; damaged, foreign and truncated files are clear errors; the `cuvil compile`
command and `cuvil run|bench|profile|inspect` on an artifact."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cuvil

torch = pytest.importorskip("torch")
import models  # noqa: E402 (scripts/, put on the path by conftest)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    if isinstance(out, dict):
        return [a for k in out for a in _flat(out[k])]
    return [np.asarray(out)]


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 10)

    def forward(self, x):
        return torch.softmax(self.b(torch.nn.functional.gelu(self.a(x))), -1)


class _ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.c(x))), 2)
        return self.fc(y.flatten(1)), y.mean()


class _Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, x):
        return {"h": self.l(x), "n": torch.nn.functional.layer_norm(x, (32,))}


class _Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.LSTM(8, 16, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.l(x)
        return y, (h, c)


def _torch_cases():
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {
        "mlp": (_Mlp, f(4, 32), {"x": {0: "batch"}}),
        "convnet": (_ConvNet, f(2, 3, 16, 16), None),
        "encoder": (_Encoder, f(2, 7, 32), None),
        "lstm": (_Lstm, f(2, 5, 8), None),
    }


FRESH = r"""
import sys, numpy as np, cuvil
m = cuvil.load(sys.argv[1])
outs = m(*[np.load(p) for p in sys.argv[3:]])
outs = list(outs.values()) if isinstance(outs, dict) else outs
def flat(o):
    return [a for x in o for a in flat(x)] if isinstance(o, (tuple, list)) else [np.asarray(o)]
np.savez(sys.argv[2], *flat(outs))
"""


def _fresh_process_outputs(path, inputs, tmp_path):
    """Loads the artifact in a new interpreter with the compile cache off and returns its outputs."""
    files = []
    for i, x in enumerate(inputs):
        files.append(str(tmp_path / f"in{i}.npy"))
        np.save(files[-1], x)
    out = str(tmp_path / "fresh.npz")
    env = dict(os.environ, CUVIL_CACHE_DIR="off", PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", FRESH, path, out, *files], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    z = np.load(out)
    return [z[f"arr_{i}"] for i in range(len(z.files))]


@pytest.mark.parametrize("name", sorted(_torch_cases()))
def test_torch_model_round_trip_is_bit_identical(name, tmp_path):
    make, x, dyn = _torch_cases()[name]
    torch.manual_seed(0)
    model = make().eval()
    compiled = cuvil.compile(model, (torch.from_numpy(x),), dynamic_shapes=dyn)
    want = compiled(x)
    path = str(tmp_path / f"{name}.cuv")
    compiled.save(path)
    loaded = cuvil.load(path)
    got = loaded(x)
    assert type(got) is type(want)  # the output structure travels in the manifest
    if isinstance(want, dict):
        assert list(got) == list(want)
    for a, b in zip(_flat(want), _flat(got), strict=True):
        assert _bits_equal(a, b)
    assert loaded.input_names == compiled.input_names and loaded.output_types == compiled.output_types
    for a, b in zip(_flat(want), _fresh_process_outputs(path, [x], tmp_path), strict=True):
        assert _bits_equal(a, b)
    if dyn:  # symbolic dims stay symbolic
        x2 = np.random.default_rng(1).standard_normal((9, 32)).astype(np.float32)
        assert _bits_equal(compiled(x2), loaded(x2))


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_onnx_model_round_trip_is_bit_identical(name, model_dir, tmp_path):
    paths = models.export(name, model_dir)
    compiled = cuvil.load_onnx(paths["onnx"])
    x = np.load(paths["input.npy"])
    want = compiled(x)
    path = str(tmp_path / f"{name}.cuv")
    compiled.save(path)
    assert _bits_equal(want, cuvil.load(path)(x))
    assert _bits_equal(want, _fresh_process_outputs(path, [x], tmp_path)[0])
    manifest = json.loads(subprocess.run([os.path.join(ROOT, "build", "bin", "cuvil"), "inspect", path],
                                         capture_output=True, text=True).stdout.split("manifest:\n", 1)[1])
    with open(paths["onnx"], "rb") as f:
        import hashlib
        assert manifest["model_fingerprint"] == "sha256:" + hashlib.sha256(f.read()).hexdigest()
    assert manifest["inputs"] == [{"name": "input", "type": "f32[batch, 3, 224, 224]"}]


@pytest.fixture(scope="module")
def small_artifact(tmp_path_factory):
    d = tmp_path_factory.mktemp("art")
    torch.manual_seed(0)
    compiled = cuvil.compile(_Mlp().eval(), (torch.zeros(2, 32),), dynamic_shapes={"x": {0: "batch"}})
    path = str(d / "mlp.cuv")
    compiled.save(path)
    with open(path, "rb") as f:
        return path, f.read()


def test_damaged_files_are_clear_errors(small_artifact, tmp_path):
    path, data = small_artifact
    cases = {
        "truncated": (data[: len(data) // 2], "truncated"),
        "empty": (b"", "not a Cuvil artifact"),
        "foreign": (b"PK\x03\x04" + data[4:], "not a Cuvil artifact"),
        "corrupt": (data[:-100] + bytes([data[-100] ^ 0x10]) + data[-99:], "corrupt"),
        "extended": (data + b"\0" * 64, "extra bytes"),
    }
    for name, (content, needle) in cases.items():
        p = tmp_path / f"{name}.cuv"
        p.write_bytes(content)
        with pytest.raises(cuvil.ArtifactError, match=needle):
            cuvil.load(str(p))
    with pytest.raises(FileNotFoundError):
        cuvil.load(str(tmp_path / "missing.cuv"))
    with pytest.raises(cuvil.ArtifactError, match="not a regular file|directory"):
        cuvil.load(str(tmp_path))


def test_manifest_records_versions_config_signature_and_cpu_features(small_artifact, cuvil_bin):
    path, _ = small_artifact
    r = subprocess.run([cuvil_bin, "inspect", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "runs on this host: yes" in r.stdout
    for section in ("manifest", "graph", "weights", "source_map"):
        assert f"  {section}: offset " in r.stdout
    m = json.loads(r.stdout.split("manifest:\n", 1)[1])
    assert m["format_version"] == 2 and m["cuvil_version"] == cuvil.__version__
    assert m["git_revision"] and m["onednn_version"]
    assert m["config"] == {"device": "cpu", "opt_level": 1, "precision": "fp32"}
    assert m["inputs"] == [{"name": "x", "type": "f32[batch, 32]"}]
    assert m["outputs"][0]["type"] == "f32[batch, 10]"
    # Its generated kernels are machine code in the artifact, compiled for this host: what they need is listed.
    assert "  kernels: offset " in r.stdout and "machine code in the artifact" in r.stdout
    assert "sse2" in m["required_cpu_features"] and m["llvm_version"].startswith("16.")
    assert len(m["model_fingerprint"]) == 64


def test_cli_compile_then_run_bench_profile_inspect(cuvil_bin, tmp_path):
    import onnx
    from onnx import TensorProto, helper
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], np.arange(12, dtype=np.float32) / 10 - 0.5)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
                           helper.make_node("Tanh", ["xw"], ["y"], name="tanh")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w])
    src = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), src)
    art = str(tmp_path / "m.cuv")
    r = subprocess.run([cuvil_bin, "compile", src, "-o", art, "--dim", "batch=1..64"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.save(str(tmp_path / "x.npy"), x)
    out = str(tmp_path / "out")
    r = subprocess.run([cuvil_bin, "run", art, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = cuvil.load_onnx(src)(x)
    assert _bits_equal(np.load(os.path.join(out, "y.npy")), want)
    for cmd in (["bench", art, "--dim", "batch=2", "--iters", "2"], ["profile", art, "--dim", "batch=2"]):
        r = subprocess.run([cuvil_bin, *cmd], capture_output=True, text=True)
        assert r.returncode == 0, (cmd, r.stderr)
    r = subprocess.run([cuvil_bin, "inspect", art], capture_output=True, text=True)
    m = json.loads(r.stdout.split("manifest:\n", 1)[1])
    assert m["dim_ranges"] == [{"symbol": "batch", "lo": 1, "hi": 64}]
    # The range is checked on every call of the loaded model.
    with pytest.raises(cuvil.InputError, match=r"outside the range \[1..64\]"):
        cuvil.load(art)(np.zeros((65, 4), np.float32))
    assert m["config"]["opt_level"] == 1
    r = subprocess.run([cuvil_bin, "inspect", art, "--ir"], capture_output=True, text=True)
    assert r.returncode == 0 and "MatMul" in r.stdout
    # Errors: no -o, an artifact given to compile, a damaged artifact to run.
    assert subprocess.run([cuvil_bin, "compile", src], capture_output=True, text=True).returncode == 2
    bad = tmp_path / "bad.cuv"
    bad.write_bytes(open(art, "rb").read()[:100])
    r = subprocess.run([cuvil_bin, "run", str(bad), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", out],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "truncated" in r.stderr and len(r.stderr.strip().splitlines()) == 1
