"""`cuvil serve` over gRPC (inference.GRPCInferenceService) driven by tritonclient.grpc: health, metadata, infer
with raw_input_contents in every numeric datatype and with typed contents, batching, errors as gRPC statuses, the
repository RPCs; outputs checked against ONNX Runtime and NumPy."""
import os

import numpy as np
import onnxruntime as ort
import pytest

grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException, np_to_triton_dtype  # noqa: E402

from serve_util import Server, dtype_table, dtypes_model, mlp_model, rowsum_model, save, write_config  # noqa: E402


@pytest.fixture(scope="module")
def server(cuvil_bin, tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("serve_grpc") / "models")
    save(mlp_model(1), os.path.join(repo, "mlp", "1", "model.onnx"))
    write_config(repo, "mlp", max_batch_size=8, max_queue_delay_us=1000)
    save(dtypes_model(), os.path.join(repo, "dtypes", "1", "model.onnx"))
    save(dtypes_model(exclude=("FP16", "BF16")), os.path.join(repo, "typed", "1", "model.onnx"))
    save(rowsum_model(), os.path.join(repo, "rowsum", "1", "model.onnx"))
    write_config(repo, "rowsum", max_batch_size=4, max_queue_delay_us=5_000_000)
    s = Server(cuvil_bin, repo, "--max-request-bytes", str(1 << 20))
    s.repo = repo
    yield s
    assert s.stop() == 0


@pytest.fixture
def client(server):
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.close()


def make_input(name, array):
    i = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
    i.set_data_from_numpy(array)
    return i


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_server_metadata(as_json=True)["name"] == "cuvil"
    assert client.is_model_ready("mlp") and not client.is_model_ready("nope")
    m = client.get_model_metadata("mlp", as_json=True)
    assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["-1", "16"]}]
    assert [o["name"] for o in m["outputs"]] == ["y", "s"]
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("nope")
    assert "NOT_FOUND" in e.value.status()


@pytest.mark.parametrize("batch", [1, 5])
def test_infer_mlp_matches_onnxruntime(client, server, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
    sess = ort.InferenceSession(os.path.join(server.repo, "mlp", "1", "model.onnx"), providers=["CPUExecutionProvider"])
    want_y, want_s = sess.run(None, {"x": x})
    r = client.infer("mlp", [make_input("x", x)], request_id="g1")
    assert r.get_response().id == "g1"
    np.testing.assert_allclose(r.as_numpy("y"), want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r.as_numpy("s"), want_s, rtol=1e-5, atol=1e-4)
    r = client.infer("mlp", [make_input("x", x)], outputs=[grpcclient.InferRequestedOutput("s")])
    assert [o.name for o in r.get_response().outputs] == ["s"]
    np.testing.assert_allclose(r.as_numpy("s"), want_s, rtol=1e-5, atol=1e-4)


def test_every_datatype_raw(client):
    rng = np.random.default_rng(3)
    inputs, sent = [], {}
    for k, (name, (_, np_dtype)) in enumerate(dtype_table().items()):
        if name == "BOOL":
            v = rng.integers(0, 2, 4 + k).astype(np.bool_)
        elif name in ("FP16", "FP32", "FP64", "BF16"):
            v = (rng.standard_normal(4 + k) * 50).astype(np.float32).astype(np_dtype)
        else:
            info = np.iinfo(np_dtype)
            v = rng.integers(info.min, info.max, 4 + k, dtype=np_dtype, endpoint=True)
        sent[name] = v
        inputs.append(make_input(f"in_{name}", v))
    r = client.infer("dtypes", inputs)
    for name, v in sent.items():
        want = np.logical_not(v) if name == "BOOL" else v + v
        got = r.as_numpy(f"out_{name}")
        np.testing.assert_array_equal(got.astype(np.float64) if name == "BF16" else got,
                                      want.astype(np.float64) if name == "BF16" else want, err_msg=name)


def test_typed_contents(server):
    """InferTensorContents instead of raw bytes (what clients other than Triton's send)."""
    import grpc
    with grpc.insecure_channel(server.grpc_url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        values = {"BOOL": ("bool_contents", [True, False]), "UINT8": ("uint_contents", [0, 255]),
                  "UINT16": ("uint_contents", [0, 65535]), "UINT32": ("uint_contents", [7, 2 ** 32 - 1]),
                  "UINT64": ("uint64_contents", [1, 2 ** 64 - 1]), "INT8": ("int_contents", [-128, 127]),
                  "INT16": ("int_contents", [-300, 300]), "INT32": ("int_contents", [-5, 2 ** 31 - 1]),
                  "INT64": ("int64_contents", [-(2 ** 62), 5]), "FP32": ("fp32_contents", [1.5, -2.0]),
                  "FP64": ("fp64_contents", [0.25, 1e300])}
        table = dtype_table()
        req = service_pb2.ModelInferRequest(model_name="dtypes")
        for name in table:
            t = req.inputs.add(name=f"in_{name}", datatype=name, shape=[2])
            field, v = values.get(name, ("fp32_contents", [1.0, 2.0]))
            getattr(t.contents, field).extend(v)
        # FP16/BF16 have no typed field: they must come as raw bytes.
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(req)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in e.value.details()
        # Every typed field, through a model without FP16/BF16: out = in + in (wrapping), BOOL: not.
        req = service_pb2.ModelInferRequest(model_name="typed")
        for name, (field, v) in values.items():
            getattr(req.inputs.add(name=f"in_{name}", datatype=name, shape=[2]).contents, field).extend(v)
        resp = stub.ModelInfer(req)
        for k, o in enumerate(resp.outputs):
            name = o.name[len("out_"):]
            got = np.frombuffer(resp.raw_output_contents[k], table[name][1])
            v = np.array(values[name][1], table[name][1])
            np.testing.assert_array_equal(got, np.logical_not(v) if name == "BOOL" else v + v, err_msg=name)
        assert len(resp.outputs) == len(values)
        bad = service_pb2.ModelInferRequest(model_name="dtypes")
        t = bad.inputs.add(name="in_INT8", datatype="INT8", shape=[1])
        t.contents.int_contents.extend([300])
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(bad)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "out of range" in e.value.details()
        # The MLP with typed FP32 contents, checked against ONNX Runtime.
        x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
        mlp = service_pb2.ModelInferRequest(model_name="mlp")
        t = mlp.inputs.add(name="x", datatype="FP32", shape=[2, 16])
        t.contents.fp32_contents.extend(x.ravel().tolist())
        resp = stub.ModelInfer(mlp)
        sess = ort.InferenceSession(os.path.join(server.repo, "mlp", "1", "model.onnx"),
                                    providers=["CPUExecutionProvider"])
        y = np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(2, 8)
        np.testing.assert_allclose(y, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_batching_over_grpc(client, server):
    execs0 = server.metric("cuvil_inference_exec_total", model="rowsum")
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((1, 6)).astype(np.float32) for _ in range(4)]
    results = [None] * 4
    done = []

    def callback(i):
        return lambda result, error: (results.__setitem__(i, (result, error)), done.append(i))

    for i, a in enumerate(arrays):
        client.async_infer("rowsum", [make_input("x", a)], callback(i))
    import time
    for _ in range(1200):
        if len(done) == 4:
            break
        time.sleep(0.05)
    assert len(done) == 4
    for a, (result, error) in zip(arrays, results):
        assert error is None, error
        np.testing.assert_allclose(result.as_numpy("y"), a.sum(1), rtol=1e-5, atol=1e-5)
    assert server.metric("cuvil_inference_exec_total", model="rowsum") - execs0 == 1


def test_errors_and_repository(client):
    x = np.ones((2, 16), np.float32)
    for inputs, code, text in [
        ([make_input("x", x.astype(np.float64))], "INVALID_ARGUMENT", "FP64"),
        ([make_input("x", np.ones((9, 16), np.float32))], "INVALID_ARGUMENT", "batch size 9"),
        ([make_input("x", np.ones((300, 1000), np.float32))], "RESOURCE_EXHAUSTED", ""),  # > --max-request-bytes
    ]:
        with pytest.raises(InferenceServerException) as e:
            client.infer("mlp", inputs)
        assert code in e.value.status() and text in str(e.value), (e.value.status(), str(e.value))
    with pytest.raises(InferenceServerException) as e:
        client.infer("nope", [make_input("x", x)])
    assert "NOT_FOUND" in e.value.status()
    index = {m["name"]: m for m in client.get_model_repository_index(as_json=True)["models"]}
    assert index["mlp"]["state"] == "READY"
    client.unload_model("mlp")
    assert not client.is_model_ready("mlp")
    client.load_model("mlp")
    assert client.is_model_ready("mlp")
    assert client.infer("mlp", [make_input("x", x)]).as_numpy("y").shape == (2, 8)


def test_load_with_file_overrides(client, server):
    """RepositoryModelLoad with Triton's parameters: "file:<version>/model.onnx" (bytes_param) uploads a version
    (a weights-only one is hot swapped), "config" (string_param) replaces config.json; bad uploads change nothing."""
    x = np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)

    def check(version, model):
        r = client.infer("grpc_upload", [make_input("x", x)])
        assert r.get_response().model_version == version
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(r.as_numpy("y"), sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)

    v1, v2 = mlp_model(21), mlp_model(22)
    client.load_model("grpc_upload", config='{"max_batch_size": 4}',
                      files={"file:1/model.onnx": v1.SerializeToString()})
    check("1", v1)
    client.load_model("grpc_upload", files={"file:2/model.onnx": v2.SerializeToString()})
    check("2", v2)
    before = sorted(os.listdir(os.path.join(server.repo, "grpc_upload")))
    for files, text in [({"file:2/model.onnx": v1.SerializeToString()}, "already has a version 2"),
                        ({"file:3/model.onnx": b"\x08garbage"}, "failed to load"),
                        ({"file:3/other.onnx": b"x"}, "expected 'file:<version>/model.cuv'")]:
        with pytest.raises(InferenceServerException) as e:
            client.load_model("grpc_upload", files=files)
        assert "INVALID_ARGUMENT" in e.value.status() and text in str(e.value), (e.value.status(), str(e.value))
        check("2", v2)
        assert sorted(os.listdir(os.path.join(server.repo, "grpc_upload"))) == before
