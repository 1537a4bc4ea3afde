"""`cuvil serve` driven by the real Triton client (tritonclient.http) through every KServe v2 endpoint, every
numeric datatype, JSON and binary tensors, dynamic batching, the repository extension, faults and shutdown;
outputs checked against ONNX Runtime and NumPy."""
import json
import os
import shutil
import signal
import socket
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

tritonclient = pytest.importorskip("tritonclient.http")
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from serve_util import Server, dtype_table, dtypes_model, mlp_model, rowsum_model, save, write_config  # noqa: E402


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("serve"))
    repo = os.path.join(root, "models")
    save(mlp_model(1), os.path.join(repo, "mlp", "1", "model.onnx"))
    write_config(repo, "mlp", max_batch_size=8, max_queue_delay_us=1000, warmup=True)
    save(dtypes_model(), os.path.join(repo, "dtypes", "1", "model.onnx"))
    # Long delays: a batch closes when it is full, so these tests see exactly the batches they send.
    save(rowsum_model(), os.path.join(repo, "rowsum", "1", "model.onnx"))
    write_config(repo, "rowsum", max_batch_size=4, max_queue_delay_us=5_000_000)
    save(rowsum_model(), os.path.join(repo, "small_queue", "1", "model.onnx"))
    write_config(repo, "small_queue", max_batch_size=64, max_queue_delay_us=1_000_000, max_queue_size=2)
    save(mlp_model(2), os.path.join(repo, "reload", "1", "model.onnx"))
    # A batch that would wait 10 s for company, but callers give up after 50 ms.
    save(rowsum_model(), os.path.join(repo, "timeout", "1", "model.onnx"))
    write_config(repo, "timeout", max_batch_size=64, max_queue_delay_us=10_000_000, timeout_ms=50)
    os.makedirs(os.path.join(repo, "broken", "1"))
    with open(os.path.join(repo, "broken", "1", "model.onnx"), "wb") as f:
        f.write(b"not an onnx model")
    return repo


@pytest.fixture(scope="module")
def server(cuvil_bin, repo):
    log = os.path.join(os.path.dirname(repo), "access.log")
    s = Server(cuvil_bin, repo, "--max-request-bytes", str(4 << 20), "--read-timeout", "5", log_path=log)
    s.access_log = log
    yield s
    s.stop()


@pytest.fixture
def client(server):
    c = httpclient.InferenceServerClient(server.url, concurrency=16, network_timeout=120)
    yield c
    c.close()


def ort_run(path, feeds):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def make_input(name, array, binary):
    i = httpclient.InferInput(name, list(array.shape), tritonclient_dtype(array))
    i.set_data_from_numpy(array, binary_data=binary)
    return i


def tritonclient_dtype(array):
    from tritonclient.utils import np_to_triton_dtype
    return np_to_triton_dtype(array.dtype)


def test_health_and_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "cuvil"
    assert "binary_tensor_data" in meta["extensions"]
    assert client.is_model_ready("mlp")
    assert client.is_model_ready("mlp", "1")
    assert not client.is_model_ready("mlp", "7")
    assert not client.is_model_ready("no_such_model")
    assert not client.is_model_ready("broken")
    m = client.get_model_metadata("mlp")
    assert m["name"] == "mlp" and m["versions"] == ["1"]
    assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert [o["name"] for o in m["outputs"]] == ["y", "s"]
    assert m["outputs"][0]["shape"] == [-1, 8]
    c = client.get_model_config("mlp")
    assert c["max_batch_size"] == 8
    assert c["dynamic_batching"]["max_queue_delay_microseconds"] == 1000
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("no_such_model")
    assert e.value.status() == "404" or "unknown model" in str(e.value)


@pytest.mark.parametrize("binary_in", [False, True])
@pytest.mark.parametrize("binary_out", [False, True])
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_infer_mlp_matches_onnxruntime(client, repo, batch, binary_in, binary_out):
    x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
    want_y, want_s = ort_run(os.path.join(repo, "mlp", "1", "model.onnx"), {"x": x})
    outs = [httpclient.InferRequestedOutput("y", binary_data=binary_out),
            httpclient.InferRequestedOutput("s", binary_data=not binary_out)]
    r = client.infer("mlp", [make_input("x", x, binary_in)], outputs=outs, request_id=f"req-{batch}")
    assert r.get_response()["id"] == f"req-{batch}"
    assert r.get_response()["model_version"] == "1"
    np.testing.assert_allclose(r.as_numpy("y"), want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r.as_numpy("s"), want_s, rtol=1e-5, atol=1e-4)


def test_requested_outputs_subset(client):
    x = np.ones((2, 16), np.float32)
    r = client.infer("mlp", [make_input("x", x, True)], outputs=[httpclient.InferRequestedOutput("s")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["s"]
    assert r.as_numpy("y") is None
    # No outputs named: every output, in JSON unless binary_data_output says otherwise.
    r = client.infer("mlp", [make_input("x", x, False)])
    assert {o["name"] for o in r.get_response()["outputs"]} == {"y", "s"}


def random_values(name, np_dtype, n, rng):
    if name == "BOOL":
        return rng.integers(0, 2, n).astype(np.bool_)
    if name in ("FP16", "FP32", "FP64", "BF16"):
        return (rng.standard_normal(n) * 100).astype(np.float32).astype(np_dtype)
    info = np.iinfo(np_dtype)
    v = rng.integers(info.min, info.max, n, dtype=np_dtype, endpoint=True)
    v[:2] = [info.min, info.max]  # the extremes wrap around on x + x, as in C and NumPy
    return v


@pytest.mark.parametrize("binary", [False, True])
def test_every_datatype(client, binary):
    rng = np.random.default_rng(7)
    table = dtype_table()
    inputs, outputs, sent = [], [], {}
    for k, (name, (_, np_dtype)) in enumerate(table.items()):
        v = random_values(name, np_dtype, 5 + k, rng)
        sent[name] = v
        # tritonclient sends BF16 only as binary (JSON has no bfloat16).
        inputs.append(make_input(f"in_{name}", v, binary or name == "BF16"))
        outputs.append(httpclient.InferRequestedOutput(f"out_{name}", binary_data=binary or name == "BF16"))
    r = client.infer("dtypes", inputs, outputs=outputs)
    for name, v in sent.items():
        got = r.as_numpy(f"out_{name}")
        assert got.dtype == table[name][1], name
        want = np.logical_not(v) if name == "BOOL" else (v + v)
        if name in ("FP16", "BF16"):
            np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32), err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def expect_error(fn, status, text):
    with pytest.raises(InferenceServerException) as e:
        fn()
    assert text in str(e.value), str(e.value)
    if status is not None:
        assert e.value.status() == str(status), (e.value.status(), str(e.value))


def test_errors_are_4xx_in_protocol_form(client):
    x = np.ones((2, 16), np.float32)
    expect_error(lambda: client.infer("nope", [make_input("x", x, True)]), 404, "unknown model")
    expect_error(lambda: client.infer("mlp", [make_input("x", x.astype(np.float64), True)]), 400, "FP64")
    expect_error(lambda: client.infer("mlp", [make_input("x", np.ones((2, 5), np.float32), False)]), 400,
                 "does not match")
    expect_error(lambda: client.infer("mlp", [make_input("x", np.ones((9, 16), np.float32), True)]), 400,
                 "batch size 9")
    expect_error(lambda: client.infer("mlp", [make_input("z", x, True)]), 400, "unexpected input 'z'")
    expect_error(lambda: client.infer("mlp", [make_input("x", x, True)],
                                      outputs=[httpclient.InferRequestedOutput("nope")]), 400, "unknown output")
    expect_error(lambda: client.infer("mlp", []), 400, "missing input 'x'")
    assert client.is_server_live()


def infer_concurrently(client, model, arrays):
    """Sends every request before waiting for any (tritonclient's async_infer), so they queue together."""
    pending = [client.async_infer(model, [make_input("x", a, True)]) for a in arrays]
    return [p.get_result() for p in pending]


def test_dynamic_batching_groups_by_signature(client, server):
    execs0 = server.metric("cuvil_inference_exec_total", model="rowsum")
    rows0 = server.metric("cuvil_inference_batch_size_sum", model="rowsum")
    rng = np.random.default_rng(3)
    # Four requests of n=5 and four of n=7 (one row each): max_batch_size 4 closes exactly two batches.
    arrays = [rng.standard_normal((1, 5 if i % 2 else 7)).astype(np.float32) for i in range(8)]
    results = infer_concurrently(client, "rowsum", arrays)
    for a, r in zip(arrays, results):
        np.testing.assert_allclose(r.as_numpy("y"), a.sum(1), rtol=1e-5, atol=1e-5)
    assert server.metric("cuvil_inference_exec_total", model="rowsum") - execs0 == 2
    assert server.metric("cuvil_inference_batch_size_sum", model="rowsum") - rows0 == 8
    # Requests of several rows split back by their own sizes.
    arrays = [rng.standard_normal((n, 3)).astype(np.float32) for n in (1, 2, 1)]
    for a, r in zip(arrays, infer_concurrently(client, "rowsum", arrays)):
        np.testing.assert_allclose(r.as_numpy("y"), a.sum(1), rtol=1e-5, atol=1e-5)


def test_many_concurrent_clients_all_correct(client, repo):
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((int(rng.integers(1, 4)), 16)).astype(np.float32) for _ in range(64)]
    results = infer_concurrently(client, "mlp", arrays)
    sess = ort.InferenceSession(os.path.join(repo, "mlp", "1", "model.onnx"), providers=["CPUExecutionProvider"])
    for a, r in zip(arrays, results):
        np.testing.assert_allclose(r.as_numpy("y"), sess.run(None, {"x": a})[0], rtol=1e-5, atol=1e-5)


def test_listen_backlog_takes_a_burst_of_connections(server):
    """cpp-httplib listens with a backlog of 5; the server widens it, so 32 clients connecting at once are not
    dropped and retried a second later. ss shows a listening socket's backlog as its Send-Q."""
    import shutil
    import subprocess
    if not shutil.which("ss"):
        pytest.skip("ss (iproute2) is not installed")
    out = subprocess.run(["ss", "-ltnH", f"sport = :{server.http_port}"], capture_output=True, text=True).stdout
    backlogs = [int(line.split()[2]) for line in out.splitlines() if line.startswith("LISTEN")]
    assert backlogs and min(backlogs) >= 128, out


def test_request_timeout_is_503(client, server):
    expect_error(lambda: client.infer("timeout", [make_input("x", np.ones((1, 3), np.float32), True)]), 503,
                 "timed out after 50 ms")
    assert client.is_server_live()


def test_reload_on_change(cuvil_bin, tmp_path):
    """--poll-repository: a new version folder is picked up without a request to load it; one that differs only in
    weights is hot swapped in, one with another graph is reloaded."""
    repo = str(tmp_path / "models")
    save(mlp_model(1), os.path.join(repo, "m", "1", "model.onnx"))
    s = Server(cuvil_bin, repo, "--poll-repository", "1")
    c = httpclient.InferenceServerClient(s.url)

    def wait_for(version):
        want = ort_run(os.path.join(repo, "m", version, "model.onnx"), {"x": x})[0]
        for _ in range(600):
            r = c.infer("m", [make_input("x", x, True)])
            if r.get_response()["model_version"] == version:
                break
            time.sleep(0.1)
        assert r.get_response()["model_version"] == version
        np.testing.assert_allclose(r.as_numpy("y"), want, rtol=1e-5, atol=1e-5)

    try:
        x = np.ones((1, 16), np.float32)
        assert c.infer("m", [make_input("x", x, True)]).get_response()["model_version"] == "1"
        save(mlp_model(4), os.path.join(repo, "m", "2", "model.onnx"))
        wait_for("2")
        assert "swapped the weights of model 'm' (version 2)" in s.log()
        save(mlp_model(5, hidden=4), os.path.join(repo, "m", "3", "model.onnx"))  # another W shape: a reload
        wait_for("3")
        assert "reloaded model 'm' (version 3)" in s.log()
    finally:
        c.close()
        assert s.stop() == 0


def test_full_queue_rejects(server):
    c = httpclient.InferenceServerClient(server.url, concurrency=4, network_timeout=120)
    try:
        x = np.ones((1, 3), np.float32)
        pending = [c.async_infer("small_queue", [make_input("x", x, True)]) for _ in range(3)]
        ok, rejected = 0, 0
        for p in pending:
            try:
                np.testing.assert_allclose(p.get_result().as_numpy("y"), [3.0])
                ok += 1
            except InferenceServerException as e:
                assert "queue is full" in str(e) and e.status() == "503", str(e)
                rejected += 1
        assert (ok, rejected) == (2, 1)
        assert server.metric("cuvil_inference_request_rejected_total", model="small_queue") == 1
    finally:
        c.close()


def raw_http(server, data, read=True):
    s = socket.create_connection(("127.0.0.1", server.http_port), timeout=30)
    try:
        s.sendall(data)
        if not read:
            return None
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
            head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
            length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
            if length and len(body) >= length[0]:
                break
        return b"".join(chunks)
    finally:
        s.close()


def post(path, body, headers=()):
    h = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{h}Connection: close\r\n\r\n"
            .encode() + body)


def status_and_body(response):
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


SHORT_BINARY = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"parameters":{"binary_data_size":64}}]}'


def test_malformed_and_hostile_requests(server, client):
    cases = [
        (post("/v2/models/mlp/infer", b"{not json"), 400, b"not valid JSON"),
        (post("/v2/models/mlp/infer", b"[]"), 400, b"JSON object"),
        (post("/v2/models/mlp/infer", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[1]}]}'),
         400, b"1 data elements"),
        (post("/v2/models/mlp/infer", b'{"inputs":[{"name":"x","datatype":"FP99","shape":[1],"data":[1]}]}'),
         400, b"unknown datatype"),
        (post("/v2/models/mlp/infer", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,-16],"data":[]}]}'),
         400, b"negative dim"),
        (post("/v2/models/mlp/infer",
              b'{"inputs":[{"name":"x","datatype":"FP32","shape":[4294967296,4294967296],"data":[]}]}'),
         400, b"too large"),
        (post("/v2/models/mlp/infer", b'{"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]}'),
         400, b"out of range"),
        (post("/v2/models/mlp/infer", b'{"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":["a"]}]}'),
         400, b"BYTES"),
        # The header claims more than the body holds / binary data shorter than declared.
        (post("/v2/models/mlp/infer", b"{}", [("Inference-Header-Content-Length", "100")]), 400, b"exceeds"),
        (post("/v2/models/mlp/infer", SHORT_BINARY + b"\0" * 10,
              [("Inference-Header-Content-Length", str(len(SHORT_BINARY)))]), 400, b"ends before"),
        (post("/v2/models/mlp/infer", b"{}", [("Inference-Header-Content-Length", "x")]), 400, b"byte count"),
        (post("/v2/nothing/here", b""), 404, b"no such endpoint"),
        # Larger than --max-request-bytes (the body is never read).
        (b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 413, b"limit"),
    ]
    for raw, status, text in cases:
        got_status, body = status_and_body(raw_http(server, raw))
        assert got_status == status, (raw[:120], got_status, body)
        assert text in body, (raw[:120], body)
        assert "error" in json.loads(body)
    # A garbage request line and clients that hang up mid-request (headers or body cut short).
    assert status_and_body(raw_http(server, b"\x00\x01 garbage\r\n\r\n"))[0] == 400
    raw_http(server, b"POST /v2/models/mlp/infer HTTP/1.1\r\nContent-Len", read=False)
    raw_http(server, b"POST /v2/models/mlp/infer HTTP/1.1\r\nContent-Length: 5000\r\n\r\n{\"inputs\"", read=False)
    # A client that reads nothing of a large response and leaves.
    x = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [8, 16], "data": [0.5] * 128}]}).encode()
    raw_http(server, post("/v2/models/mlp/infer", x), read=False)
    assert client.is_server_live() and client.is_server_ready()
    r = client.infer("mlp", [make_input("x", np.ones((1, 16), np.float32), True)])
    assert r.as_numpy("y").shape == (1, 8)


def test_slow_client_is_cut_off(cuvil_bin, tmp_path):
    """A client that stalls mid-request holds its connection only until --read-timeout; others are served."""
    repo = str(tmp_path / "models")
    save(mlp_model(1), os.path.join(repo, "mlp", "1", "model.onnx"))
    s = Server(cuvil_bin, repo, "--read-timeout", "1")
    c = httpclient.InferenceServerClient(s.url)
    try:
        slow = socket.create_connection(("127.0.0.1", s.http_port), timeout=60)
        slow.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"inp")
        r = c.infer("mlp", [make_input("x", np.ones((1, 16), np.float32), True)])  # not blocked by the stall
        assert r.as_numpy("y").shape == (1, 8)
        start = time.time()
        data = slow.recv(65536)  # the server gives up on the body and closes (possibly after a 400/408)
        while data and time.time() - start < 30:
            more = slow.recv(65536)
            if not more:
                break
            data += more
        assert time.time() - start < 30
        slow.close()
        assert c.is_server_live()
    finally:
        c.close()
        assert s.stop() == 0


def test_repository_load_unload_reload(server, client, repo):
    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert index["mlp"]["state"] == "READY"
    assert index["broken"]["state"] == "UNAVAILABLE" and "reason" in index["broken"]
    x = np.random.default_rng(5).standard_normal((2, 16)).astype(np.float32)

    def check(version, seed):
        r = client.infer("reload", [make_input("x", x, True)])
        assert r.get_response()["model_version"] == version
        np.testing.assert_allclose(r.as_numpy("y"), ort_run(save_path(version), {"x": x})[0], rtol=1e-5, atol=1e-5)

    def save_path(version):
        return os.path.join(repo, "reload", version, "model.onnx")

    check("1", 2)
    client.unload_model("reload")
    assert not client.is_model_ready("reload")
    expect_error(lambda: client.infer("reload", [make_input("x", x, True)]), 404, "unknown model")
    client.load_model("reload")
    check("1", 2)
    # A new version is picked up by load; a broken newer one fails and the old one keeps serving.
    save(mlp_model(3), save_path("2"))
    client.load_model("reload")
    check("2", 3)
    os.makedirs(os.path.join(repo, "reload", "3"))
    with open(save_path("3"), "wb") as f:
        f.write(b"\x08garbage")
    expect_error(lambda: client.load_model("reload"), 400, "failed to load")
    check("2", 3)
    shutil.rmtree(os.path.join(repo, "reload", "3"))
    expect_error(lambda: client.unload_model("nope"), 404, "not loaded")


def test_load_with_file_overrides(server, client, repo):
    """Triton's load with `files` (and `config`): a new version uploaded through the API is written into the
    repository and loaded (a weights-only one hot swapped); bad uploads are 400s that leave the repository and the
    serving version as they were."""
    x = np.random.default_rng(6).standard_normal((2, 16)).astype(np.float32)

    def onnx_bytes(model):
        return model.SerializeToString()

    def check(version, model):
        r = client.infer("upload", [make_input("x", x, True)])
        assert r.get_response()["model_version"] == version
        sess = ort.InferenceSession(onnx_bytes(model), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(r.as_numpy("y"), sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)

    v1, v2 = mlp_model(11), mlp_model(12)
    client.load_model("upload", config=json.dumps({"max_batch_size": 4}), files={"file:1/model.onnx": onnx_bytes(v1)})
    check("1", v1)
    assert client.get_model_config("upload")["max_batch_size"] == 4
    client.load_model("upload", files={"file:2/model.onnx": onnx_bytes(v2)})
    check("2", v2)
    assert os.path.isfile(os.path.join(repo, "upload", "2", "model.onnx"))
    before = sorted(os.listdir(os.path.join(repo, "upload")))
    for files, config, message in [
            ({"file:2/model.onnx": onnx_bytes(v1)}, None, "already has a version 2"),
            ({"file:../x/model.onnx": b"x"}, None, "expected 'file:<version>/model.cuv'"),
            ({"file:3/weights.bin": b"x"}, None, "expected 'file:<version>/model.cuv'"),
            ({"file:3/model.onnx": b"\x08garbage"}, None, "failed to load"),
            ({"file:3/model.onnx": onnx_bytes(v1)}, json.dumps({"max_batch_size": "many"}), "failed to load"),
            ({"file:3/model.onnx": onnx_bytes(v1), "file:4/model.onnx": onnx_bytes(v1)}, None, "one version folder")]:
        expect_error(lambda: client.load_model("upload", config=config, files=files), 400, message)
        check("2", v2)
        assert sorted(os.listdir(os.path.join(repo, "upload"))) == before
    with open(os.path.join(repo, "upload", "config.json")) as f:
        assert json.load(f) == {"max_batch_size": 4}


def test_reload_under_load_drops_nothing(server, repo):
    """Requests keep flowing while the model is reloaded several times: every one answers correctly."""
    c = httpclient.InferenceServerClient(server.url, concurrency=8, network_timeout=120)
    x = np.random.default_rng(9).standard_normal((1, 16)).astype(np.float32)
    want = ort_run(os.path.join(repo, "mlp", "1", "model.onnx"), {"x": x})[0]
    stop, errors, done = threading.Event(), [], [0]

    def load():
        while not stop.is_set():
            try:
                r = c.infer("mlp", [make_input("x", x, True)])
                np.testing.assert_allclose(r.as_numpy("y"), want, rtol=1e-5, atol=1e-5)
                done[0] += 1
            except Exception as e:  # noqa: BLE001 (collected and reported below)
                errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(5):
            c.load_model("mlp")
    finally:
        stop.set()
        for t in threads:
            t.join()
        c.close()
    assert not errors, errors[:3]
    assert done[0] > 0


def test_metrics_and_access_log(server, client):
    client.infer("mlp", [make_input("x", np.ones((1, 16), np.float32), True)])
    text = server.metrics()
    for name in ("cuvil_inference_request_success_total", "cuvil_inference_request_failure_total",
                 "cuvil_inference_queue_seconds_bucket", "cuvil_inference_compute_seconds_bucket",
                 "cuvil_inference_batch_size_bucket", "cuvil_inference_request_seconds_bucket",
                 "cuvil_http_requests_total"):
        assert name in text, name
    assert server.metric("cuvil_inference_request_success_total", model="mlp") >= 1
    assert server.metric("cuvil_inference_request_failure_total", model="mlp") >= 1  # test_errors' requests
    with open(server.access_log) as f:
        lines = [json.loads(line) for line in f]
    infer = [l for l in lines if l["path"] == "/v2/models/mlp/infer"]
    assert infer and {"ts", "remote", "method", "status", "bytes_in", "bytes_out", "ms"} <= set(infer[-1])
    assert infer[-1]["model"] == "mlp" and infer[-1]["status"] == 200
    assert any(l["status"] == 413 for l in lines)


def test_graceful_shutdown_drains(cuvil_bin, tmp_path):
    repo = str(tmp_path / "models")
    save(rowsum_model(), os.path.join(repo, "slow", "1", "model.onnx"))
    # The batch would wait 60 s for more requests; shutdown runs it at once instead of dropping it.
    write_config(repo, "slow", max_batch_size=64, max_queue_delay_us=10_000_000)
    s = Server(cuvil_bin, repo)
    c = httpclient.InferenceServerClient(s.url, network_timeout=120)
    try:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        pending = c.async_infer("slow", [make_input("x", x, True)])
        for _ in range(600):
            if s.metric("cuvil_inference_queue_depth", model="slow") == 1:
                break
            time.sleep(0.05)
        assert s.metric("cuvil_inference_queue_depth", model="slow") == 1
        s.proc.send_signal(signal.SIGTERM)
        np.testing.assert_allclose(pending.get_result().as_numpy("y"), [3.0, 12.0])
        assert s.stop() == 0
        assert "draining" in s.log() and "stopped" in s.log()
    finally:
        c.close()
        s.stop(signal.SIGKILL)


def test_bad_command_lines(cuvil_bin, tmp_path):
    import subprocess
    r = subprocess.run([cuvil_bin, "serve"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--model-repository" in r.stderr
    r = subprocess.run([cuvil_bin, "serve", "--model-repository", str(tmp_path / "none"), "--http-port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not a directory" in r.stderr
    r = subprocess.run([cuvil_bin, "serve", "--model-repository", str(tmp_path), "--http-port", "70000"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--http-port" in r.stderr
