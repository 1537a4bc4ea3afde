"""Linux perf beside `cuvil profile`: with CUVIL_PERF_MAP=1 generated kernels (and oneDNN's JIT code) are announced
in /tmp/perf-<pid>.map, so `perf record` samples land on named kernels; `cuvil profile REPORT --perf-data` then
attributes the samples of the recorded profile run to its IR nodes by time (report/perf_fold.h). Skipped where
perf cannot record (not installed, or not permitted)."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _perf_records(tmp_path) -> bool:
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-o", str(tmp_path / "probe.data"), "--", "true"],
                       capture_output=True, timeout=60)
    return r.returncode == 0


def _model(path):
    # A convolution (oneDNN) and element-wise work it cannot absorb (one generated kernel).
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array((rng.random((64, 64, 3, 3)) * 0.01).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Erf", ["c"], ["t"]), helper.make_node("Mul", ["t", "c"], ["u"]),
             helper.make_node("Exp", ["u"], ["y"])]
    g = helper.make_graph(nodes, "perf_fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_perf_samples_fold_into_the_profile(tmp_path, cuvil_bin):
    if not _perf_records(tmp_path):
        pytest.skip("perf cannot record here")
    model, report, data, folded, html = (str(tmp_path / n)
                                         for n in ("m.onnx", "r.json", "perf.data", "folded.json", "r.html"))
    _model(model)
    env = dict(os.environ, CUVIL_PERF_MAP="1", CUVIL_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("ONEDNN_JIT_PROFILE", None)
    r = subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F", "4999", "-o", data,
                        "--", cuvil_bin, "profile", model, "--iters", "60", "--json", report],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pid = json.load(open(report))["timeline"]["pid"]
    perf_map = f"/tmp/perf-{pid}.map"
    try:
        lines = open(perf_map).read().splitlines()
        r = subprocess.run([cuvil_bin, "profile", report, "--perf-data", data, "--json", folded, "--html", html],
                           capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(perf_map)
    assert r.returncode == 0, r.stderr
    assert "perf samples:" in r.stdout
    doc = json.load(open(folded))
    p = doc["perf"]
    assert p["in_runs"] >= 30, p
    # Nearly all of a run's samples fall inside some kernel: the timeline and perf's clock agree.
    assert p["in_kernels"] >= 0.8 * p["in_runs"], p

    top = [k for k in doc["kernels"] if k["parent"] < 0]
    # The kernel with most samples is the one that took most time (the convolution, ~80 % here).
    assert max(top, key=lambda k: k["perf"]["samples"])["id"] == max(top, key=lambda k: k["median_ms"])["id"]

    # The generated kernel is announced under the name its profile row gives, and its samples land on it.
    gen = [k for k in top if k["impl"].startswith("jit:")]
    assert gen, [k["impl"] for k in top]
    for k in gen:
        tag = re.search(r":([0-9a-f]{8})$", k["impl"]).group(1)
        assert any(line.endswith(f" cuvil jit:{tag}") for line in lines), lines
        if k["perf"]["samples"] >= 5:
            assert k["perf"]["symbols"][0][0] == f"cuvil jit:{tag}", k["perf"]
    # oneDNN's JIT code is named too (its perf-map mode, turned on by the same switch).
    conv = [k for k in top if k["impl"].startswith("onednn:")]
    assert conv and conv[0]["perf"]["symbols"][0][0].startswith("jit_"), conv[0]["perf"]

    # The HTML report of the folded run shows the samples beside the times (in a real browser, where there is one).
    if shutil.which("chromium"):
        from chromium_page import Page
        with Page() as page:
            page.load("file://" + html)
            heads = page.evaluate("[...document.querySelectorAll('#kernels th')].map(t => t.innerText)")
            cells = page.evaluate("[...document.querySelectorAll('#kernels tr.kernel')].map(r => r.innerText)")
            assert page.errors() == [], page.errors()
        assert "perf samples %" in heads and "perf symbols" in heads, heads
        assert any("cuvil jit:" in c for c in cells), cells


def test_perf_data_errors_are_clear(tmp_path, cuvil_bin):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"format": "cuvil-profile", "version": 1, "kernels": []}))
    r = subprocess.run([cuvil_bin, "profile", str(report), "--perf-data", str(tmp_path / "missing.data")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "missing.data" in r.stderr

