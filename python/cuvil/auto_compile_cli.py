"""`cuvil compile MODEL.onnx -o OUT.cuv --precision auto --data DIR --budget B [options]`: precision="auto" from
the command line (issue 28). The search (cuvil.auto_precision) measures the model against its fp32 self on sample
inputs, which only the Python front end runs, so the native `cuvil compile` hands this form of the command here.

    --data DIR            the samples the error is measured on: for a one-input model each .npy file is a sample;
                          otherwise each subdirectory is one, holding NAME.npy per input (as --calibration of
                          `cuvil compile --precision int8`)
    --budget B            the largest error allowed (required)
    --metric M            rel_l2 (default), cosine, top1 or max_abs (see cuvil.auto_precision)
    --calibration DIR     other samples to calibrate the int8 grids on (default: --data's)
    --calibration-method  percentile (default), minmax, entropy or mse
    --threads N           threads of the search's runs

The artifact records each node's decision (precision, reason, measured error): `cuvil inspect OUT.cuv` shows them.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def read_samples(directory: str, input_names: list) -> list:
    """The samples of `directory` in name order, each a list of arrays in the model's input order."""
    if not os.path.isdir(directory):
        raise SystemExit(f"cuvil compile: error: '{directory}' is not a directory")
    samples = []
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if len(input_names) == 1 and entry.endswith(".npy") and os.path.isfile(path):
            samples.append([np.load(path, allow_pickle=False)])
        elif len(input_names) > 1 and os.path.isdir(path):
            missing = [n for n in input_names if not os.path.isfile(os.path.join(path, n + ".npy"))]
            if missing:
                raise SystemExit(f"cuvil compile: error: sample '{path}' has no {', '.join(m + '.npy' for m in missing)}")
            samples.append([np.load(os.path.join(path, n + ".npy"), allow_pickle=False) for n in input_names])
    if not samples:
        layout = "one .npy file per sample" if len(input_names) == 1 else \
            f"one subdirectory per sample holding {', '.join(n + '.npy' for n in input_names)}"
        raise SystemExit(f"cuvil compile: error: no samples in '{directory}' (expected {layout})")
    return samples


def main(argv: "list[str] | None" = None) -> int:
    p = argparse.ArgumentParser(prog="cuvil compile", description="compile at precision='auto' into a .cuv")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--precision", required=True, choices=["auto"])
    p.add_argument("--data", required=True)
    p.add_argument("--budget", required=True, type=float)
    p.add_argument("--metric", default="rel_l2", choices=["rel_l2", "cosine", "top1", "max_abs"])
    p.add_argument("--calibration")
    p.add_argument("--calibration-method", default="percentile", choices=["percentile", "minmax", "entropy", "mse"])
    p.add_argument("--threads", type=int)
    a = p.parse_args(argv)
    if not a.model.endswith(".onnx"):
        p.error("--precision auto takes an ONNX model (.onnx)")
    if not a.budget >= 0:
        p.error("--budget must be a number >= 0")
    from . import _C
    import cuvil
    t0 = time.perf_counter()
    try:
        names = list(_C.load_onnx(a.model).input_names)
    except _C.Error as e:
        raise SystemExit(f"cuvil compile: error: {e}") from None
    data = read_samples(a.data, names)
    accuracy = dict(metric=a.metric, budget=a.budget, data=data, method=a.calibration_method)
    if a.calibration:
        accuracy["calibration"] = read_samples(a.calibration, names)
    try:
        compiled = cuvil.load_onnx(a.model, precision="auto", accuracy=accuracy, threads=a.threads, cache=False)
        compiled.save(a.output)
    except (cuvil.Error, ValueError, OSError) as e:
        raise SystemExit(f"cuvil compile: error: {e}") from None
    from .auto_precision import summary
    chosen = summary(compiled)
    mix = ", ".join(f"{n} {k}" for k, n in sorted(chosen["counts"].items()))
    print(f"wrote {a.output} ({os.path.getsize(a.output) / 2**20:.1f} MB) in {time.perf_counter() - t0:.2f} s: "
          f"{a.metric} {chosen['error']:.3g} within budget {a.budget:g}; layers: {mix or 'none calibrated'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
