"""Served versus in-process on a shared machine, alternated in one run: `cuvil serve` (one instance, one thread per
run, dynamic batching) under wrk against the same `.cuv` run in this process (`cuvil.load(threads=1)`) over batch
sizes. Besides wall-clock rates, which a loaded machine skews, it compares CPU time: the engine's CPU per row at
its best batch size against the server process's CPU per row it ran (HTTP, protocol, batcher and the run
together). When the cores are the limit, served throughput / in-process throughput = the inverse ratio of those
CPU costs, and the CPU costs hold under load (they ignore time spent waiting for a core).

    PYTHONPATH=python:tests/python:scripts:bench python bench/serve_ratio.py [--models mlp,resnet50,bert_base]
        [--rounds 2] [--seconds 5] [--clients 1,32]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (os.path.join(ROOT, "tests", "python"), os.path.join(ROOT, "scripts"), HERE, os.path.join(ROOT, "python")):
    sys.path.insert(0, p)
import cuvil  # noqa: E402
from serve_bench import CUVIL, export  # noqa: E402
from serve_load import binary_request, expected_response_len, wrk_run  # noqa: E402
from serve_util import Server, write_config  # noqa: E402


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int) -> float:
    """Waits until the server has finished the runs still in progress (its CPU time stops growing); returns it."""
    last = proc_cpu(pid)
    while True:
        time.sleep(0.3)
        now = proc_cpu(pid)
        if now - last < 0.02:
            return now
        last = now


def repository_model(work: str, name: str):
    """Exports bench model `name`, saves it as version 1 of a model repository under `work/models` and loads that
    `.cuv` in this process on one thread: (input name, input shape, output name, the loaded model)."""
    onnx_path = os.path.join(work, f"{name}.onnx")
    in_name, shape, out_name = export(name, onnx_path)
    cuv = os.path.join(work, "models", name, "1", "model.cuv")
    os.makedirs(os.path.dirname(cuv))
    cuvil.load_onnx(onnx_path, cache=False).save(cuv)
    return in_name, shape, out_name, cuvil.load(cuv, threads=1)


def engine(model, shape, batches, min_seconds):
    """{batch: (CPU s per row, wall s per row)} of in-process runs (threads=1: CPU time ~ wall when a core is
    free)."""
    r = {}
    for b in batches:
        x = np.random.default_rng(0).standard_normal((b, *shape[1:])).astype(np.float32)
        model(x)
        n, c0, w0 = 0, time.process_time(), time.perf_counter()
        while True:
            model(x)
            n += 1
            if time.perf_counter() - w0 >= min_seconds and n >= 2:
                break
        r[b] = ((time.process_time() - c0) / (n * b), (time.perf_counter() - w0) / (n * b))
    return r


def grpc_run(url: str, model: str, in_name: str, x: np.ndarray, out_name: str, clients: int, seconds: float) -> dict:
    """`clients` concurrent callers of ModelInfer (raw_input_contents, as tritonclient.grpc sends), each calling
    again as soon as its answer arrives, on grpc.aio in this process (channels shared by up to 8 callers):
    throughput, p50/p99 latency, wrong or failed answers."""
    import asyncio

    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    req = service_pb2.ModelInferRequest(model_name=model)
    t = req.inputs.add()
    t.name, t.datatype = in_name, "FP32"
    t.shape.extend(x.shape)
    req.outputs.add().name = out_name
    req.raw_input_contents.append(x.tobytes())

    async def run():
        channels = [grpc.aio.insecure_channel(url) for _ in range((clients + 7) // 8)]
        stubs = [service_pb2_grpc.GRPCInferenceServiceStub(c) for c in channels]
        expected = len((await stubs[0].ModelInfer(req)).raw_output_contents[0])
        lat, bad = [], [0]
        end = time.perf_counter() + seconds

        async def caller(i):
            stub = stubs[i % len(stubs)]
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                try:
                    r = await stub.ModelInfer(req)
                    if len(r.raw_output_contents) != 1 or len(r.raw_output_contents[0]) != expected:
                        bad[0] += 1
                except grpc.RpcError:
                    bad[0] += 1
                lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(caller(i) for i in range(clients)))
        duration = time.perf_counter() - t0
        for c in channels:
            await c.close()
        return lat, bad[0], duration

    lat, bad, duration = asyncio.run(run())
    lat.sort()
    return {"throughput": len(lat) / duration, "p50_us": lat[len(lat) // 2] * 1e6,
            "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6, "bad": bad, "errors": 0}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp,resnet50,bert_base")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--clients", default="1,4,32")
    p.add_argument("--delay-us", type=int, default=0, help="max_queue_delay_us (0: eager batching)")
    p.add_argument("--protocols", default="rest,grpc", help="rest (wrk, binary tensors), grpc (grpc.aio, raw)")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="cuvil-serve-ratio-")
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}")
    for name in a.models.split(","):
        big = name != "mlp"
        in_name, shape, out_name, model = repository_model(work, name)
        batches = [1, 2, 4, 8] if big else [1, 8, 32, 64]
        write_config(os.path.join(work, "models"), name, max_batch_size=max(batches), max_queue_delay_us=a.delay_us,
                     threads=1, instances=1, warmup=True)
        s = Server(CUVIL, os.path.join(work, "models"), "--max-connections", "128")
        try:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            header, body = binary_request(in_name, x, "FP32", out_name)
            expected = expected_response_len(s.url, name, header, body)
            print(f"\n{name}: request {len(body)} bytes, response {expected} bytes")
            for rnd in range(a.rounds):
                e = engine(model, shape, batches, 2.0 if big else 0.5)
                best_b = min(e, key=lambda b: e[b][0])
                cpu_row, wall_row = e[best_b]
                print(f"  round {rnd + 1} in-process (1 thread): " +
                      ", ".join(f"b{b} {c * 1e6:.1f} us CPU/row ({w * 1e6:.1f} wall)" for b, (c, w) in e.items()) +
                      f"; best b{best_b}")
                for proto in a.protocols.split(","):
                    for c in [int(v) for v in a.clients.split(",")]:
                        # CPU per row run: from idle to idle again (the batches still running when the load
                        # stops are counted in both the CPU time and the rows), rows from the server's metrics.
                        cpu0 = settle(s.proc.pid)
                        rows0 = s.metric("cuvil_inference_batch_size_sum", model=name)
                        secs = a.seconds if not big else max(a.seconds, 8)
                        if proto == "grpc":
                            r = grpc_run(s.grpc_url, name, in_name, x, out_name, c, secs)
                        else:
                            r = wrk_run(s.url, name, header, body, expected, work, connections=c, threads=min(c, 2),
                                        seconds=secs)
                        cpu_req = (settle(s.proc.pid) - cpu0) / max(1, s.metric("cuvil_inference_batch_size_sum",
                                                                                model=name) - rows0)
                        print(f"    {proto:4} {c:>3} clients: {r['throughput']:9.1f} req/s (wall; in-process best "
                              f"{1 / wall_row:9.1f} rows/s: {r['throughput'] * wall_row * 100:5.1f}%), server CPU "
                              f"{cpu_req * 1e6:9.1f} us/row -> CPU ratio {cpu_row / cpu_req * 100:5.1f}% of "
                              f"in-process best; p50 {r['p50_us'] / 1e3:.3f} ms, p99 {r['p99_us'] / 1e3:.3f} ms "
                              f"(engine b1 {e[1][1] * 1e3:.3f} ms wall, {e[1][0] * 1e3:.3f} ms CPU); "
                              f"bad {r['bad']}, errors {r['errors']}")
        finally:
            s.stop()
    print(f"load average at end: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
