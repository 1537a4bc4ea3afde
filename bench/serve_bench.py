"""Serving overhead: `cuvil serve` with dynamic batching under wrk versus the engine's own best throughput over
batch sizes, in-process (`cuvil bench`), for the MLP (784-128-10), ResNet-50 and BERT-base (bench_models.py's
12-layer encoder, 128 tokens); p50/p99 latencies at several client counts, and batch-1 latency on an idle server
versus the engine's batch-1 latency. Requests use Triton's binary tensor extension.

    PYTHONPATH=python:tests/python:scripts python bench/serve_bench.py [--models mlp,resnet50,bert_base] [--seconds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from serve_load import binary_request, expected_response_len, wrk_run  # noqa: E402
from serve_util import Server, write_config  # noqa: E402

CUVIL = os.path.join(ROOT, "build", "bin", "cuvil")


def export(name: str, path: str) -> tuple[str, tuple, str]:
    """ONNX with a dynamic batch dim: (input name, one request's shape, output name)."""
    import torch
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if name == "mlp":
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
        x = torch.randn(1, 784)
    elif name == "bert_base":
        sys.path.insert(0, HERE)
        import bench_models  # bench/bench_models.py
        m, x = bench_models.build("bert_base")
    else:
        import models  # scripts/models.py
        m = models.build(name)
        x = torch.randn(1, 3, 224, 224)
    with warnings.catch_warnings():  # (autograd on: under no_grad the encoder takes a path export cannot trace)
        warnings.simplefilter("ignore")
        torch.onnx.export(m, x, path, input_names=["input"], output_names=["output"], opset_version=14,
                          dynamo=False, dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    return "input", tuple(x.shape), "output"


def engine_ms(path: str, batch: int, iters: int) -> float:
    r = subprocess.run([CUVIL, "bench", path, "--dim", f"batch={batch}", "--iters", str(iters), "--json"],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout)["median_ms"]


def http_floor(url: str, connections: int, seconds: int) -> float:
    """Requests/s of the no-op GET /v2/health/live under the same wrk load: what the HTTP layer alone allows on
    this machine now, the ceiling for any model served over REST."""
    import shutil
    r = subprocess.run([shutil.which("wrk"), "-t", str(min(connections, 2)), "-c", str(connections), "-d",
                        f"{seconds}s", f"http://{url}/v2/health/live"], capture_output=True, text=True,
                       timeout=seconds + 60)
    for line in r.stdout.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(r.stdout + r.stderr)


def engine_best(path: str, batches: list, big: bool) -> tuple[float, dict]:
    rows = {b: engine_ms(path, b, 10 if big else 300) for b in batches}
    return max(b / ms * 1e3 for b, ms in rows.items()), rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp,resnet50")
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--clients", default="1,8,32")
    p.add_argument("--delay-us", type=int, default=0, help="max_queue_delay_us (0: eager batching)")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="cuvil-serve-bench-")
    for name in a.models.split(","):
        big = name != "mlp"
        path = os.path.join(work, "models", name, "1", "model.onnx")
        in_name, shape, out_name = export(name, path)
        batches = [1, 2, 4, 8] if big else [1, 4, 16, 32, 64]
        # The machine is shared: in-process and served runs alternate (before, served, after) and the served
        # throughput is compared with the mean of the two in-process bests.
        best, rows = engine_best(path, batches, big)
        print(f"\n{name}: in-process (cuvil bench, median): " +
              ", ".join(f"b{b} {ms:.3f} ms = {b / ms * 1e3:.0f}/s" for b, ms in rows.items()) +
              f"; best {best:.0f}/s")
        max_batch = max(batches)
        write_config(os.path.join(work, "models"), name, max_batch_size=max_batch, max_queue_delay_us=a.delay_us,
                     warmup=True)
        s = Server(CUVIL, os.path.join(work, "models"), "--max-connections", "128")
        try:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            header, body = binary_request(in_name, x, "FP32", out_name)
            expected = expected_response_len(s.url, name, header, body)
            for c in [int(v) for v in a.clients.split(",")]:
                e0 = s.metric("cuvil_inference_exec_total", model=name)
                n0 = s.metric("cuvil_inference_batch_size_sum", model=name)
                r = wrk_run(s.url, name, header, body, expected, work, connections=c, threads=min(c, 2),
                            seconds=a.seconds)
                print(f"  served, {c:>3} clients: {r['throughput']:8.0f}/s ({r['throughput'] / best * 100:5.1f}% of "
                      f"in-process best), p50 {r['p50_us'] / 1e3:8.3f} ms, p99 {r['p99_us'] / 1e3:8.3f} ms, "
                      f"mean batch {(s.metric('cuvil_inference_batch_size_sum', model=name) - n0) / max(1, s.metric('cuvil_inference_exec_total', model=name) - e0):.1f}, "
                      f"bad {r['bad']}, errors {r['errors']}")
            for c in [int(v) for v in a.clients.split(",")]:
                print(f"  HTTP floor (GET /v2/health/live), {c:>3} clients: {http_floor(s.url, c, a.seconds):8.0f}/s")
            print(f"  idle batch-1 engine latency {rows[1]:.3f} ms")
        finally:
            s.stop()
        after, rows2 = engine_best(path, batches, big)
        print(f"  in-process best again after serving: {after:.0f}/s (before {best:.0f}/s; the machine is shared, "
              f"so ratios are noisy)")


if __name__ == "__main__":
    main()
