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
