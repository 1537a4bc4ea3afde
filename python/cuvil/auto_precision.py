"""precision="auto" (issue 28): the fastest precision per node that keeps the model within an accuracy budget.

``cuvil.compile(model, args, precision="auto", accuracy={"metric": ..., "budget": ..., "data": [...]})`` compiles
at fp32, calibrates every convolution and matrix product for int8 on the data (``"calibration"``: other samples,
``"method"``: the calibration method, default "percentile"), and measures the error of the whole model against
fp32 on the data. While it is over the budget, the most harmful nodes move up: int8 -> bf16 first, then bf16 ->
fp32, one node, then 2, 4, ... at a time (harm: the node's measured input-quantization noise, its input SQNR on
the data; the worst first), re-measuring after each step. Everything in fp32 is the fp32 model, so the loop always
ends within the budget.

Metrics (the error, lower is better): "rel_l2" (relative L2 of all outputs), "cosine" (1 - the lowest cosine
similarity of an output row to fp32's), "top1" (the fraction of rows whose argmax differs from fp32's), "max_abs",
or a callable(reference_outputs, outputs) -> float over the lists of output arrays of all samples.

Each node's decision (precision, reason, measured error) is in the node's attributes (so the profile, `cuvil
inspect` and a saved .cuv show it) and in ``CompiledModule.precision_report``; the search's steps are in
``compiled._auto``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

METRICS = ("rel_l2", "cosine", "top1", "max_abs")


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return a.reshape(-1, a.shape[-1]) if a.ndim >= 1 and a.size else a.reshape(1, -1)


def metric_error(metric: "str | Callable", ref: list, got: list) -> float:
    """The error of `got` (output arrays of every sample) against `ref` by `metric`."""
    if callable(metric):
        return float(metric(ref, got))
    if metric == "rel_l2":
        num = sum(float(np.sum((np.asarray(g, np.float64) - np.asarray(r, np.float64)) ** 2)) for r, g in zip(ref, got))
        den = sum(float(np.sum(np.asarray(r, np.float64) ** 2)) for r in ref)
        return math.sqrt(num / max(den, 1e-300))
    if metric == "max_abs":
        return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(r, np.float64)))) for r, g in zip(ref, got))
    worst = 0.0
    changed = rows = 0
    for r, g in zip(ref, got):
        r, g = _rows(r), _rows(g)
        if metric == "cosine":
            num = np.sum(r * g, 1)
            den = np.linalg.norm(r, axis=1) * np.linalg.norm(g, axis=1)
            cos = np.where(den > 0, num / np.maximum(den, 1e-300), 1.0)
            worst = max(worst, float(np.max(1 - cos)))
        else:
            changed += int(np.sum(np.argmax(r, 1) != np.argmax(g, 1)))
            rows += r.shape[0]
    return worst if metric == "cosine" else changed / max(rows, 1)


def _check(accuracy: Any) -> tuple:
    if not isinstance(accuracy, dict):
        raise ValueError("precision='auto' needs accuracy={'metric': ..., 'budget': ..., 'data': [input samples]}")
    unknown = set(accuracy) - {"metric", "budget", "data", "calibration", "method"}
    if unknown:
        raise ValueError(f"unknown accuracy key(s) {sorted(unknown)}: the keys are metric, budget, data, "
                         "calibration, method")
    metric = accuracy.get("metric", "rel_l2")
    if not callable(metric) and metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}: metric must be one of {', '.join(map(repr, METRICS))} "
                         "or a callable(reference_outputs, outputs) -> error")
    budget = accuracy.get("budget")
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget >= 0:
        raise ValueError(f"accuracy['budget'] must be a number >= 0 (the largest error allowed), got {budget!r}")
    data = list(accuracy.get("data") or ())
    if not data:
        raise ValueError("accuracy['data'] must hold at least one input sample")
    return metric, float(budget), data


def choose(compiled, accuracy: dict):
    """Runs the search on a CompiledModule compiled at fp32 and returns it, its nodes' precisions set."""
    from .quantization import _as_input_list, _numpy, quantize
    metric, budget, data = _check(accuracy)
    core = compiled._model
    samples = [[_numpy(x) for x in _as_input_list(s)] for s in data]

    def outputs() -> list:
        got = []
        for arrays in samples:
            got.extend(np.asarray(o) for o in core.run(arrays))
        return got

    core.set_precision("fp32")
    core.keep_model_int8_in_f32()  # a QDQ model's own int8 layers too: the reference is the float model
    ref = outputs()
    quantize(compiled, accuracy.get("calibration", data), method=accuracy.get("method", "percentile"))
    layers = compiled._quant["layers"]
    targets = [(index, y_name) for index, _, _, _, y_name, hinted in core.quant_targets() if hinted]
    # harm: the input's quantization noise on the data (relative power), worst first
    noise = {y: 10 ** (-layers[y]["input_sqnr"] / 10) if math.isfinite(layers[y]["input_sqnr"]) else 0.0
             for _, y in targets}
    order = sorted(targets, key=lambda t: -noise[t[1]])
    level = {y: "int8" for _, y in targets}
    error = metric_error(metric, ref, outputs())
    first = error
    steps = [dict(moved=[], to="", error=error)]
    name = metric if isinstance(metric, str) else getattr(metric, "__name__", "metric")

    why: dict = {}

    def apply(moved: list, to: str) -> None:
        for index, y in moved:
            level[y] = to
            why[y] = (f"auto: {name} {error:.3g} > budget {budget:.3g} with it {level_before[y]}; input SQNR "
                      f"{layers[y]['input_sqnr']:.1f} dB, among the most harmful")
            core.set_node_precision(index, to, why[y])

    for to, source in (("bf16", "int8"), ("fp32", "bf16")):
        batch = 1
        while error > budget:
            candidates = [t for t in order if level[t[1]] == source]
            if not candidates:
                break
            moved = candidates[:batch]
            level_before = {y: level[y] for _, y in moved}
            apply(moved, to)
            error = metric_error(metric, ref, outputs())
            steps.append(dict(moved=[y for _, y in moved], to=to, error=error))
            batch *= 2
        if error <= budget:
            break
    if error > budget:  # what is left lowered is not a calibrated layer: the fp32 model itself
        core.set_precision("fp32")
        error = 0.0
        steps.append(dict(moved=["(model)"], to="fp32", error=error))
    nodes = {}
    for index, y in targets:
        p = level[y] if core.precision != "fp32" else "fp32"
        reason = "" if p == "int8" else why.get(y, "auto: the fp32 model (no mix met the budget)")
        nodes[y] = dict(precision=p, reason=reason, input_sqnr=layers[y]["input_sqnr"], noise=noise[y])
        layers[y]["precision"] = p
        if p != "int8":
            layers[y]["reason"] = reason
    compiled._auto = dict(metric=name, budget=budget, error=error, int8_error=first, steps=steps, nodes=nodes)
    compiled._config = dict(compiled._config, precision=core.precision)
    return compiled


def summary(compiled) -> dict:
    """What the search chose (compiled._auto): counts per precision and the final error."""
    auto = getattr(compiled, "_auto", None) or {}
    counts: dict = {}
    for n in auto.get("nodes", {}).values():
        counts[n["precision"]] = counts.get(n["precision"], 0) + 1
    return dict(counts=counts, error=auto.get("error"), budget=auto.get("budget"), metric=auto.get("metric"))

