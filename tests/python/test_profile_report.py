"""The profile report: its JSON (every kernel with time, implementation, shapes, rates and source; latency beside the
sum of kernels), the HTML page loaded in headless Chromium (no console error; the table, the roofline and the bar
chart rendered), the Chrome trace, `cuvil profile --html/--json/--trace`, `--diff` and `cuvil roofs`."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import cuvil

torch = pytest.importorskip("torch")
nn = torch.nn

THIS_FILE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def _roofs_cache(tmp_path_factory, monkeypatch):
    # The roofs are measured once into a cache of this test session's own (not the user's).
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cuvil-cache"))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = torch.tanh(y * 0.5 + 1.0) - y.sigmoid()  # a fused element-wise kernel
        return self.fc(y.flatten(1)).softmax(-1)


@pytest.fixture(scope="module")
def compiled_net():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    return cuvil.compile(Net().eval(), (x,)), x


def test_report_json(compiled_net):
    compiled, x = compiled_net
    r = compiled.profile(x).report(iters=5)
    assert r["format"] == "cuvil-profile" and r["version"] == 1
    assert r["iters"] == 5
    top = [k for k in r["kernels"] if k["parent"] < 0]
    assert top
    assert r["kernel_sum_ms"] == pytest.approx(sum(k["median_ms"] for k in top))
    assert r["latency_ms"]["median"] > 0 and r["latency_ms"]["p90"] >= r["latency_ms"]["median"]
    assert r["latency_minus_kernels_ms"] == pytest.approx(r["latency_ms"]["median"] - r["kernel_sum_ms"])
    # Unattributed: inside each profiled run, its wall time minus its kernels' (the timeline's), median over runs.
    runs = r["timeline"]["runs"]
    assert len(runs) == 5
    gaps = sorted(run["wall_ms"] - sum(k[2] for k in run["kernels"]) for run in runs)
    assert r["unattributed_ms"] == pytest.approx(gaps[2])
    assert 0 < r["unattributed_ms"] < min(run["wall_ms"] for run in runs)
    assert r["kernels_per_run_ms"] == pytest.approx(sorted(sum(k[2] for k in run["kernels"]) for run in runs)[2])
    assert sum(k["share"] for k in top) == pytest.approx(1.0)
    assert r["roofs"]["fma_gflops"] > 0 and r["roofs"]["dram_gbps"] > 0
    for k in top:
        assert k["impl"], k
        assert 0 <= k["median_ms"] <= k["p90_ms"], k
        assert k["outputs"] and all("[" in t for t in k["outputs"]), k
        # every node of a torch model carries the user's line (this file), not torch's
        assert THIS_FILE in k["location"]["text"] or THIS_FILE in k["location"]["stack"], k
    conv = next(k for k in top if k["op"].endswith("Conv"))
    assert conv["flops_exact"] and conv["flops"] >= 2 * 2 * 8 * 6 * 6 * 3 * 3 * 3  # (2 per multiply-add)
    assert conv["gflops_s"] > 0 and 0 < conv["roof_pct"], conv
    fused = [k for k in top if k["op"] == "FusedKernel"]
    assert fused, [k["op"] for k in top]
    for k in fused:
        assert len(k["body"]) >= 1
        for n in k["body"]:
            assert THIS_FILE in n["location"]["text"], n


def _top_rows(r):
    return len([k for k in r["kernels"] if k["parent"] < 0])


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_html_renders_in_chromium(compiled_net, tmp_path):
    from chromium_page import Page
    compiled, x = compiled_net
    prof = compiled.profile(x)
    path = tmp_path / "report.html"
    prof.to_html(path, iters=3)
    html = path.read_text()
    assert "<script src" not in html and "http://" not in html.split("cuvil-profile")[0]  # self-contained
    with Page() as page:
        page.load(path.as_uri())
        state = page.evaluate("""(() => {
            const c = document.getElementById('roofline-chart');
            const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let painted = 0;
            for (let i = 3; i < px.length; i += 4) painted += px[i] > 0;
            return {rendered: document.body.dataset.rendered, rows: document.querySelectorAll('#kernels tr.kernel').length,
                    points: +document.body.dataset.rooflinePoints, bars: +document.body.dataset.opBars, painted,
                    summary: document.getElementById('summary').innerText,
                    errors: document.getElementById('errors').textContent};
        })()""")
        assert page.errors() == [], page.errors()
        assert state["rendered"] == "ok", state
        assert state["rows"] == _top_rows(prof.report()), state
        assert state["points"] >= 2 and state["bars"] >= 2 and state["painted"] > 1000, state
        assert "unattributed" in state["summary"], state
        # sorting by a column and expanding a fused kernel work without errors
        page.evaluate("document.querySelector('#kernels th[data-col=\"0\"]').click()")
        page.evaluate("document.querySelector('button.expand').click()")
        visible = page.evaluate("[...document.querySelectorAll('#kernels tr.body')].filter(r => !r.hidden).length")
        assert visible == 1
        assert THIS_FILE in page.evaluate("document.querySelector('table.ir-nodes').innerText")
        assert page.errors() == []
        shot = os.environ.get("CUVIL_REPORT_SCREENSHOT")  # (docs/images/profile-report.png was made this way)
        if shot:
            page.screenshot(shot)


def test_broken_page_is_caught(tmp_path):
    """The check itself fails on a page with a script error (a test that cannot fail proves nothing)."""
    if shutil.which("chromium") is None:
        pytest.skip("needs Debian's chromium")
    from chromium_page import Page
    path = tmp_path / "bad.html"
    path.write_text("<html><body><script>console.error('bad'); notAFunction();</script></body></html>")
    with Page() as page:
        page.load(path.as_uri())
        errs = page.errors()
    assert any("bad" in e for e in errs) and any("notAFunction" in e for e in errs), errs


def test_chrome_trace(compiled_net, tmp_path):
    compiled, x = compiled_net
    prof = compiled.profile(x)
    path = tmp_path / "trace.json"
    prof.to_chrome_trace(path, iters=2)
    t = json.loads(path.read_text())
    spans = [e for e in t["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(prof.report()["kernels"])
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and e["args"]["impl"] for e in spans)
    top = sorted((e for e in spans if e["tid"] == 1), key=lambda e: e["ts"])
    for a, b in zip(top, top[1:]):  # kernels of one run, each with its own time in it, do not overlap
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3


def _onnx_model(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="proj"),
             helper.make_node("Relu", ["m"], ["r"], name="act"),
             helper.make_node("Add", ["r", "x"], ["y"], name="residual")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 16])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_cli_reports_diff_and_roofs(cuvil_bin, tmp_path):
    model = str(tmp_path / "m.onnx")
    _onnx_model(model)
    env = dict(os.environ)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        r = subprocess.run([cuvil_bin, "profile", model, "--iters", "3", "--json", str(out), "--html",
                            str(tmp_path / "r.html"), "--trace", str(tmp_path / "t.json")],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
    doc = json.loads(a.read_text())
    assert doc["format"] == "cuvil-profile" and doc["model"] == model
    assert all(k["location"]["text"] for k in doc["kernels"])  # ONNX node names
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    r = subprocess.run([cuvil_bin, "profile", "--diff", str(a), str(b)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "end-to-end latency" in r.stdout and "sum of kernels" in r.stdout
    r = subprocess.run([cuvil_bin, "profile", "--diff", str(a), model], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not a cuvil profile report" in r.stderr, r.stderr
    r = subprocess.run([cuvil_bin, "roofs", "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    roofs = json.loads(r.stdout[r.stdout.index("{"):])
    assert roofs["fma_gflops"] > 1 and roofs["dram_gbps"] > 0.1 and roofs["cache_gbps"] > 0.1
    # and not beyond what a core can do (64 FLOP and 128 bytes a cycle at 8 GHz): a measurement the compiler
    # optimized away would show as an impossible rate
    assert roofs["fma_gflops"] < 512 * roofs["threads"] and roofs["cache_gbps"] < 1024 * roofs["threads"], roofs
