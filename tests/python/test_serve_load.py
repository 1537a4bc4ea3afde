"""A bounded load test of `cuvil serve` with wrk on loopback: 32 connections for a few seconds against the
dynamically batched MLP; every response must be a 200 of the right size. Prints throughput and latencies next to
the engine's own in-process throughput (no timing thresholds: the machine is shared)."""
import json
import os
import subprocess

import numpy as np
import pytest

from serve_load import binary_request, expected_response_len, wrk_run
from serve_util import Server, mlp_model, save, write_config


def test_wrk_load_mlp(cuvil_bin, tmp_path):
    repo = str(tmp_path / "models")
    model_path = os.path.join(repo, "mlp", "1", "model.onnx")
    save(mlp_model(1, width=256, hidden=64), model_path)
    write_config(repo, "mlp", max_batch_size=32, max_queue_delay_us=500)
    s = Server(cuvil_bin, repo, "--max-connections", "64")
    try:
        x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
        header, body = binary_request("x", x, "FP32", "y")
        expected = expected_response_len(s.url, "mlp", header, body)
        res = wrk_run(s.url, "mlp", header, body, expected, str(tmp_path), connections=32, seconds=3)
        print(f"\nwrk 32 connections, 3 s, batch-1 requests: {res['throughput']:.0f} req/s, "
              f"p50 {res['p50_us']} us, p99 {res['p99_us']} us, {res['requests']} requests")
        assert res["requests"] > 0
        assert res["bad"] == 0 and res["errors"] == 0, res["wrk_output"]
        execs = s.metric("cuvil_inference_exec_total", model="mlp")
        rows = s.metric("cuvil_inference_batch_size_sum", model="mlp")
        print(f"server: {rows:.0f} rows in {execs:.0f} runs (mean batch {rows / max(execs, 1):.1f})")
        assert rows >= res["requests"]  # every answered request ran (plus the size probe)
    finally:
        assert s.stop() == 0
    # The engine's own throughput on the same model, in-process, for the report.
    for b in (1, 32):
        r = subprocess.run([cuvil_bin, "bench", model_path, "--dim", f"batch={b}", "--iters", "200", "--json"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        ms = json.loads(r.stdout)["median_ms"]
        print(f"in-process batch {b}: {b / ms * 1e3:.0f} rows/s")
