"""Batch-1 latency on an idle `cuvil serve` versus the engine's own batch-1 latency, one request at a time over
REST (one keep-alive connection, binary tensors) and gRPC (a sync stub, raw_input_contents). Each protocol's
no-op call (GET /v2/health/live, ServerLive) is timed the same way, alternated with the infer calls, so the
client's and the loopback's share of the latency is known: infer - no-op is what the server adds for the request
beyond its protocol's floor. The target (issue 29): within 10 % + 100 us of the engine.

    PYTHONPATH=python:tests/python:scripts:bench python bench/serve_idle.py [--models mlp] [--calls 2000]
"""
from __future__ import annotations

import argparse
import http.client
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
from serve_load import binary_request  # noqa: E402
from serve_util import Server, write_config  # noqa: E402


def median_us(samples):
    return float(np.median(samples)) * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp")
    p.add_argument("--calls", type=int, default=2000)
    a = p.parse_args()
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    work = tempfile.mkdtemp(prefix="cuvil-serve-idle-")
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}")
    for name in a.models.split(","):
        big = name != "mlp"
        calls = max(20, a.calls // 100) if big else a.calls
        onnx_path = os.path.join(work, f"{name}.onnx")
        in_name, shape, out_name = export(name, onnx_path)
        cuv = os.path.join(work, "models", name, "1", "model.cuv")
        os.makedirs(os.path.dirname(cuv))
        cuvil.load_onnx(onnx_path, cache=False).save(cuv)
        model = cuvil.load(cuv, threads=1)
        write_config(os.path.join(work, "models"), name, max_batch_size=8, max_queue_delay_us=0, threads=1,
                     instances=1, warmup=True)
        s = Server(CUVIL, os.path.join(work, "models"))
        try:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            header, body = binary_request(in_name, x, "FP32", out_name)
            conn = http.client.HTTPConnection("127.0.0.1", s.http_port)
            headers = {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"}

            def rest_infer():
                conn.request("POST", f"/v2/models/{name}/infer", body=body, headers=headers)
                r = conn.getresponse()
                r.read()
                assert r.status == 200

            def rest_live():
                conn.request("GET", "/v2/health/live")
                r = conn.getresponse()
                r.read()
                assert r.status == 200

            channel = grpc.insecure_channel(s.grpc_url)
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            req = service_pb2.ModelInferRequest(model_name=name)
            t = req.inputs.add()
            t.name, t.datatype = in_name, "FP32"
            t.shape.extend(x.shape)
            req.outputs.add().name = out_name
            req.raw_input_contents.append(x.tobytes())
            live = service_pb2.ServerLiveRequest()
            fns = {"engine": lambda: model(x), "rest_infer": rest_infer, "rest_live": rest_live,
                   "grpc_infer": lambda: stub.ModelInfer(req), "grpc_live": lambda: stub.ServerLive(live)}
            times = {k: [] for k in fns}
            for f in fns.values():  # warm-up
                for _ in range(3):
                    f()
            for _ in range(calls):  # alternated, so load changes hit all alike
                for k, f in fns.items():
                    t0 = time.perf_counter()
                    f()
                    times[k].append(time.perf_counter() - t0)
            m = {k: median_us(v) for k, v in times.items()}
            target = m["engine"] * 1.1 + 100
            print(f"\n{name}: median of {calls} calls each, one at a time (us): engine b1 {m['engine']:.1f} "
                  f"(target: served within {target:.1f})")
            for proto in ("rest", "grpc"):
                inf, noop = m[f"{proto}_infer"], m[f"{proto}_live"]
                print(f"  {proto}: infer {inf:9.1f}, no-op {noop:7.1f}, infer - no-op {inf - noop:9.1f} "
                      f"({'within' if inf - noop <= target else 'over'} the target beyond the protocol's floor; "
                      f"{'within' if inf <= target else 'over'} it end to end)")
            conn.close()
            channel.close()
        finally:
            s.stop()
    print(f"load average at end: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
