"""cuvil.serving.kserve in KServe's own Python ModelServer (a subprocess on free ports) answering tritonclient's
v2 requests (JSON and binary tensors) with the in-process model's outputs; bad requests answer 400. And the
deploy/kserve manifests: valid YAML of the right kinds, and the probes and the command they give `cuvil serve`
work on a repository of a .cuv artifact, served for real here."""
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import cuvil

# Not imported here: kserve registers the v2 protos (package `inference`) in protobuf's default pool, as
# test_serve_grpc.py's stubs do, and one pytest process cannot hold both. The ModelServer runs in a subprocess.
if importlib.util.find_spec("kserve") is None:
    pytest.skip("kserve is not installed", allow_module_level=True)
httpclient = pytest.importorskip("tritonclient.http")
yaml = pytest.importorskip("yaml")
from serve_util import mlp_model, save  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy", "kserve")
CUVIL = os.path.join(ROOT, "build", "bin", "cuvil")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, proc, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}): {proc.stdout.read()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} not ready after {seconds} s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    d = tmp_path_factory.mktemp("kserve")
    onnx_path = str(d / "mlp.onnx")
    save(mlp_model(seed=5), onnx_path)
    cuv = str(d / "mlp.cuv")
    cuvil.load_onnx(onnx_path).save(cuv)
    return cuv


@pytest.fixture(scope="module")
def kserve_server(artifact):
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "cuvil.serving.kserve", "--model_name", "mlp", "--model_path",
                             artifact, "--http_port", str(port), "--grpc_port", str(free_port()),
                             "--enable_grpc", "false"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}/v2/models/mlp/ready", proc)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)


def infer(url, x, binary, outputs=("y", "s")):
    c = httpclient.InferenceServerClient(url)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in outputs]
    # (KServe's REST front end reads a body without Inference-Header-Content-Length as JSON only when it says so)
    headers = None if binary else {"Content-Type": "application/json"}
    return c.infer("mlp", [inp], outputs=outs, request_id="req-7", headers=headers)


def test_kserve_model_server_answers_v2(kserve_server, artifact):
    model = cuvil.load(artifact)
    c = httpclient.InferenceServerClient(kserve_server)
    assert c.is_server_live() and c.is_model_ready("mlp")
    meta = c.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert [o["name"] for o in meta["outputs"]] == ["y", "s"]
    rng = np.random.default_rng(1)
    for rows, binary in [(1, False), (3, True), (7, False)]:
        x = rng.standard_normal((rows, 16)).astype(np.float32)
        r = infer(kserve_server, x, binary)
        y, s = model(x)
        np.testing.assert_array_equal(r.as_numpy("y"), y)  # the same engine, the same batch: bit for bit
        np.testing.assert_array_equal(r.as_numpy("s"), s)
        assert r.get_response()["id"] == "req-7"
    r = infer(kserve_server, rng.standard_normal((2, 16)).astype(np.float32), False, outputs=("s",))
    assert [o["name"] for o in r.get_response()["outputs"]] == ["s"]
    # A request without an id (the response gets one).
    inp = httpclient.InferInput("x", [1, 16], "FP32")
    inp.set_data_from_numpy(np.ones((1, 16), np.float32), binary_data=True)
    r = c.infer("mlp", [inp])
    np.testing.assert_array_equal(r.as_numpy("s"), model(np.ones((1, 16), np.float32))[1])


def test_kserve_model_server_rejects_bad_requests(kserve_server):
    from tritonclient.utils import InferenceServerException
    c = httpclient.InferenceServerClient(kserve_server)
    bad = httpclient.InferInput("x", [2, 5], "FP32")  # width 16 expected
    bad.set_data_from_numpy(np.ones((2, 5), np.float32), binary_data=False)
    with pytest.raises(InferenceServerException, match="x"):
        c.infer("mlp", [bad], headers={"Content-Type": "application/json"})
    other = httpclient.InferInput("q", [1, 16], "FP32")
    other.set_data_from_numpy(np.ones((1, 16), np.float32), binary_data=False)
    with pytest.raises(InferenceServerException, match="unexpected input"):
        c.infer("mlp", [other], headers={"Content-Type": "application/json"})
    assert c.is_model_ready("mlp")  # still serving


def manifests():
    docs = {}
    for f in ("servingruntime.yaml", "inferenceservice.yaml"):
        with open(os.path.join(DEPLOY, f)) as fh:
            for d in yaml.safe_load_all(fh):
                docs[d["kind"]] = d
    return docs


def test_manifests_have_the_right_kinds_and_fields():
    docs = manifests()
    rt, isvc = docs["ServingRuntime"], docs["InferenceService"]
    assert rt["apiVersion"] == "serving.kserve.io/v1alpha1"
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    spec = rt["spec"]
    assert {"v2", "grpc-v2"} <= set(spec["protocolVersions"])
    fmt = {f["name"] for f in spec["supportedModelFormats"]}
    (container,) = spec["containers"]
    assert container["name"] == "kserve-container"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    predictor = isvc["spec"]["predictor"]["model"]
    assert predictor["modelFormat"]["name"] in fmt
    assert predictor["runtime"] == rt["metadata"]["name"]
    assert predictor["protocolVersion"] == "v2"
    assert predictor["storageUri"]
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        dockerfile = f.read()
    assert re.search(r"^ENTRYPOINT .*cuvil", dockerfile, re.M) and "HEALTHCHECK" in dockerfile


def test_runtime_command_serves_a_cuv_repository_with_working_probes(artifact, tmp_path):
    """The ServingRuntime's own arguments (ports swapped for free ones) run `cuvil serve` on a KServe-style
    /mnt/models layout holding a .cuv, and its probe paths answer 200 on the port they name."""
    if not os.path.exists(CUVIL):
        pytest.skip(f"{CUVIL} is not built")
    container = manifests()["ServingRuntime"]["spec"]["containers"][0]
    repo = tmp_path / "models"
    (repo / "mlp" / "1").mkdir(parents=True)
    os.link(artifact, repo / "mlp" / "1" / "model.cuv")
    (repo / "mlp" / "config.json").write_text('{"max_batch_size": 8}')
    http, grpc, metrics = free_port(), free_port(), free_port()
    ports = {"8080": str(http), "8081": str(grpc), "8082": str(metrics), "/mnt/models": str(repo)}
    args = [ports.get(a, a) for a in container["args"]]
    assert args[0] == "serve" and "--model-repository" in args
    proc = subprocess.Popen([CUVIL] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        probe = container["readinessProbe"]["httpGet"]
        assert str(probe["port"]) in ("8080", "http1")
        wait_ready(f"http://127.0.0.1:{http}{probe['path']}", proc, seconds=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{http}{container['livenessProbe']['httpGet']['path']}") as r:
            assert r.status == 200
        x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
        r = infer(f"127.0.0.1:{http}", x, True)
        y, s = cuvil.load(artifact)(x)
        np.testing.assert_allclose(r.as_numpy("y"), y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(r.as_numpy("s"), s, rtol=1e-6, atol=1e-6)
    finally:
        stop(proc)
