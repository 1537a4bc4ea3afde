"""`cuvil serve` under load across 20 hot weight swaps, 5 model reloads and failed loads: real clients
(tritonclient HTTP and gRPC) send requests the whole time; every response must be a success whose outputs equal
those of exactly the weights version it names (computed by ONNX Runtime from that version's file). Bounded: the
swaps run back to back with short pauses, about 20-40 s in all on a loaded machine."""
import os
import re
import shutil
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
import cuvil  # noqa: E402

from serve_util import Server, mlp_model, save, write_config  # noqa: E402

WIDTH, HIDDEN = 64, 32
SWAPS, RELOADS = 20, 5


def write_version(repo, version, seed, work):
    """DIR/m/<version>/model.cuv of the MLP with weights from `seed`; returns the ONNX file it came from."""
    onnx_path = os.path.join(work, f"m{version}.onnx")
    save(mlp_model(seed, width=WIDTH, hidden=HIDDEN), onnx_path)
    cuv = os.path.join(work, f"m{version}.cuv")
    cuvil.load_onnx(onnx_path, cache=False).save(cuv)
    os.makedirs(os.path.join(repo, "m", str(version)))
    # Published whole: the server may poll or be asked to load while we write.
    os.replace(cuv, os.path.join(repo, "m", str(version), "model.cuv"))
    return onnx_path


def test_hot_swaps_and_reloads_under_load(cuvil_bin, tmp_path):
    repo, work = str(tmp_path / "models"), str(tmp_path / "work")
    os.makedirs(work)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((rows, WIDTH)).astype(np.float32) for rows in (1, 1, 2, 3)]
    expected = {}  # version label -> outputs of each of `inputs` (ONNX Runtime on that version's weights)

    def add_version(version, seed):
        sess = ort.InferenceSession(write_version(repo, version, seed, work), providers=["CPUExecutionProvider"])
        expected[str(version)] = [sess.run(None, {"x": x}) for x in inputs]

    write_config(repo, "m", max_batch_size=8, max_queue_delay_us=200, instances=2, warmup=True)
    add_version(1, 1000)
    s = Server(cuvil_bin, repo)
    stop = threading.Event()
    failures, counts, lock = [], {}, threading.Lock()

    def check(k, version, y, total):
        want = expected.get(version)
        if want is None:
            raise AssertionError(f"response names unknown version {version!r}")
        np.testing.assert_allclose(y, want[k][0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(total, want[k][1], rtol=1e-5, atol=1e-4)
        with lock:
            counts[version] = counts.get(version, 0) + 1

    def http_client(k):
        c = httpclient.InferenceServerClient(s.url, network_timeout=120)
        x = inputs[k]
        try:
            while not stop.is_set():
                try:
                    i = httpclient.InferInput("x", list(x.shape), "FP32")
                    i.set_data_from_numpy(x, binary_data=True)
                    r = c.infer("m", [i])
                    check(k, r.get_response()["model_version"], r.as_numpy("y"), r.as_numpy("s"))
                except Exception as e:  # noqa: BLE001 (collected, the test fails on any)
                    failures.append(f"http: {e!r}")
        finally:
            c.close()

    def grpc_client(k):
        c = grpcclient.InferenceServerClient(s.grpc_url)
        x = inputs[k]
        try:
            while not stop.is_set():
                try:
                    i = grpcclient.InferInput("x", list(x.shape), "FP32")
                    i.set_data_from_numpy(x)
                    r = c.infer("m", [i])
                    check(k, r.get_response().model_version, r.as_numpy("y"), r.as_numpy("s"))
                except Exception as e:  # noqa: BLE001
                    failures.append(f"grpc: {e!r}")
        finally:
            c.close()

    threads = [threading.Thread(target=http_client, args=(k,)) for k in range(len(inputs))]
    threads += [threading.Thread(target=grpc_client, args=(k,)) for k in (0, 2)]
    admin = httpclient.InferenceServerClient(s.url, network_timeout=300)
    failed_loads = 0
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)
        version = 1
        reload_at = {5, 10, 15, 20, 25}  # of the 25 changes, these change config.json too: a full reload
        for change in range(1, SWAPS + RELOADS + 1):
            version += 1
            if change in reload_at:
                write_config(repo, "m", max_batch_size=8, max_queue_delay_us=200 + change, instances=2,
                             warmup=True)
            add_version(version, 1000 + version)
            admin.load_model("m")
            if change in (7, 17):  # a broken newer version: its load fails, the one before keeps serving
                bad = os.path.join(repo, "m", str(version + 1))
                os.makedirs(bad)
                with open(os.path.join(bad, "model.cuv"), "wb") as f:
                    f.write(b"CUVIL not really an artifact")
                with pytest.raises(Exception, match="failed to load"):
                    admin.load_model("m")
                failed_loads += 1
                assert admin.is_model_ready("m")
                shutil.rmtree(bad)
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join()
        admin.close()
        log_code = s.stop()
    log = s.log()
    swaps = re.findall(r"swapped the weights of model 'm' \(version (\d+)\)", log)
    reloads = re.findall(r"reloaded model 'm' \(version (\d+)\)", log)
    print(f"\n{sum(counts.values())} responses over {len(counts)} versions; {len(swaps)} swaps, "
          f"{len(reloads)} reloads, {failed_loads} failed loads; per version: "
          + " ".join(f"{v}:{counts[v]}" for v in sorted(counts, key=int)))
    assert not failures, failures[:5]
    assert log_code == 0
    assert len(swaps) == SWAPS and len(reloads) == RELOADS, log
    assert sorted(int(v) for v in reloads) == [change + 1 for change in sorted(reload_at)]
    assert failed_loads == 2
    # Responses kept coming throughout: most versions answered some (each served ~0.2 s or more).
    assert len(counts) >= (SWAPS + RELOADS) // 2, counts
