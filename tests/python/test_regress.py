"""bench/regress.py: the regression decision on synthetic measurements (an unchanged build stays green over
repeated runs, a 15 % slowdown of one case is caught), and one short real run that writes a baseline and
compares against it (report only: timings decide nothing in a test)."""
import json
import os
import random
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import regress  # noqa: E402


def rounds(ratio, spread, n, rng):
    return [ratio * (1 + rng.gauss(0, spread)) for _ in range(n)]


CASES = {"matmul": (0.9, 0.03), "conv3x3": (1.1, 0.05), "softmax": (0.7, 0.02), "add_relu_4m": (0.8, 0.04)}


def run(rng, slow=None, factor=1.0):
    return {name: regress.summarize(rounds(r * (factor if name == slow else 1), s, 15, rng))
            for name, (r, s) in CASES.items()}


def test_summary_spread_is_a_standard_deviation():
    rng = random.Random(1)
    s = regress.summarize(rounds(2.0, 0.04, 4001, rng))
    assert s["ratio"] == pytest.approx(2.0, rel=0.01)
    assert s["spread"] == pytest.approx(0.04, rel=0.1)


def test_unchanged_runs_stay_green_and_a_15_percent_slowdown_is_caught():
    rng = random.Random(7)
    baseline = run(rng)
    for _ in range(5):  # five unchanged runs
        rows = regress.compare(baseline, run(rng))
        assert all(r["status"] == "ok" for r in rows), rows
    for slow in CASES:
        rows = {r["case"]: r for r in regress.compare(baseline, run(rng, slow, 1.15))}
        assert rows[slow]["status"] == "regressed", rows[slow]
        assert all(r["status"] == "ok" for c, r in rows.items() if c != slow), rows


def test_threshold_follows_the_spread():
    quiet, noisy = {"ratio": 1, "spread": 0.01, "rounds": 16}, {"ratio": 1, "spread": 0.2, "rounds": 16}
    assert regress.threshold(quiet, quiet, 0.05) == 0.05
    assert regress.threshold(noisy, noisy, 0.05) == pytest.approx(3 * (2 ** 0.5) * 1.2533 * 0.2 / 4)
    assert regress.compare({}, {"x": quiet})[0]["status"] == "new"


def test_short_real_run(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    args = ["--rounds", "3", "--calls", "2", "--only", "softmax", "--data-dir", str(tmp_path)]
    assert regress.main(args + ["--update-baseline"]) == 0
    assert regress.main(args + ["--report-only", "--inject", "softmax=15"]) == 0
    out = capsys.readouterr().out
    assert "softmax" in out and "spread" in out
    (base,) = [p for p in os.listdir(tmp_path) if p.startswith("baseline-")]
    cases = json.load(open(tmp_path / base))["cases"]
    assert cases["softmax"]["ratio"] > 0 and cases["softmax"]["rounds"] == 3
    (hist,) = [p for p in os.listdir(tmp_path) if p.startswith("history-")]
    assert len(open(tmp_path / hist).read().splitlines()) == 2


def _fake_measure(monkeypatch, results):
    """regress.measure answering from `results` in order (each: {case: (ratio, spread)})."""
    calls = []

    def measure(rounds, n_calls, threads, inject, only=None):
        calls.append((rounds, sorted(only) if only else None))
        r = results[len(calls) - 1]
        return {c: {"ratio": v[0], "spread": v[1], "rounds": rounds} for c, v in r.items() if not only or c in only}
    monkeypatch.setattr(regress, "measure", measure)
    return calls


def test_a_regression_is_confirmed_before_it_fails(tmp_path, monkeypatch):
    args = ["--data-dir", str(tmp_path), "--rounds", "15"]
    base = {"matmul": (1.0, 0.01), "softmax": (1.0, 0.01)}
    calls = _fake_measure(monkeypatch, [base, {"matmul": (1.3, 0.01), "softmax": (1.0, 0.01)},
                                        {"matmul": (1.0, 0.01)},            # a burst of load: not confirmed
                                        {"matmul": (1.3, 0.01), "softmax": (1.0, 0.01)},
                                        {"matmul": (1.25, 0.01)}])          # a real slowdown: confirmed
    assert regress.main(args + ["--update-baseline"]) == 0
    assert regress.main(args) == 0
    assert calls[2] == (30, ["matmul"])  # only the regressed case, twice the rounds
    assert regress.main(args) == 1
    (hist,) = [p for p in os.listdir(tmp_path) if p.startswith("history-")]
    runs = [json.loads(line) for line in open(tmp_path / hist)]
    assert [r.get("regressed") for r in runs] == [None, [], ["matmul"]]
    assert runs[2]["cases"]["matmul"]["ratio"] == 1.25  # the confirming measurement is what is recorded


def test_a_machine_without_baseline(tmp_path, monkeypatch, capsys):
    _fake_measure(monkeypatch, [{"matmul": (1.1, 0.02)}] * 2)
    assert regress.main(["--data-dir", str(tmp_path)]) == 2
    assert regress.main(["--data-dir", str(tmp_path), "--if-baseline"]) == 0  # CI on another kind of machine
    assert "no baseline for this machine" in capsys.readouterr().err


def test_history_chart_renders_in_chromium(tmp_path):
    import shutil
    if shutil.which("chromium") is None:
        pytest.skip("needs Debian's chromium")
    from chromium_page import Page
    rng = random.Random(3)
    runs = [{"time": f"2026-12-0{1 + i // 3}T10:0{i % 3}:00Z", "inject": ["matmul=15"] if i == 4 else [],
             "cases": run(rng, "matmul" if i == 4 else None, 1.15), "regressed": ["matmul"] if i == 4 else []}
            for i in range(6)]
    path = tmp_path / "history.html"
    import regress_html
    regress_html.write(str(path), "Test_CPU-t2", runs, run(rng))
    text = path.read_text()
    assert "<script src" not in text and "http" not in text.split("<script>")[0]  # self-contained
    with Page() as page:
        page.load(path.as_uri())
        assert page.evaluate("document.body.dataset.rendered") == "yes"
        assert page.errors() == []
        assert page.evaluate("document.querySelectorAll('#latest tbody tr').length") == len(CASES)
        assert page.evaluate("Chart.getChart('history-chart').data.datasets.length") == 2 * len(CASES)
        # the canvas was drawn on: not one colour everywhere
        assert page.evaluate("""(() => { const c = document.getElementById('history-chart');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const s = new Set(); for (let i = 0; i < d.length; i += 4 * 97) s.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2] + ',' + d[i + 3]);
            return s.size; })()""") > 3


def test_baseline_from_runs_adds_the_spread_between_runs():
    runs = [{"cases": {"m": {"ratio": r, "spread": 0.01, "rounds": 15}}} for r in (1.0, 1.02, 0.98, 1.01, 1.5)]
    b = regress.baseline_from_runs(runs)["m"]
    assert b["ratio"] == 1.01 and b["runs"] == 5 and b["rounds"] == 15
    assert b["run_spread"] == pytest.approx(1.4826 * 0.01 / 1.01)  # the outlier run moves the median, not much else
    assert regress.threshold(b, {"ratio": 1, "spread": 0.01, "rounds": 15}, 0.0) > \
        regress.threshold({k: v for k, v in b.items() if k != "run_spread"}, {"ratio": 1, "spread": 0.01, "rounds": 15}, 0.0)
