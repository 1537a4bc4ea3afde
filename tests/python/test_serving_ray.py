"""cuvil.serving.ray on real Ray Serve: a local Ray (2 CPUs) runs the deployment of a .cuv artifact; v2 JSON
requests over HTTP (concurrent, of several batch sizes) answer what the model gives in-process, batched across
requests; bad requests get 400/404 with a message. Bounded: one Ray start, a few dozen requests."""
import concurrent.futures
import json
import os
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import cuvil

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
from serve_util import mlp_model, save  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=60):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(url, timeout=30):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from cuvil.serving.ray import CuvilDeployment
    d = tmp_path_factory.mktemp("ray_serve")
    onnx_path = str(d / "mlp.onnx")
    save(mlp_model(seed=3), onnx_path)
    cuv = str(d / "mlp.cuv")
    cuvil.load_onnx(onnx_path).save(cuv)
    port = free_port()
    env = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]),
           "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "10000")}
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env},
                 configure_logging=False)
    except Exception as e:  # noqa: BLE001 - the machine cannot run Ray at all
        pytest.skip(f"Ray cannot start on this machine: {e}")
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        # A long batch wait so that concurrent requests surely share runs (the test checks they do).
        app = CuvilDeployment.options(num_replicas=1).bind(cuv, name="mlp", max_batch_size=16,
                                                           batch_wait_timeout_s=0.2)
        handle = serve.run(app, name="cuvil_mlp", route_prefix="/")
        yield f"http://127.0.0.1:{port}", cuvil.load(cuv), handle
    finally:
        serve.shutdown()
        ray.shutdown()


def request(x, rid=None, outputs=None):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}
    if rid:
        body["id"] = rid
    if outputs:
        body["outputs"] = [{"name": n} for n in outputs]
    return body


def check(resp, x, model, outputs=("y", "s")):
    y, s = model(x)
    want = {"y": y, "s": s}
    assert [o["name"] for o in resp["outputs"]] == list(outputs)
    for o in resp["outputs"]:
        assert o["datatype"] == "FP32" and o["shape"] == list(want[o["name"]].shape)
        np.testing.assert_allclose(np.array(o["data"], np.float32).reshape(o["shape"]), want[o["name"]],
                                   rtol=1e-5, atol=1e-5)


def test_health_and_metadata(served):
    url, _, _ = served
    assert get(f"{url}/v2/health/ready")[0] == 200
    status, meta = get(f"{url}/v2/models/mlp")
    assert status == 200
    assert meta["name"] == "mlp" and meta["platform"] == "cuvil"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert [o["name"] for o in meta["outputs"]] == ["y", "s"]


def test_concurrent_requests_are_batched_and_correct(served):
    url, model, handle = served
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1 + i % 3, 16)).astype(np.float32) for i in range(12)]
    runs0 = handle.stats.remote().result()["runs"]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda i: post(f"{url}/v2/models/mlp/infer", request(xs[i], rid=f"r{i}")),
                                range(len(xs))))
    for i, (status, resp) in enumerate(results):
        assert status == 200, resp
        assert resp["id"] == f"r{i}" and resp["model_name"] == "mlp"
        check(resp, xs[i], model)
    stats = handle.stats.remote().result()
    assert stats["runs"] - runs0 < len(xs), stats  # requests shared runs
    # Requested outputs only, and through a deployment handle with the same JSON object.
    status, resp = post(f"{url}/v2/models/mlp/versions/1/infer", request(xs[0], outputs=["s"]))
    assert status == 200
    check(resp, xs[0], model, outputs=("s",))
    check(handle.infer.remote(request(xs[1])).result(), xs[1], model)


def test_bad_requests(served):
    url, _, _ = served
    x = np.ones((2, 16), np.float32)
    cases = [
        (f"{url}/v2/models/nope/infer", request(x), 404, "unknown model"),
        (f"{url}/v2/models/mlp/infer", {"inputs": [{"name": "q", "datatype": "FP32", "shape": [1], "data": [1]}]},
         400, "unexpected input"),
        (f"{url}/v2/models/mlp/infer", {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 16],
                                                    "data": [1.0]}]}, 400, "data elements"),
        (f"{url}/v2/models/mlp/infer", {"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": ["a"]}]},
         400, "datatype"),
        (f"{url}/v2/models/mlp/infer", request(np.ones((2, 5), np.float32)), 400, "x"),  # the model's own check
        (f"{url}/v2/models/mlp/infer", request(x, outputs=["zz"]), 400, "unknown output"),
    ]
    for u, body, code, words in cases:
        status, resp = post(u, body)
        assert status == code and words in resp["error"], (body, status, resp)
    # The replica still answers.
    status, resp = post(f"{url}/v2/models/mlp/infer", request(x))
    assert status == 200


def test_serve_run_config_is_valid():
    """deploy/ray/serve_config.yaml passes Ray Serve's own schema, and its args build the application."""
    import yaml
    from ray.serve.schema import ServeDeploySchema
    from cuvil.serving.ray import app_builder
    with open(os.path.join(ROOT, "deploy", "ray", "serve_config.yaml")) as f:
        config = ServeDeploySchema.model_validate(yaml.safe_load(f))
    app = config.applications[0]
    assert app.import_path == "cuvil.serving.ray:app_builder"
    (d,) = app.deployments
    assert d.name == "CuvilDeployment" and d.autoscaling_config["max_replicas"] >= d.autoscaling_config["min_replicas"]
    assert app_builder(dict(app.args)) is not None
    with pytest.raises(ValueError, match="unknown argument"):
        app_builder({"model": "m.cuv", "max_batch": 3})
