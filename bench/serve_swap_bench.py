"""What a hot weight swap costs a served model: `cuvil serve` on a ResNet-50 `.cuv` under wrk, first without swaps,
then while a new weights version is loaded every few seconds (POST /v2/repository/models/M/load); prints each
swap's time (from the server's log), and p50/p99 and failures of both phases, alternated for --rounds.

    PYTHONPATH=python:tests/python:scripts:bench python bench/serve_swap_bench.py [--model resnet50] [--seconds 15]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (os.path.join(ROOT, "tests", "python"), os.path.join(ROOT, "scripts"), HERE, os.path.join(ROOT, "python")):
    sys.path.insert(0, p)
import cuvil  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from serve_bench import CUVIL, export  # noqa: E402
from serve_load import binary_request, expected_response_len, wrk_run  # noqa: E402
from serve_util import Server, write_config  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--seconds", type=int, default=15)
    p.add_argument("--every", type=float, default=3.0, help="seconds between swaps")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--rounds", type=int, default=1)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="cuvil-swap-bench-")
    onnx_path = os.path.join(work, "v1.onnx")
    in_name, shape, out_name = export(a.model, onnx_path)
    # A second set of weights: every floating-point initializer scaled (the same graph).
    m = onnx.load(onnx_path)
    for t in m.graph.initializer:
        arr = numpy_helper.to_array(t)
        if arr.dtype == np.float32:
            t.CopyFrom(numpy_helper.from_array(arr * np.float32(1.01), t.name))
    onnx.save(m, os.path.join(work, "v2.onnx"))
    cuvs = []
    for v in ("v1", "v2"):
        cuvs.append(os.path.join(work, f"{v}.cuv"))
        cuvil.load_onnx(os.path.join(work, f"{v}.onnx"), cache=False).save(cuvs[-1])
    repo = os.path.join(work, "models")
    os.makedirs(os.path.join(repo, a.model, "1"))
    shutil.copy(cuvs[0], os.path.join(repo, a.model, "1", "model.cuv"))
    write_config(repo, a.model, max_batch_size=4, max_queue_delay_us=0, warmup=True)
    s = Server(CUVIL, repo)
    version = 1
    try:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        header, body = binary_request(in_name, x, "FP32", out_name)
        expected = expected_response_len(s.url, a.model, header, body)
        print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
        for rnd in range(a.rounds):
            r = wrk_run(s.url, a.model, header, body, expected, work, connections=a.clients, seconds=a.seconds)
            print(f"round {rnd + 1} no swaps:  {r['requests']} requests, p50 {r['p50_us'] / 1e3:.1f} ms, "
                  f"p99 {r['p99_us'] / 1e3:.1f} ms, bad {r['bad']}, errors {r['errors']}")
            stop, loads = threading.Event(), []

            def swapper():
                nonlocal version
                while not stop.wait(a.every):
                    version += 1
                    d = os.path.join(repo, a.model, str(version))
                    os.makedirs(d)
                    shutil.copy(cuvs[(version - 1) % 2], os.path.join(d, "model.cuv"))
                    t0 = time.perf_counter()
                    req = urllib.request.Request(f"http://{s.url}/v2/repository/models/{a.model}/load", data=b"",
                                                 method="POST")
                    urllib.request.urlopen(req, timeout=300).read()
                    loads.append(time.perf_counter() - t0)

            t = threading.Thread(target=swapper)
            t.start()
            r = wrk_run(s.url, a.model, header, body, expected, work, connections=a.clients, seconds=a.seconds)
            stop.set()
            t.join()
            print(f"round {rnd + 1} {len(loads)} swaps: {r['requests']} requests, p50 {r['p50_us'] / 1e3:.1f} ms, "
                  f"p99 {r['p99_us'] / 1e3:.1f} ms, bad {r['bad']}, errors {r['errors']}; load requests took "
                  + ", ".join(f"{v * 1e3:.0f}" for v in loads) + " ms")
    finally:
        s.stop()
    times = re.findall(r"swapped the weights of model '[^']+' \(version \d+\) in (\d+) ms", s.log())
    print(f"server-side swap times (ms): {' '.join(times)}")


if __name__ == "__main__":
    main()
