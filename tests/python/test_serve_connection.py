"""`cuvil serve`'s HTTP connection loop (src/serving/http_connection.cpp: one buffered stream per keep-alive
connection) on raw sockets: pipelined requests, many requests on one connection, a request dribbled in byte by
byte, Expect: 100-continue, responses larger than the write buffer, a client reading slowly, hang-ups; outputs
checked against NumPy."""
import json
import os
import socket
import time

import numpy as np
import pytest

from serve_util import Server, mlp_model, save


@pytest.fixture(scope="module")
def server(cuvil_bin, tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("serve_conn") / "models")
    save(mlp_model(3), os.path.join(repo, "mlp", "1", "model.onnx"))  # no config: no batching, any batch size
    s = Server(cuvil_bin, repo, "--read-timeout", "5")
    yield s
    s.stop()


def reference(x):
    from onnx import numpy_helper
    init = {t.name: numpy_helper.to_array(t) for t in mlp_model(3).graph.initializer}
    y = np.maximum(x @ init["W"] + init["B"], 0)
    return y, y.sum(1, keepdims=True)


def infer_request(x, close=False, extra=""):
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.ravel().tolist()}]}).encode()
    conn = "Connection: close\r\n" if close else ""
    return (f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{conn}{extra}\r\n").encode(), body


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) one after another from one socket."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self):
        b = self.sock.recv(65536)
        assert b, "the server closed the connection"
        self.buf += b

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        length = [int(l.split(b":")[1]) for l in lines[1:] if l.lower().startswith(b"content-length:")]
        n = length[0] if length else 0
        while len(rest) < n:
            self._fill()
            rest = self.buf.partition(b"\r\n\r\n")[2]
        self.buf = rest[n:]
        return status, rest[:n]


def check(status, body, x):
    assert status == 200, body
    out = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in json.loads(body)["outputs"]}
    y, s = reference(x)
    np.testing.assert_allclose(out["y"], y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["s"], s, rtol=1e-5, atol=1e-4)


def connect(server):
    return socket.create_connection(("127.0.0.1", server.http_port), timeout=30)


def test_many_requests_on_one_connection(server):
    rng = np.random.default_rng(0)
    with connect(server) as s:
        r = Reader(s)
        for i in range(50):
            x = rng.standard_normal((1 + i % 3, 16)).astype(np.float32)
            head, body = infer_request(x)
            s.sendall(head + body)
            check(*r.response(), x)
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert r.response()[0] == 200


def test_pipelined_requests_all_answered_in_order(server):
    """Several requests in one send: bytes read past the first request belong to the next one."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1 + i, 16)).astype(np.float32) for i in range(5)]
    data = b"".join(h + b for h, b in (infer_request(x) for x in xs))
    data += b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(server) as s:
        s.sendall(data)
        r = Reader(s)
        for x in xs:
            check(*r.response(), x)
        assert r.response()[0] == 200


def test_request_dribbled_byte_by_byte(server):
    x = np.arange(16, dtype=np.float32).reshape(1, 16) / 7
    head, body = infer_request(x, close=True)
    with connect(server) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(head + body)):
            s.send((head + body)[i:i + 1])
            if i % 64 == 0:
                time.sleep(0.001)
        check(*Reader(s).response(), x)


def test_expect_100_continue(server):
    """The interim 100 must go out before the server waits for the body (it is buffered like any write)."""
    x = np.ones((2, 16), np.float32)
    head, body = infer_request(x, extra="Expect: 100-continue\r\n")
    with connect(server) as s:
        s.sendall(head)
        r = Reader(s)
        while b"\r\n\r\n" not in r.buf:
            r._fill()  # the client sends the body only once it has seen "100 Continue"
        assert r.buf.startswith(b"HTTP/1.1 100"), r.buf
        r.buf = r.buf.partition(b"\r\n\r\n")[2]
        s.sendall(body)
        check(*r.response(), x)


def test_response_larger_than_the_write_buffer_read_slowly(server):
    """~180 KB of JSON (the write buffer holds 64 KB), read in small pieces with pauses."""
    x = np.random.default_rng(2).standard_normal((3000, 16)).astype(np.float32)
    head, body = infer_request(x)
    with connect(server) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(head + body)
        time.sleep(0.3)
        r = Reader(s)
        status, out = r.response()
        assert len(out) > 100_000
        check(status, out, x)
        # The connection still serves.
        x2 = np.ones((1, 16), np.float32)
        s.sendall(b"".join(infer_request(x2)))
        check(*r.response(), x2)


def test_clients_hanging_up_leave_the_server_serving(server):
    x = np.random.default_rng(3).standard_normal((2000, 16)).astype(np.float32)
    head, body = infer_request(x)
    for _ in range(5):
        with connect(server) as s:  # sends a request with a large answer and leaves without reading it
            s.sendall(head + body)
        with connect(server) as s:  # leaves in the middle of the body
            s.sendall(head + body[: len(body) // 2])
    with connect(server) as s:
        x2 = np.ones((1, 16), np.float32)
        s.sendall(b"".join(infer_request(x2, close=True)))
        check(*Reader(s).response(), x2)
