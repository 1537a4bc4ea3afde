"""`cuvil compile MODEL -o m.cuv --precision bf16|int8 [--calibration DIR]` (issue 28): the artifact runs at its
precision in `cuvil run`, `cuvil profile` and `cuvil.load`, bit-identical to the model compiled in the same process
(`cuvil run MODEL --precision ... --calibration DIR`), and unlike the fp32 one where the machine lowers it."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import cuvil  # noqa: E402

CPU = open("/proc/cpuinfo").read()
LOWERS = {"int8": "avx512_vnni" in CPU, "bf16": "avx512_bf16" in CPU}


def run(cuvil_bin, *args):
    return subprocess.run([cuvil_bin, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    """Conv+Relu, a 3x3 Conv with a residual Add+Relu, a 1x1 Conv, global pooling and a Gemm: x f32[1, 3, 20, 20]."""
    d = tmp_path_factory.mktemp("conv")
    rng = np.random.default_rng(0)

    def t(name, shape, scale=0.2):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * scale).astype(
            np.float32).ravel())

    inits = [t("w1", [32, 3, 3, 3]), t("b1", [32]), t("w2", [32, 32, 3, 3], 0.05), t("b2", [32]),
             t("w3", [48, 32, 1, 1], 0.1), t("b3", [48]), t("wf", [10, 48]), t("bf", [10])]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s2"]),
             helper.make_node("Relu", ["s2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 20, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    path = d / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    calib = d / "calib"
    calib.mkdir()
    for i in range(4):
        np.save(str(calib / f"s{i}.npy"), rng.standard_normal((1, 3, 20, 20)).astype(np.float32))
    x = rng.standard_normal((1, 3, 20, 20)).astype(np.float32)
    np.save(str(d / "x.npy"), x)
    return {"dir": d, "onnx": path, "calib": calib, "x": d / "x.npy", "x_value": x}


def run_output(cuvil_bin, model, x, out_dir, *flags):
    r = run(cuvil_bin, "run", model, "--input", f"x={x}", "--output-dir", out_dir, "--threads", 1, *flags)
    assert r.returncode == 0, r.stderr
    return np.load(str(out_dir / "y.npy"))


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_compiled_artifact_matches_in_process_model(cuvil_bin, conv_model, tmp_path, precision):
    d = conv_model["dir"]
    calib = ["--calibration", conv_model["calib"]] if precision == "int8" else []
    art = tmp_path / "m.cuv"
    r = run(cuvil_bin, "compile", conv_model["onnx"], "-o", art, "--precision", precision, "--threads", 1, *calib)
    assert r.returncode == 0, r.stderr

    want = run_output(cuvil_bin, conv_model["onnx"], conv_model["x"], d / f"want_{precision}", "--precision", precision, *calib)
    got = run_output(cuvil_bin, art, conv_model["x"], tmp_path / "got")
    assert got.dtype == want.dtype and np.array_equal(got, want)

    fp32 = run_output(cuvil_bin, conv_model["onnx"], conv_model["x"], d / f"fp32_{precision}")
    # Lowered where the machine runs it faster: then it differs from fp32, within the precision's error.
    assert np.array_equal(got, fp32) != LOWERS[precision]
    tol = {"bf16": 3e-2, "int8": 8e-2}[precision]
    assert np.linalg.norm(got - fp32) <= tol * np.linalg.norm(fp32)

    prof = run(cuvil_bin, "profile", art, "--threads", 1)
    assert prof.returncode == 0, prof.stderr
    assert (f"[{precision}]" in prof.stdout) == LOWERS[precision], prof.stdout

    loaded = cuvil.load(art, threads=1)
    assert loaded._model.precision == precision
    assert np.array_equal(np.asarray(loaded(conv_model["x_value"])), want)


def test_compile_precision_errors(cuvil_bin, conv_model, tmp_path):
    r = run(cuvil_bin, "compile", conv_model["onnx"], "-o", tmp_path / "a.cuv", "--precision", "int8")
    assert r.returncode != 0 and "needs --calibration DIR" in r.stderr, r.stderr
    r = run(cuvil_bin, "compile", conv_model["onnx"], "-o", tmp_path / "b.cuv", "--precision", "bf16",
            "--calibration", conv_model["calib"])
    assert r.returncode != 0 and "--calibration is for --precision int8" in r.stderr, r.stderr
    r = run(cuvil_bin, "compile", conv_model["onnx"], "-o", tmp_path / "c.cuv", "--precision", "int8",
            "--calibration", tmp_path / "missing")
    assert r.returncode != 0 and "not a directory" in r.stderr, r.stderr
    assert not any((tmp_path / n).exists() for n in ("a.cuv", "b.cuv", "c.cuv"))


def run_py(cuvil_bin, *args):
    """The CLI with this Python as the front end's (`compile --precision auto` runs there)."""
    env = dict(os.environ, CUVIL_PYTHON=sys.executable)
    return subprocess.run([cuvil_bin, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("budget", [0.02, 0.0])
def test_compile_auto_matches_in_process_search(cuvil_bin, conv_model, tmp_path, budget):
    """`cuvil compile --precision auto` writes what cuvil.load_onnx(precision="auto") chooses on the same samples:
    the artifact's outputs are bit-identical to the in-process model's; a budget of 0 is the fp32 model itself."""
    art = tmp_path / "auto.cuv"
    r = run_py(cuvil_bin, "compile", conv_model["onnx"], "-o", art, "--precision", "auto", "--data",
               conv_model["calib"], "--budget", budget, "--metric", "rel_l2", "--threads", 1)
    assert r.returncode == 0, r.stderr
    assert "within budget" in r.stdout, r.stdout
    samples = [np.load(str(conv_model["calib"] / f"s{i}.npy")) for i in range(4)]
    want = cuvil.load_onnx(conv_model["onnx"], precision="auto", threads=1, cache=False,
                           accuracy={"metric": "rel_l2", "budget": budget, "data": samples})
    loaded = cuvil.load(art, threads=1)
    x = conv_model["x_value"]
    got = np.asarray(loaded(x))
    assert np.array_equal(got, np.asarray(want(x)))
    assert loaded._auto["error"] <= budget and loaded._auto["budget"] == budget
    fp32 = np.asarray(cuvil.load_onnx(conv_model["onnx"], threads=1, cache=False)(x))
    if budget == 0.0:
        assert np.array_equal(got, fp32)
    elif LOWERS["int8"]:  # something was lowered, within the budget on the samples
        assert not np.array_equal(got, fp32)
        assert "int8" in r.stdout, r.stdout


def test_compile_auto_errors(cuvil_bin, conv_model, tmp_path):
    out = tmp_path / "a.cuv"
    r = run_py(cuvil_bin, "compile", conv_model["onnx"], "-o", out, "--precision", "auto", "--data", conv_model["calib"])
    assert r.returncode != 0 and "--budget" in r.stderr, r.stderr
    r = run_py(cuvil_bin, "compile", conv_model["onnx"], "-o", out, "--precision=auto", "--data", tmp_path / "none",
               "--budget", 0.1)
    assert r.returncode != 0 and "is not a directory" in r.stderr, r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_py(cuvil_bin, "compile", conv_model["onnx"], "-o", out, "--precision", "auto", "--data", empty,
               "--budget", 0.1)
    assert r.returncode != 0 and "no samples" in r.stderr and "one .npy file per sample" in r.stderr, r.stderr
    r = run_py(cuvil_bin, "compile", conv_model["onnx"], "-o", out, "--precision", "auto", "--data",
               conv_model["calib"], "--budget", -1)
    assert r.returncode != 0 and "--budget must be" in r.stderr, r.stderr
    assert not out.exists()
