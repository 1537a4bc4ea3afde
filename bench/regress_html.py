"""The performance CI's history as one self-contained HTML page (`bench/regress.py --html PATH`): per case, the
Cuvil / ONNX Runtime ratio of every recorded run with its spread, the baseline as a dashed line and runs that
regressed marked; in the profile report's style, with the same vendored Chart.js inlined (opens offline)."""
from __future__ import annotations

import html
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "src", "report", "assets")

_SCRIPT = r"""
const data = JSON.parse(document.getElementById('cuvil-regress').textContent);
const colors = ['#1c7ed6', '#e8590c', '#2f9e44', '#ae3ec9', '#f08c00', '#0c8599', '#c2255c', '#5c940d'];
const cases = [...new Set(data.runs.flatMap(r => Object.keys(r.cases)))].sort();
const labels = data.runs.map((r, i) => `${i + 1}: ${r.time.replace('T', ' ').replace('Z', '')}` +
                                       (r.inject && r.inject.length ? ` (inject ${r.inject.join(',')})` : ''));
const datasets = [];
cases.forEach((c, k) => {
  const color = colors[k % colors.length];
  datasets.push({label: c, borderColor: color, backgroundColor: color, tension: 0, spanGaps: true,
    data: data.runs.map(r => r.cases[c] ? r.cases[c].ratio : null),
    pointStyle: data.runs.map(r => (r.regressed || []).includes(c) ? 'crossRot' : 'circle'),
    pointRadius: data.runs.map(r => (r.regressed || []).includes(c) ? 8 : 3)});
  if (data.baseline[c]) {
    datasets.push({label: `${c} baseline`, borderColor: color, borderDash: [6, 4], pointRadius: 0, borderWidth: 1,
      data: data.runs.map(() => data.baseline[c].ratio)});
  }
});
new Chart(document.getElementById('history-chart'), {type: 'line', data: {labels, datasets},
  options: {animation: false, responsive: false, interaction: {mode: 'nearest', intersect: false},
    plugins: {title: {display: true, text: 'Cuvil time / ONNX Runtime time per run (lower is faster)'},
      tooltip: {callbacks: {afterLabel: ctx => {
        const r = data.runs[ctx.dataIndex], c = r.cases[ctx.dataset.label];
        return c ? `spread ${(100 * c.spread).toFixed(1)} % over ${c.rounds} rounds` : '';}}}},
    scales: {y: {title: {display: true, text: 'ratio'}}, x: {ticks: {maxRotation: 60, autoSkip: true}}}}});
const tbody = document.querySelector('#latest tbody');
const last = data.runs[data.runs.length - 1];
for (const c of cases) {
  const now = last && last.cases[c], base = data.baseline[c];
  const tr = document.createElement('tr');
  const cells = [c, now ? now.ratio.toFixed(3) : '-', base ? base.ratio.toFixed(3) : '-',
    now && base ? `${(100 * (now.ratio / base.ratio - 1)).toFixed(1)} %` : '-',
    now ? `${(100 * now.spread).toFixed(1)} %` : '-', last && (last.regressed || []).includes(c) ? 'regressed' : 'ok'];
  cells.forEach((v, i) => { const td = document.createElement('td'); td.textContent = v;
    if (i > 0 && i < 5) td.className = 'num'; tr.appendChild(td); });
  tbody.appendChild(tr);
}
document.body.dataset.rendered = 'yes';
"""


def _script_safe(text: str) -> str:
    """Text that cannot end the <script> element it is inlined into."""
    return text.replace("</", "<\\/")


def render(machine: str, runs: list[dict], baseline: dict) -> str:
    with open(os.path.join(ASSETS, "chartjs", "chart.min.js")) as f:
        chartjs = f.read()
    with open(os.path.join(ASSETS, "report.css")) as f:
        css = f.read()
    data = json.dumps({"machine": machine, "runs": runs, "baseline": baseline})
    title = html.escape(machine)
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>Cuvil performance history: {title}</title>\n<style>\n{css}"
            f"#latest td, #latest th {{ padding: 3px 8px; border-bottom: 1px solid #e9ecef; text-align: left; }}\n"
            f"#latest td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}\n</style>\n</head>\n<body>\n"
            f"<h1>Cuvil performance history: {title}</h1>\n"
            f"<p>bench/regress.py: each run times every case on Cuvil and ONNX Runtime, alternated in one process; "
            f"the ratio is the median over its rounds. Dashed: the stored baseline; a cross: a confirmed "
            f"regression.</p>\n"
            f"<canvas id=\"history-chart\" width=\"1100\" height=\"480\"></canvas>\n"
            f"<h2>Latest run</h2>\n<table id=\"latest\"><thead><tr><th>case</th><th>ratio</th><th>baseline</th>"
            f"<th>change</th><th>spread</th><th>status</th></tr></thead><tbody></tbody></table>\n"
            f"<footer>Made by bench/regress.py. Charts: Chart.js 3.9.1 (MIT license), inlined.</footer>\n"
            f"<script id=\"cuvil-regress\" type=\"application/json\">{_script_safe(data)}</script>\n"
            f"<script>\n{_script_safe(chartjs)}\n</script>\n<script>\n{_SCRIPT}\n</script>\n</body>\n</html>\n")


def write(path: str, machine: str, runs: list[dict], baseline: dict) -> None:
    with open(path, "w") as f:
        f.write(render(machine, runs, baseline))
