"""The `cuvil` command: inspect, run and bench, and a clear one-line error with a non-zero exit on bad input."""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper


def run(cuvil_bin, *args):
    return subprocess.run([cuvil_bin, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """y = Relu(MatMul(x, W) + b) with x: f32[batch, 4]; a second output with an unsafe file name."""
    d = tmp_path_factory.mktemp("small")
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], np.arange(12, dtype=np.float32) / 10 - 0.5)
    b = helper.make_tensor("b", TensorProto.FLOAT, [3], [0.1, -0.2, 0.3])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
             helper.make_node("Add", ["xw", "b"], ["pre"], name="add"),
             helper.make_node("Relu", ["pre"], ["y"], name="relu"),
             helper.make_node("Neg", ["pre"], ["out/../neg"], name="neg")]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
                           helper.make_tensor_value_info("out/../neg", TensorProto.FLOAT, ["batch", 3])],
                          [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = str(d / "small.onnx")
    onnx.save(m, path)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.save(str(d / "x.npy"), x)
    expect = np.maximum(x @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5) + [0.1, -0.2, 0.3], 0)
    return {"dir": d, "onnx": path, "x": str(d / "x.npy"), "x_value": x, "y": expect.astype(np.float32)}


def expect_one_line_error(r, needle):
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("cuvil: error: "), lines[0]
    assert needle in lines[0], lines[0]


def test_inspect(cuvil_bin, small_model):
    r = run(cuvil_bin, "inspect", small_model["onnx"])
    assert r.returncode == 0, r.stderr
    assert "x: f32[batch, 4]" in r.stdout
    assert "y: f32[batch, 3]" in r.stdout
    assert "MatMul: 1" in r.stdout and "Relu: 1" in r.stdout
    assert "parameters: 15" in r.stdout
    assert "flops: " in r.stdout and "batch" in r.stdout.split("flops: ")[1]
    ir = run(cuvil_bin, "inspect", small_model["onnx"], "--ir")
    assert ir.returncode == 0 and "= MatMul(%x, %W)" in ir.stdout and 'loc("mm")' in ir.stdout


def test_inspect_kernels_prints_generated_code(cuvil_bin, tmp_path):
    # Softmax over the channels: a columns kernel, printed as kernel IR, schedule and assembly.
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 5, 5])])
    path = str(tmp_path / "softmax.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = run(cuvil_bin, "inspect", path, "--kernels")
    assert r.returncode == 0, r.stderr
    assert "== kernel 0" in r.stdout and "Softmax over [2, 8, 25], schedule w32u2" in r.stdout, r.stdout
    assert "kernel rank=3 columns" in r.stdout and "row_max" in r.stdout
    assert "vmov" in r.stdout  # the assembly


def test_run_writes_file_safe_outputs(cuvil_bin, small_model, tmp_path):
    r = run(cuvil_bin, "run", small_model["onnx"], "--input", f"x={small_model['x']}", "--output-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    y = np.load(str(tmp_path / "y.npy"))
    np.testing.assert_allclose(y, small_model["y"], rtol=1e-6, atol=1e-6)
    names = sorted(os.listdir(tmp_path))
    assert names == ["out_.._neg.npy", "y.npy"], names


def test_run_accepts_fortran_order_and_text_ir(cuvil_bin, small_model, tmp_path):
    xf = str(tmp_path / "xf.npy")
    np.save(xf, np.asfortranarray(small_model["x_value"]))
    r = run(cuvil_bin, "run", small_model["onnx"], "--input", f"x={xf}", "--output-dir", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(str(tmp_path / "o" / "y.npy")), small_model["y"], rtol=1e-6, atol=1e-6)
    # The printed IR (without elision) is itself a model the CLI can run.
    ir = run(cuvil_bin, "inspect", small_model["onnx"], "--ir")
    cvir = tmp_path / "small.cvir"
    cvir.write_text(ir.stdout)
    r = run(cuvil_bin, "run", str(cvir), "--input", f"x={xf}", "--output-dir", str(tmp_path / "o2"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(str(tmp_path / "o2" / "y.npy")), small_model["y"], rtol=1e-6, atol=1e-6)


def test_bench_json(cuvil_bin, small_model):
    r = run(cuvil_bin, "bench", small_model["onnx"], "--iters", "7", "--threads", "2", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["iters"] == 7 and j["min_ms"] <= j["median_ms"] and j["threads"] >= 1
    r = run(cuvil_bin, "bench", small_model["onnx"], "--input", f"x={small_model['x']}", "--iters", "2")
    assert r.returncode == 0 and "median" in r.stdout


def test_bench_versus(cuvil_bin, small_model):
    """--versus times a second configuration alternately with the first in one process."""
    r = run(cuvil_bin, "bench", small_model["onnx"], "--iters", "5", "--json", "--versus", "--ref -O0")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["versus"] == "--ref -O0" and j["iters"] == 5
    assert j["min_ms"] <= j["median_ms"] and j["versus_min_ms"] <= j["versus_median_ms"]
    assert j["ratio"] == pytest.approx(j["versus_median_ms"] / j["median_ms"], rel=1e-3)
    r = run(cuvil_bin, "bench", small_model["onnx"], "--iters", "3", "--versus", "--no-cpu-gemm")
    assert r.returncode == 0 and "with --no-cpu-gemm: median" in r.stdout and "ratio" in r.stdout
    r = run(cuvil_bin, "bench", small_model["onnx"], "--versus", "--iters 3")
    assert r.returncode == 2 and "--versus takes kernel flags" in r.stderr
    r = run(cuvil_bin, "bench", small_model["onnx"], "--iters", "3", "--versus", "--skip-pass=fuse-matmul")
    assert r.returncode == 0 and "with --skip-pass=fuse-matmul: median" in r.stdout
    r = run(cuvil_bin, "bench", small_model["onnx"], "--skip-pass=no-such-pass")
    assert r.returncode == 2 and "no pass named 'no-such-pass'" in r.stderr


def test_skip_pass(cuvil_bin, small_model):
    """--skip-pass=NAME leaves that pass out of the pipeline: inspect --ir shows the unfused nodes."""
    fused = run(cuvil_bin, "inspect", small_model["onnx"], "--ir", "-O1")
    skipped = run(cuvil_bin, "inspect", small_model["onnx"], "--ir", "-O1", "--skip-pass=fuse-matmul")
    assert fused.returncode == 0 and skipped.returncode == 0, fused.stderr + skipped.stderr
    assert "FusedMatMul" in fused.stdout and "FusedMatMul" not in skipped.stdout


def test_bad_model_files(cuvil_bin, small_model, tmp_path):
    data = open(small_model["onnx"], "rb").read()
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(data[: len(data) // 2])
    expect_one_line_error(run(cuvil_bin, "inspect", str(trunc)), "trunc.onnx")
    garbled = tmp_path / "garbled.onnx"
    garbled.write_bytes(bytes(b ^ 0xA5 for b in data))
    expect_one_line_error(run(cuvil_bin, "inspect", str(garbled)), "garbled.onnx")
    expect_one_line_error(run(cuvil_bin, "inspect", str(tmp_path / "missing.onnx")), "cannot open")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    expect_one_line_error(run(cuvil_bin, "run", str(empty), "--output-dir", str(tmp_path)), "empty.onnx")


def test_unsupported_op(cuvil_bin, tmp_path):
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="frob_1")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = str(tmp_path / "unsup.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    expect_one_line_error(run(cuvil_bin, "inspect", path), "unsupported op 'Frobnicate'")
    expect_one_line_error(run(cuvil_bin, "inspect", path), "node 'frob_1'")


def test_bad_inputs(cuvil_bin, small_model, tmp_path):
    m, out = small_model["onnx"], str(tmp_path / "o")
    wrong_shape = str(tmp_path / "ws.npy")
    np.save(wrong_shape, np.zeros((2, 5), np.float32))
    expect_one_line_error(run(cuvil_bin, "run", m, "--input", f"x={wrong_shape}", "--output-dir", out),
                          "input 'x': dim 1 must be 4")
    wrong_dtype = str(tmp_path / "wd.npy")
    np.save(wrong_dtype, np.zeros((2, 4), np.float64))
    expect_one_line_error(run(cuvil_bin, "run", m, "--input", f"x={wrong_dtype}", "--output-dir", out),
                          "expected dtype f32, got f64")
    wrong_rank = str(tmp_path / "wr.npy")
    np.save(wrong_rank, np.zeros((4,), np.float32))
    expect_one_line_error(run(cuvil_bin, "run", m, "--input", f"x={wrong_rank}", "--output-dir", out),
                          "expected rank 2")
    expect_one_line_error(run(cuvil_bin, "run", m, "--output-dir", out), "missing input 'x'")
    expect_one_line_error(run(cuvil_bin, "run", m, "--input", f"nope={small_model['x']}", "--output-dir", out),
                          "no input 'nope'")
    bad_npy = tmp_path / "bad.npy"
    bad_npy.write_bytes(b"\x93NUMPY\x01\x00garbage")
    expect_one_line_error(run(cuvil_bin, "run", m, "--input", f"x={bad_npy}", "--output-dir", out), "bad.npy")
    complex_npy = str(tmp_path / "c.npy")
    np.save(complex_npy, np.zeros((2, 4), np.complex64))
    expect_one_line_error(run(cuvil_bin, "run", m, "--input", f"x={complex_npy}", "--output-dir", out),
                          "unsupported dtype")


def test_usage_errors(cuvil_bin, small_model):
    r = run(cuvil_bin, "frobnicate", small_model["onnx"])
    assert r.returncode == 2 and "unknown command" in r.stderr
    r = run(cuvil_bin, "bench", small_model["onnx"], "--iters", "0")
    assert r.returncode == 2 and "--iters expects an integer >= 1" in r.stderr
    r = run(cuvil_bin, "run", small_model["onnx"])
    assert r.returncode == 2 and "--output-dir" in r.stderr
    assert run(cuvil_bin, "--version").stdout.startswith("cuvil ")


def test_kernels_correct_when_openmp_grants_fewer_threads(cuvil_bin):
    """OMP_THREAD_LIMIT=1 under a 2-thread executor: every parallel loop must split among the threads it gets
    (it used to leave the missing threads' share unwritten), and oneDNN is never asked for more."""
    unit = os.path.join(os.path.dirname(cuvil_bin), "cuvil_unit_tests")
    assert os.path.exists(unit), f"{unit} is missing: build first"
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    r = subprocess.run([unit, "--gtest_brief=1",
                        "--gtest_filter=Attention.FastKernelMatchesReference:CpuKernels.*:ShapeGeneric.*"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "PASSED" in r.stdout


def test_hostile_paths(cuvil_bin, small_model, tmp_path):
    """Only regular files are read (docs/SECURITY.md): /dev/zero, a FIFO or a directory as an input or the model
    is a one-line error, at once (a FIFO used to block, /dev/zero to read until memory ran out); an output is not
    written through a symbolic link planted at its name."""
    m, out = small_model["onnx"], str(tmp_path / "o")

    def run_quick(*args):  # a FIFO would block: time out well before the suite does
        return subprocess.run([cuvil_bin, *args], capture_output=True, text=True, timeout=60)

    expect_one_line_error(run_quick("run", m, "--input", "x=/dev/zero", "--output-dir", out),
                          "'/dev/zero' is a character device, not a regular file")
    fifo = str(tmp_path / "x.npy")
    os.mkfifo(fifo)
    expect_one_line_error(run_quick("run", m, "--input", f"x={fifo}", "--output-dir", out),
                          "is a FIFO, not a regular file")
    os.mkdir(tmp_path / "dir.npy")
    expect_one_line_error(run_quick("run", m, "--input", f"x={tmp_path / 'dir.npy'}", "--output-dir", out),
                          "is a directory, not a regular file")
    model_fifo = str(tmp_path / "fifo.onnx")
    os.mkfifo(model_fifo)
    expect_one_line_error(run_quick("inspect", model_fifo), "is a FIFO, not a regular file")
    os.mkdir(tmp_path / "dir.onnx")
    expect_one_line_error(run_quick("inspect", str(tmp_path / "dir.onnx")), "is a directory, not a regular file")

    os.mkdir(out)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, os.path.join(out, "y.npy"))
    expect_one_line_error(run_quick("run", m, "--input", f"x={small_model['x']}", "--output-dir", out),
                          "symbolic link")
    assert victim.read_text() == "precious"


def test_external_data_symlink_out_of_the_model_directory(cuvil_bin, tmp_path):
    """External data reached through a symbolic link that leaves the model's directory is refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(np.arange(3, dtype=np.float32).tobytes())
    d = tmp_path / "model"
    d.mkdir()
    os.symlink(outside, d / "weights")
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [0, 0, 0])
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="weights/secret")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [w])
    path = str(d / "m.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    expect_one_line_error(run(cuvil_bin, "inspect", path), "leads outside the model's directory")


def test_error_messages_escape_control_characters(cuvil_bin, tmp_path):
    """A name holding a newline and terminal escapes stays on the error's one line, escaped."""
    evil = "x\n\x1b[2J\x1b]0;pwned\x07"
    g = helper.make_graph([helper.make_node("Relu", [evil], ["y"], name="relu\r\n")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = str(tmp_path / "evil.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    r = run(cuvil_bin, "inspect", path)
    expect_one_line_error(r, "input 'x\\n\\x1b[2J\\x1b]0;pwned\\x07' is not defined")
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and "\r" not in r.stderr


def _softmax_model(tmp_path):
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 5, 5])])
    path = str(tmp_path / "softmax.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_kernel_cache_rules(cuvil_bin, tmp_path):
    """The kernel cache: a directory its group can write is not used (one warning, the run still succeeds); a
    directory the cache makes is 0700 and its entries 0600; a malformed CUVIL_CACHE_MAX_MB is a one-line error."""
    model = _softmax_model(tmp_path)
    args = ["bench", model, "--iters", "1", "--warmup", "0", "--json"]
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o775)
    env = dict(os.environ, CUVIL_CACHE_DIR=str(shared))
    r = subprocess.run([cuvil_bin, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "is writable by its group or others" in warnings[0], r.stderr
    assert os.listdir(shared) == []
    assert json.loads(r.stdout)["kernels_compiled"] >= 1

    fresh = tmp_path / "fresh" / "cache"
    env = dict(os.environ, CUVIL_CACHE_DIR=str(fresh))
    r = subprocess.run([cuvil_bin, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert os.stat(fresh).st_mode & 0o777 == 0o700
    entries = [e for e in os.listdir(fresh) if e.endswith(".cuvk")]
    assert entries and all(os.stat(fresh / e).st_mode & 0o777 == 0o600 for e in entries)
    r = subprocess.run([cuvil_bin, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["kernels_from_disk"] >= 1, r.stdout + r.stderr

    env = dict(os.environ, CUVIL_CACHE_DIR=str(fresh), CUVIL_CACHE_MAX_MB="abc")
    r = subprocess.run([cuvil_bin, *args], env=env, capture_output=True, text=True, timeout=300)
    expect_one_line_error(r, "CUVIL_CACHE_MAX_MB='abc' is not a size in megabytes")


def test_sequence_and_optional_inputs(cuvil_bin, tmp_path):
    # y = concat(s) + (o if given else 0): --sequence binds the list's length (elements s_0, s_1, ... as inputs),
    # --absent leaves the optional out; compile records the binding in the artifact.
    seq = helper.make_value_info("s", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    then = helper.make_graph([helper.make_node("OptionalGetElement", ["o"], ["v"])], "then", [],
                             [helper.make_tensor_value_info("v", TensorProto.FLOAT, [])])
    other = helper.make_graph([helper.make_node("Constant", [], ["z"], value_float=0.0)], "other", [],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [])])
    nodes = [helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("If", ["has"], ["add"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["c", "add"], ["y"])]
    g = helper.make_graph(nodes, "g", [seq, opt], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "seq.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    a, b, o = (np.array(v, np.float32) for v in ([1, 2], [3, 4], 10))
    for name, v in (("a", a), ("b", b), ("o", o)):
        np.save(str(tmp_path / f"{name}.npy"), v)
    ins = ["--input", f"s_0={tmp_path / 'a.npy'}", "--input", f"s_1={tmp_path / 'b.npy'}"]
    r = run(cuvil_bin, "run", path, "--sequence", "s=2", *ins, "--input", f"o={tmp_path / 'o.npy'}",
            "--output-dir", str(tmp_path / "given"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(str(tmp_path / "given" / "y.npy")), [11, 12, 13, 14])
    r = run(cuvil_bin, "run", path, "--sequence", "s=2", "--absent", "o", *ins, "--output-dir", str(tmp_path / "absent"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(str(tmp_path / "absent" / "y.npy")), [1, 2, 3, 4])
    cuv = str(tmp_path / "seq.cuv")
    r = run(cuvil_bin, "compile", path, "--sequence", "s=2", "--absent", "o", "-o", cuv)
    assert r.returncode == 0, r.stderr
    r = run(cuvil_bin, "run", cuv, *ins, "--output-dir", str(tmp_path / "cuv"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(str(tmp_path / "cuv" / "y.npy")), [1, 2, 3, 4])
    # Without --sequence: a one-line error that names the flag.
    expect_one_line_error(run(cuvil_bin, "run", path, "--output-dir", str(tmp_path / "none")), "--sequence NAME=N")
    r = run(cuvil_bin, "run", path, "--sequence", "s=x", "--output-dir", str(tmp_path / "x"))  # (usage follows)
    assert r.returncode != 0 and r.stderr.startswith("cuvil: --sequence expects an integer >= 0, got 'x'")
