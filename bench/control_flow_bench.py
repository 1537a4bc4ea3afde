"""Control flow and dynamic shapes: Cuvil against TorchScript (scripted + frozen, PyTorch's own way of keeping
Python control flow) and, for the loop model, ONNX Runtime.

    PYTHONPATH=python /usr/bin/python3 bench/control_flow_bench.py [--iters N] [--ort]

1. An RNN cell unrolled by a `for` loop over 64 steps (hidden 128, batch 1): one compile with a symbolic step
   count; median ms per call, Cuvil and TorchScript alternated. With --ort the same loop, exported to ONNX
   (a Loop node), is also timed by the C++ harness (build/bin/cuvil_bench_models, ORT's C API).
2. A transformer encoder (2 layers, d_model 256) compiled once with symbolic batch and sequence, called at mixed
   shapes: the first call at each new shape (Cuvil plans it and prepares its kernels; nothing is recompiled)
   next to the steady-state call at that shape, and TorchScript's steady state.

Not a test: nothing here asserts on time. Outputs are checked against PyTorch (relative L2).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import cuvil  # noqa: E402


class Rnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.u = torch.nn.Linear(64, 128), torch.nn.Linear(128, 128)

    def forward(self, xs, h):
        for t in range(xs.shape[0]):
            h = torch.tanh(self.w(xs[t]) + self.u(h))
        return h


def rel_l2(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref.detach(), np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def alternate(fns: dict, iters: int) -> dict:
    for f in fns.values():
        for _ in range(3):
            f()
    times = {k: [] for k in fns}
    for _ in range(iters):
        for k, f in fns.items():
            times[k].append(ms(f))
    return {k: statistics.median(v) for k, v in times.items()}


def bench_rnn(iters: int, with_ort: bool) -> None:
    torch.manual_seed(0)
    model = Rnn().eval()
    xs, h = torch.randn(64, 1, 64), torch.zeros(1, 128)
    c = cuvil.compile(model, (xs, h), dynamic_shapes={"xs": {0: "steps"}})
    ts = torch.jit.freeze(torch.jit.script(model))
    with torch.no_grad():
        err = rel_l2(c(xs, h), model(xs, h))
        med = alternate({"cuvil": lambda: c(xs, h), "torchscript": lambda: ts(xs, h)}, iters)
    print(f"RNN loop, 64 steps (rel L2 vs eager {err:.1e})")
    print(f"  cuvil {med['cuvil']:8.3f} ms   TorchScript {med['torchscript']:8.3f} ms   "
          f"cuvil/TS {med['cuvil'] / med['torchscript']:.2f}x")
    if with_ort:
        out = os.path.join(ROOT, "out", "bench")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "rnn_loop.onnx")
        torch.onnx.export(torch.jit.script(model), (xs, h), path, input_names=["xs", "h"], output_names=["y"],
                          opset_version=14, dynamo=False)
        ort = subprocess.run([os.path.join(ROOT, "scripts", "install_ort.sh")], capture_output=True, text=True)
        lib = ort.stdout.strip().splitlines()[-1] if ort.returncode == 0 else ""
        harness = os.path.join(ROOT, "build", "bin", "cuvil_bench_models")
        if lib and os.path.exists(harness):
            r = subprocess.run([harness, "--ort", lib, "--iters", str(iters), "--warmup", "3", path],
                               capture_output=True, text=True)
            print("  ONNX export (Loop) through the C++ harness, ORT vs Cuvil:")
            print("\n".join("    " + line for line in r.stdout.strip().splitlines()[-2:]) or r.stderr)


def compilations(c) -> int:
    """Machine code made so far: generated kernels compiled by LLVM plus oneDNN primitives created."""
    st = c.stats()
    return st["generated_kernels_compiled"] + st["onednn_primitives_created"]


def bench_encoder(iters: int) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    c = cuvil.compile(model, (torch.randn(2, 16, 256),), dynamic_shapes={"src": {0: "batch", 1: "seq"}})
    ts = torch.jit.freeze(torch.jit.script(model))
    print("Transformer encoder (2 layers, d_model 256), one compile, mixed shapes")
    print("  'compiled': generated kernels compiled + oneDNN primitives created by the first call at that shape")
    print(f"  {'batch x seq':>12} {'first call':>11} {'steady':>9} {'first/steady':>13} {'compiled':>9} "
          f"{'TorchScript':>12} {'cuvil/TS':>9} {'rel L2':>8}")
    with torch.no_grad():
        for batch, seq in [(1, 7), (3, 64), (8, 128), (1, 300), (8, 16), (3, 200)]:
            x = torch.randn(batch, seq, 256)
            before = compilations(c)
            first = ms(lambda: c(x))
            made = compilations(c) - before
            med = alternate({"cuvil": lambda: c(x), "torchscript": lambda: ts(x)}, iters)
            err = rel_l2(c(x), model(x))
            print(f"  {batch:>5} x {seq:<4} {first:9.2f} ms {med['cuvil']:6.2f} ms {first / med['cuvil']:12.2f}x "
                  f"{made:9d} {med['torchscript']:9.2f} ms {med['cuvil'] / med['torchscript']:8.2f}x {err:8.1e}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--ort", action="store_true", help="also time the exported loop model on ONNX Runtime")
    a = p.parse_args()
    torch.set_num_threads(2)
    bench_rnn(a.iters, a.ort)
    bench_encoder(a.iters)


if __name__ == "__main__":
    main()
