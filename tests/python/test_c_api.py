"""The C API and the runtime library alone: libcuvil_runtime.so links neither LLVM nor Python nor protobuf;
`cmake --install` gives a header, the library and a pkg-config file against which examples/c/cuvil_run.c builds
with `cc` alone, and its output (NAME SHAPE SUM per output) matches Python's on the same artifact."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import cuvil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
FORBIDDEN = ("libLLVM", "libpython", "libprotobuf", "libonnx", "liblld", "libclang")


def _needed(path):
    r = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    return [line.split("[", 1)[1].rstrip("]") for line in r.stdout.splitlines() if "(NEEDED)" in line]


def test_runtime_library_links_neither_llvm_nor_python():
    lib = os.path.join(BUILD, "lib", "libcuvil_runtime.so")
    needed = _needed(lib)
    assert any("dnnl" in n for n in needed), needed  # (the check reads the right table)
    assert not [n for n in needed if n.startswith(FORBIDDEN)], needed
    # Nor anything it loads in turn.
    r = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True)
    assert not [line for line in r.stdout.splitlines() if line.strip().startswith(FORBIDDEN)], r.stdout
    # The C API's symbols are exported.
    r = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True)
    for sym in ("cuvil_session_create_from_file", "cuvil_session_create_from_memory", "cuvil_session_run",
                "cuvil_status_message", "cuvil_session_output_shape"):
        assert f" T {sym}\n" in r.stdout, sym


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if not shutil.which("cc") or not shutil.which("pkg-config"):
        pytest.skip("needs cc and pkg-config")
    prefix = tmp_path_factory.mktemp("prefix")
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for rel in ("include/cuvil/cuvil.h", "lib/libcuvil_runtime.so", "lib/pkgconfig/cuvil.pc"):
        assert (prefix / rel).exists(), rel
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "cuvil"], capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    exe = str(prefix / "cuvil_run")
    r = subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", os.path.join(ROOT, "examples", "c", "cuvil_run.c"),
                        *flags, "-o", exe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not [n for n in _needed(exe) if n.startswith(FORBIDDEN)]
    return {"exe": exe, "env": dict(os.environ, LD_LIBRARY_PATH=str(prefix / "lib"))}


def _run_c(installed, *args):
    return subprocess.run([installed["exe"], *args], capture_output=True, text=True, env=installed["env"], timeout=300)


def _expect_lines(stdout, names, outs):
    lines = stdout.strip().splitlines()
    assert len(lines) == len(outs), stdout
    for line, name, o in zip(lines, names, outs):
        n, shape, total = line.rsplit(" ", 2)
        assert n == name
        assert shape == ("x".join(str(d) for d in o.shape) if o.ndim else "scalar")
        want = float(np.asarray(o, dtype=np.float64).sum())
        assert abs(float(total) - want) <= 1e-4 * max(1.0, float(np.abs(o).sum())), (line, want)


def test_cuvil_run_matches_python_on_a_torch_model(installed, tmp_path):
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(3, 4, 3)
            self.fc = torch.nn.Linear(4, 6)

        def forward(self, x, t):
            y = torch.relu(self.c(x)).mean((2, 3))
            return torch.softmax(self.fc(y) * t, -1), y.argmax(-1)

    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 9)).astype(np.float32)
    t = np.float32([[0.5]] * 2)
    compiled = cuvil.compile(M().eval(), (torch.from_numpy(x), torch.from_numpy(t)),
                             dynamic_shapes=({0: "batch"}, {0: "batch"}))
    path = str(tmp_path / "m.cuv")
    compiled.save(path)
    np.save(str(tmp_path / "x.npy"), x)
    np.save(str(tmp_path / "t.npy"), t)
    r = _run_c(installed, path, str(tmp_path / "x.npy"), str(tmp_path / "t.npy"))
    assert r.returncode == 0, r.stderr
    _expect_lines(r.stdout, compiled.output_names, list(compiled(x, t)))
    # Another batch size through the symbolic dim.
    x3 = np.random.default_rng(1).standard_normal((3, 3, 9, 9)).astype(np.float32)
    np.save(str(tmp_path / "x3.npy"), x3)
    np.save(str(tmp_path / "t3.npy"), np.float32([[2.0]] * 3))
    r = _run_c(installed, path, str(tmp_path / "x3.npy"), str(tmp_path / "t3.npy"))
    assert r.returncode == 0, r.stderr
    _expect_lines(r.stdout, compiled.output_names, list(compiled(x3, np.float32([[2.0]] * 3))))


def test_cuvil_run_reports_errors(installed, tmp_path):
    bad = tmp_path / "bad.cuv"
    bad.write_bytes(b"not an artifact at all" * 10)
    r = _run_c(installed, str(bad))
    assert r.returncode == 1 and "not a Cuvil artifact" in r.stderr
    r = _run_c(installed, str(tmp_path / "missing.cuv"))
    assert r.returncode == 1 and "missing.cuv" in r.stderr
