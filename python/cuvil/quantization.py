"""Static post-training int8 quantization (issue 28): calibrate a compiled model on sample inputs, then run its
convolutions and matrix products u8 x s8 (kernels/onednn/int8.cpp).

Calibration runs the fp32 model on each sample with the input of every FusedConv/FusedMatMul with constant
weights as an extra output, and picks that input's u8 grid (scale, zero point; unsigned, asymmetric, always
holding 0) by ``method``: "minmax" (the observed range), "percentile" (the ``percentile``-th and
(100 - ``percentile``)-th percentiles: outliers clip) or "mse" (the range, shrunk from minmax, whose quantization
error on the samples is smallest). Weights are quantized by the kernel (s8, symmetric, per output channel).

Each quantized layer's input-quantization SQNR on the samples (10 log10 of signal over quantization-noise power)
decides whether it may stay int8: below ``min_sqnr`` dB it runs bf16 (or fp32: ``fallback``), and the report says
why. "entropy" picks the range by the KL divergence of the quantized histogram (entropy_threshold).
``CompiledModule.precision_report(*inputs)`` adds per quantized layer ``sqnr``: its output's SQNR on those inputs,
int8 model against fp32 (so errors of the layers before it count too), and ``input_sqnr`` from calibration.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional, Sequence

import numpy as np

METHODS = ("minmax", "percentile", "mse", "entropy", "dynamic")
FALLBACKS = ("bf16", "fp32")
# Values kept per layer for the percentile and MSE searches (a uniform subsample; minmax sees every value).
_SAMPLE = 1 << 20


def _as_input_list(sample: Any) -> list:
    if isinstance(sample, dict):
        return list(sample.values())
    if isinstance(sample, (tuple, list)):
        return list(sample)
    return [sample]


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(x)


def grid(lo: float, hi: float) -> tuple[float, int]:
    """The u8 grid (scale, zero point) covering [lo, hi] widened to hold 0 (so a real 0, e.g. padding, is
    exact)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"calibration saw a non-finite range [{lo}, {hi}]")
    if hi - lo <= 0:
        return 1.0, 0
    scale = (hi - lo) / 255.0
    zp = int(min(255, max(0, round(-lo / scale))))
    return scale, zp


def fake_quant(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """x on the u8 grid (what the kernel multiplies), dequantized."""
    q = np.clip(np.rint(x.astype(np.float32) * np.float32(1.0 / scale)) + zp, 0, 255)
    return ((q - zp) * scale).astype(np.float32)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref = ref.astype(np.float64)
    noise = float(np.sum((ref - got.astype(np.float64)) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0:
        return math.inf
    return 10 * math.log10(max(signal, 1e-300) / noise)


def entropy_threshold(values: np.ndarray, levels: int = 128, bins: int = 2048) -> float:
    """The clipping threshold T for |values| whose quantization to `levels` steps over [0, T] loses the least
    information: the KL divergence between the histogram of |values| clipped at T (the tail folded into the last
    bin) and that histogram merged into `levels` steps and spread back (TensorRT's entropy calibration; 255 steps
    for data that is never negative, 128 per side otherwise)."""
    a = np.abs(values.astype(np.float64))
    top = float(a.max()) if a.size else 0.0
    if top <= 0 or not np.isfinite(top):
        return top
    hist, edges = np.histogram(a, bins=bins, range=(0.0, top))
    hist = hist.astype(np.float64)
    best_kl, best_i = math.inf, bins
    for i in range(max(levels, 16), bins + 1, 8):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        nonzero = p > 0
        # Q: p's first i bins merged into `levels` steps, each step's mass spread over its nonzero bins
        idx = (np.arange(i) * levels) // i
        mass = np.bincount(idx, weights=hist[:i], minlength=levels)
        count = np.bincount(idx, weights=nonzero.astype(np.float64), minlength=levels)
        q = np.where(nonzero, mass[idx] / np.maximum(count[idx], 1), 0.0)
        ps, qs = p.sum(), q.sum()
        if ps <= 0 or qs <= 0:
            continue
        p, q = p / ps, q / qs
        m = nonzero & (q > 0)
        kl = float(np.sum(p[m] * np.log(p[m] / q[m]))) + (np.inf if np.any(nonzero & (q <= 0)) else 0.0)
        if kl < best_kl:
            best_kl, best_i = kl, i
    return float(edges[best_i])


class _Observer:
    """One layer's input statistics over the calibration samples."""

    def __init__(self):
        self.lo, self.hi = math.inf, -math.inf
        self.samples: list[np.ndarray] = []
        self.seen = 0

    def add(self, x: np.ndarray, rng: np.random.Generator, per_batch: int) -> None:
        flat = x.reshape(-1)
        if flat.size == 0:
            return
        self.lo, self.hi = min(self.lo, float(flat.min())), max(self.hi, float(flat.max()))
        if flat.size > per_batch:
            flat = flat[rng.integers(0, flat.size, per_batch)]
        self.samples.append(flat.astype(np.float32, copy=True))

    def choose(self, method: str, percentile: float) -> tuple[float, int]:
        if method == "minmax" or not self.samples:
            return grid(self.lo, self.hi)
        s = np.concatenate(self.samples)
        if method == "percentile":
            lo, hi = np.percentile(s, [100.0 - percentile, percentile])
            return grid(lo, hi)
        if method == "entropy":
            t = entropy_threshold(s, levels=255 if self.lo >= 0 else 128)
            return grid(max(self.lo, -t), min(self.hi, t))
        # mse: the minmax range shrunk by each factor, the one whose fake quantization of the samples errs least.
        best, best_err = grid(self.lo, self.hi), math.inf
        for f in np.linspace(0.2, 1.0, 41):
            g = grid(self.lo * f, self.hi * f)
            err = float(np.mean((fake_quant(s, *g) - s) ** 2))
            if err < best_err:
                best, best_err = g, err
        return best

    def input_sqnr(self, scale: float, zp: int) -> float:
        if not self.samples:
            return math.inf
        s = np.concatenate(self.samples)
        return sqnr_db(s, fake_quant(s, scale, zp))


def quantize(model, calibration: Optional[Iterable[Any]] = None, *, method: str = "minmax", percentile: float = 99.99,
             min_sqnr: Optional[float] = None, fallback: str = "bf16"):
    """Quantizes a :class:`cuvil.CompiledModule` to int8 in place and returns it.

    calibration: samples of the model's inputs, each a tuple of arrays/tensors (one per input), a dict by input
    name, or a single array for a one-input model; a few representative ones (8-32) are enough. method:
    "minmax", "percentile" (with ``percentile``, e.g. 99.99), "mse", "entropy" (the KL-divergence threshold), or
    "dynamic" (no calibration: the matrix products quantize each row of their input symmetrically at run time;
    convolutions stay fp32). min_sqnr: layers whose input quantization SQNR (dB) on the samples is below it run
    at ``fallback`` instead: "bf16" (the default; where the machine's bf16 kernel is slower than f32 the layer
    keeps f32 and says so) or "fp32" (None: every calibrated layer runs int8 where the machine runs int8 faster).
    Convolutions and products that are not int8 say why in ``precision_report``."""
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r}: fallback must be one of {', '.join(map(repr, FALLBACKS))}")
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}: method must be one of "
                         f"{', '.join(map(repr, METHODS))}")
    if not (0 < percentile <= 100):
        raise ValueError(f"percentile must be in (0, 100], got {percentile!r}")
    core = model._model
    if method == "dynamic":  # matrix products only, each row of their input quantized at run time
        info = {}
        for index, op, loc, x_name, y_name, _ in core.quant_targets():
            product = "Conv" not in op
            core.set_quant_hint(index, -1.0 if product else 0.0, 0)
            info[y_name] = dict(input_sqnr=math.nan, scale=-1.0, zero_point=128,
                                reason="" if product else "dynamic quantization is for matrix products")
        core.set_precision("int8")
        model._quant = dict(method=method, layers=info)
        model._config = dict(model._config, precision="int8")
        return model
    samples = [[_numpy(x) for x in _as_input_list(s)] for s in calibration or ()]
    if not samples:
        raise ValueError("int8 quantization needs at least one calibration sample")
    targets = core.quant_targets()
    sum_targets = core.quant_sum_targets()  # residuals: a grid of their own, for those no layer reads as X
    names = sorted({t[3] for t in targets} | {name for _, name in sum_targets})
    observers = {n: _Observer() for n in names}
    rng = np.random.default_rng(0)
    per_batch = max(1, _SAMPLE // len(samples))
    for arrays in samples:
        for name, value in zip(names, core.run_values(arrays, names, "fp32")):
            observers[name].add(value, rng, per_batch)
    info = {}
    # The layers writing the model's outputs (the logits: int8 with an f32 output) take the whole observed range
    # whatever the method: no later layer damps their error, and a clipped input moves exactly the outputs of the
    # samples with the largest activations (tests' digits CNN, entropy: logits 0.17 rel. L2 from fp32 with the
    # final layer's input clipped, 0.029 on MinMax, 0.029 with that layer in f32).
    finals = set(core.output_names)
    for index, op, loc, x_name, y_name, _ in targets:
        scale, zp = observers[x_name].choose("minmax" if y_name in finals else method, percentile)
        in_sqnr = observers[x_name].input_sqnr(scale, zp)
        keep = min_sqnr is not None and in_sqnr < min_sqnr
        reason = f"input SQNR {in_sqnr:.1f} dB < min_sqnr {min_sqnr} dB" if keep else ""
        # the hint stays (precision="auto" and the report read it); the node's own precision raises it
        core.set_quant_hint(index, scale, zp)
        core.set_node_precision(index, fallback if keep else "", reason)
        info[y_name] = dict(input_sqnr=in_sqnr, scale=scale, zero_point=zp, reason=reason,
                            precision=fallback if keep else "int8")
    for index, name in sum_targets:
        core.set_quant_sum_hint(index, *observers[name].choose(method, percentile))
    core.set_precision("int8")
    model._quant = dict(method=method, layers=info)
    model._config = dict(model._config, precision="int8")
    return model


def layer_sqnr(model, arrays: Sequence[np.ndarray]) -> dict:
    """Per quantized layer (by output name): its output's SQNR (dB), int8 run against fp32 on `arrays`."""
    core = model._model
    names = [t[4] for t in core.quant_targets() if t[5]]
    if not names:
        return {}
    ref = core.run_values(list(arrays), names, "fp32")
    got = core.run_values(list(arrays), names, "int8")
    return {n: sqnr_db(r, g) for n, r, g in zip(names, ref, got)}


