"""One model, several servers, one load generator: `cuvil serve` versus KServe's Python ModelServer and Ray Serve
on ONNX Runtime (and on Cuvil, through cuvil.serving.kserve / cuvil.serving.ray), each with one replica on the
same cores, all driven by wrk with the same v2 JSON infer request (so every server parses JSON). Prints
requests/s and p50/p99 latency per server and client count.

    PYTHONPATH=python:tests/python:scripts python bench/serve_compare.py [--models mlp] [--clients 1,32]
        [--seconds 5] [--servers cuvil,kserve-ort,ray-ort,kserve-cuvil,ray-cuvil]

Batching: cuvil serve batches eagerly (max_batch_size 32, no queue delay); Ray Serve uses @serve.batch (32 rows,
2 ms wait) for both engines; KServe's Python server has no batcher, each request runs alone. Threads: every
engine gets all the machine's cores (ONNX Runtime intra-op threads = cores). The machine may be shared: the
numbers are noisy, the ratios between servers measured back to back are what to read.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CUVIL = os.path.join(ROOT, "build", "bin", "cuvil")
CORES = os.cpu_count() or 1

WRK_JSON = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("%(body)s", "rb"); wrk.body = f:read("*a"); f:close()
local bad = 0
function response(status, headers, body) if status ~= 200 then bad = bad + 1 end end
function done(summary, latency, requests)
  local f = io.open("%(out)s", "w")
  f:write(string.format('{"requests": %%d, "bad": %%d, "errors": %%d, "p50_us": %%d, "p99_us": %%d, "duration_us": %%d}',
    summary.requests, bad, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), summary.duration))
  f:close()
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the servers under test, each run as `python serve_compare.py --_server KIND MODEL PORT` -------------------

class OrtModel:
    """ONNX Runtime with the same threads Cuvil gets; {name: array} -> list of outputs."""

    def __init__(self, path: str):
        import onnxruntime as ort
        o = ort.SessionOptions()
        o.intra_op_num_threads = CORES
        o.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.sess.get_inputs()]
        self.output_names = [o.name for o in self.sess.get_outputs()]

    async def run(self, arrays: dict) -> list:
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(None, self.sess.run, None, arrays)


def serve_kserve_ort(path: str, port: int) -> None:
    import kserve
    from kserve.protocol.infer_type import InferOutput, InferResponse
    from cuvil.serving import v2

    class OrtKServeModel(kserve.Model):
        def __init__(self, name):
            super().__init__(name)
            self.m = OrtModel(path)
            self.ready = True

        async def predict(self, payload, headers=None, response_headers=None):
            outs = await self.m.run({t.name: t.as_numpy() for t in payload.inputs})
            res = []
            for n, a in zip(self.m.output_names, outs):
                o = InferOutput(name=n, shape=list(a.shape), datatype=v2.datatype_of(a))
                o.set_data_from_numpy(a, binary_data=False)
                res.append(o)
            return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=res)

    kserve.ModelServer(http_port=port, grpc_port=free_port(), enable_grpc=False).start([OrtKServeModel("model")])


def serve_kserve_cuvil(path: str, port: int) -> None:
    import kserve
    from cuvil.serving.kserve import CuvilKServeModel
    m = CuvilKServeModel("model", path)
    m.load()
    kserve.ModelServer(http_port=port, grpc_port=free_port(), enable_grpc=False).start([m])


def serve_ray(kind: str, path: str, port: int) -> None:
    import ray
    from ray import serve
    from cuvil.serving import v2
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "10000")}
    ray.init(num_cpus=CORES, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env},
             configure_logging=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    if kind == "cuvil":
        from cuvil.serving.ray import CuvilDeployment
        app = CuvilDeployment.options(ray_actor_options={"num_cpus": CORES}).bind(path, name="model",
                                                                                 max_batch_size=32)
    else:
        @serve.deployment(ray_actor_options={"num_cpus": CORES}, max_ongoing_requests=128)
        class OrtDeployment:
            def __init__(self):
                self.m = OrtModel(path)

            @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002,
                         batch_size_fn=lambda reqs: sum(v2.rows(r) for r in reqs))
            async def batch(self, reqs: list) -> list:
                return await v2.run_batched(self.m.run, reqs, self.m.output_names)

            async def __call__(self, request):
                from starlette.responses import JSONResponse
                arrays, wanted, rid = v2.decode_request(await request.json(), self.m.input_names)
                out = await self.batch(arrays)
                if isinstance(out, Exception):
                    return JSONResponse({"error": str(out)}, status_code=400)
                return JSONResponse(v2.encode_response("model", "1", out, wanted, rid))

        app = OrtDeployment.bind()
    serve.run(app, name="model", route_prefix="/")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    print("ready", flush=True)
    while not stopping:
        time.sleep(0.2)
    serve.shutdown()
    ray.shutdown()


# --- the load ---------------------------------------------------------------------------------------------------

def wrk(url: str, body_path: str, work: str, connections: int, seconds: int) -> dict:
    script, out = os.path.join(work, "req.lua"), os.path.join(work, "wrk.json")
    with open(script, "w") as f:
        f.write(WRK_JSON % {"body": body_path, "out": out})
    r = subprocess.run([shutil.which("wrk"), "-t", str(min(connections, 2)), "-c", str(connections), "-d",
                        f"{seconds}s", "--timeout", "30s", "-s", script, url], capture_output=True, text=True,
                       timeout=seconds + 120)
    if r.returncode:
        raise RuntimeError(r.stderr)
    with open(out) as f:
        res = json.load(f)
    res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
    return res


def post_ok(url: str, body: bytes, timeout: float = 60) -> dict:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def start(kind: str, model_path: str, repo: str, work: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]),
               GOMP_SPINCOUNT=os.environ.get("GOMP_SPINCOUNT", "10000"))
    if kind == "cuvil":
        cmd = [CUVIL, "serve", "--model-repository", repo, "--http-port", str(port), "--grpc-port", "0",
               "--metrics-port", "0", "--max-connections", "128"]
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--_server", kind, model_path, str(port)]
    log = open(os.path.join(work, f"{kind}.log"), "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}/v2/models/model/infer"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp")
    p.add_argument("--clients", default="1,32")
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--servers", default="cuvil,kserve-ort,ray-ort,kserve-cuvil,ray-cuvil")
    p.add_argument("--rounds", type=int, default=1, help="servers measured in turn this many times; medians")
    p.add_argument("--_server", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._server:
        kind, path, port = a._server
        {"kserve-ort": lambda: serve_kserve_ort(path, int(port)),
         "kserve-cuvil": lambda: serve_kserve_cuvil(path, int(port)),
         "ray-ort": lambda: serve_ray("ort", path, int(port)),
         "ray-cuvil": lambda: serve_ray("cuvil", path, int(port))}[kind]()
        return
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, HERE)
    import cuvil
    from serve_bench import export  # noqa: E402
    from serve_util import write_config  # noqa: E402
    work = tempfile.mkdtemp(prefix="cuvil-serve-compare-")
    clients = [int(c) for c in a.clients.split(",")]
    rows = []
    for name in a.models.split(","):
        repo = os.path.join(work, name, "repo")
        onnx_path = os.path.join(repo, "model", "1", "model.onnx")
        in_name, shape, _ = export(name, onnx_path)
        write_config(repo, "model", max_batch_size=32, max_queue_delay_us=0, warmup=name == "mlp")
        cuv = os.path.join(work, name, "model.cuv")
        cuvil.load_onnx(onnx_path).save(cuv)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        body = json.dumps({"inputs": [{"name": in_name, "datatype": "FP32", "shape": list(shape),
                                       "data": x.ravel().tolist()}]}).encode()
        body_path = os.path.join(work, name, "body.json")
        with open(body_path, "wb") as f:
            f.write(body)
        for rnd in range(a.rounds):  # in turn, so that the machine's load drift hits every server alike
            for kind in a.servers.split(","):
                proc, url = start(kind, onnx_path if kind.endswith("ort") else cuv, repo, work)
                try:
                    deadline = time.time() + 180
                    while True:  # ready = a first request answered
                        try:
                            ref = post_ok(url, body, timeout=30)
                            break
                        except urllib.error.HTTPError as e:
                            if e.code not in (404, 503):  # (Ray's proxy: 404 until the application is deployed)
                                raise RuntimeError(f"{kind} answered {e.code}: {e.read()[:500]!r}; see "
                                                   f"{work}/{kind}.log")
                            if time.time() > deadline:
                                raise RuntimeError(f"{kind} did not start; see {work}/{kind}.log")
                            time.sleep(0.5)
                        except OSError:
                            if proc.poll() is not None or time.time() > deadline:
                                raise RuntimeError(f"{kind} did not start; see {work}/{kind}.log")
                            time.sleep(0.5)
                    assert ref["outputs"], ref
                    for c in clients:
                        r = wrk(url, body_path, work, c, a.seconds)
                        rows.append((name, kind, c, r))
                        print(f"{name:9} {kind:13} {c:3} clients: {r['rps']:8.0f} req/s  p50 {r['p50_us'] / 1e3:8.2f} ms  "
                              f"p99 {r['p99_us'] / 1e3:8.2f} ms  non-200 {r['bad']}  socket errors {r['errors']}"
                              f"  (round {rnd + 1})", flush=True)
                finally:
                    stop(proc)
    print(f"\n| model | server | clients | req/s | p50 ms | p99 ms | failed |  (median of {a.rounds} round(s))\n"
          "|---|---|---|---|---|---|---|")
    seen = []
    for name, kind, c, _ in rows:
        if (name, kind, c) in seen:
            continue
        seen.append((name, kind, c))
        rs = [r for n, k, cc, r in rows if (n, k, cc) == (name, kind, c)]
        med = lambda key: float(np.median([r[key] for r in rs]))  # noqa: E731
        print(f"| {name} | {kind} | {c} | {med('rps'):.0f} | {med('p50_us') / 1e3:.2f} | {med('p99_us') / 1e3:.2f} | "
              f"{sum(r['bad'] + r['errors'] for r in rs)} |")

if __name__ == "__main__":
    main()
