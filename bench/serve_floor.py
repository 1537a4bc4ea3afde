"""The floor under a served request's cost on this machine: `bench/http_floor.c` (one thread, epoll, keep-alive,
no parsing beyond the request's length, a fixed response of the real response's size, no model) against
`cuvil serve` and the engine in process, on the same request, alternated in one run. CPU time per request of
each server process (wrk's own CPU excluded, as in serve_ratio.py), and the engine's CPU time per row at its best
batch size. The ratio engine CPU per row / floor CPU per request bounds what any HTTP server can reach of the
engine's throughput with one-row requests when the cores are the limit (serving overhead ≤ 10 % needs the
floor ≤ 1/9 of the engine's cost per row).

    PYTHONPATH=python:tests/python:scripts:bench python bench/serve_floor.py [--models mlp] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (os.path.join(ROOT, "tests", "python"), os.path.join(ROOT, "scripts"), HERE, os.path.join(ROOT, "python")):
    sys.path.insert(0, p)
from serve_bench import CUVIL  # noqa: E402
from serve_load import binary_request, expected_response_len, wrk_run  # noqa: E402
from serve_ratio import engine, repository_model, settle  # noqa: E402
from serve_util import Server, write_config  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def floor_server(work: str, response_bytes: int) -> tuple[subprocess.Popen, str]:
    exe = os.path.join(work, "http_floor")
    if not os.path.exists(exe):
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "http_floor.c")], check=True)
    port = free_port()
    proc = subprocess.Popen([exe, str(port), str(response_bytes)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("listening"), "http_floor did not start"
    return proc, f"127.0.0.1:{port}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=4)
    p.add_argument("--clients", default="1,32")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="cuvil-serve-floor-")
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}")
    for name in a.models.split(","):
        in_name, shape, out_name, model = repository_model(work, name)
        batches = [1, 8, 32, 64]
        write_config(os.path.join(work, "models"), name, max_batch_size=max(batches), max_queue_delay_us=0,
                     threads=1, instances=1, warmup=True)
        served = Server(CUVIL, os.path.join(work, "models"), "--max-connections", "128")
        floor = None
        try:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            header, body = binary_request(in_name, x, "FP32", out_name)
            expected = expected_response_len(served.url, name, header, body)
            floor, floor_url = floor_server(work, expected)
            print(f"\n{name}: request {len(body)} bytes, response {expected} bytes")
            for rnd in range(a.rounds):
                e = engine(model, shape, batches, 0.5)
                best = min(e, key=lambda b: e[b][0])
                cpu_row = e[best][0]
                print(f"  round {rnd + 1}: engine best b{best} {cpu_row * 1e6:.2f} us CPU/row")
                for c in [int(v) for v in a.clients.split(",")]:
                    for label, proc, url in (("http_floor", floor, floor_url), ("cuvil serve", served.proc,
                                                                                served.url)):
                        cpu0 = settle(proc.pid)
                        r = wrk_run(url, name, header, body, expected, work, connections=c, threads=min(c, 2),
                                    seconds=a.seconds)
                        assert r["bad"] == 0 and r["errors"] == 0, r
                        cpu_req = (settle(proc.pid) - cpu0) / r["requests"]
                        print(f"    {c:>3} clients {label:11}: {r['throughput']:9.0f} req/s, server CPU "
                              f"{cpu_req * 1e6:6.2f} us/request -> at most {cpu_row / cpu_req * 100:5.1f}% of the "
                              f"engine's best rate")
        finally:
            served.stop()
            if floor is not None:
                floor.kill()
    print(f"load average at end: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
