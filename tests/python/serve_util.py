"""Helpers for the `cuvil serve` tests: model repositories of small ONNX models and a server process on free
ports that the tests start and stop."""
import json
import os
import re
import select
import signal
import subprocess
import time
import urllib.request

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def mlp_model(seed, width=16, hidden=8):
    """x[batch, width] -> y = relu(x @ W + B) [batch, hidden], s = sum(y, 1) [batch, 1]."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((width, hidden)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "B")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Add", ["h", "B"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
        helper.make_node("ReduceSum", ["y", "axes"], ["s"], keepdims=1),
    ]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", hidden]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch", 1])], [w, b, axes])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def rowsum_model():
    """x[batch, n] -> y[batch] = sum over n: batches only rows of equal n."""
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "rowsum",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])], [axes])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# v2 datatype -> (ONNX type, numpy dtype); BF16 is numpy's via ml_dtypes.
def dtype_table():
    import ml_dtypes
    return {
        "BOOL": (TensorProto.BOOL, np.bool_), "UINT8": (TensorProto.UINT8, np.uint8),
        "UINT16": (TensorProto.UINT16, np.uint16), "UINT32": (TensorProto.UINT32, np.uint32),
        "UINT64": (TensorProto.UINT64, np.uint64), "INT8": (TensorProto.INT8, np.int8),
        "INT16": (TensorProto.INT16, np.int16), "INT32": (TensorProto.INT32, np.int32),
        "INT64": (TensorProto.INT64, np.int64), "FP16": (TensorProto.FLOAT16, np.float16),
        "FP32": (TensorProto.FLOAT, np.float32), "FP64": (TensorProto.DOUBLE, np.float64),
        "BF16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
    }


def dtypes_model(exclude=()):
    """One input and output per v2 datatype: out_T = in_T + in_T (BOOL: Not), shape [n]."""
    nodes, ins, outs = [], [], []
    for name, (onnx_type, _) in dtype_table().items():
        if name in exclude:
            continue
        op = helper.make_node("Not", [f"in_{name}"], [f"out_{name}"]) if name == "BOOL" else \
            helper.make_node("Add", [f"in_{name}", f"in_{name}"], [f"out_{name}"])
        nodes.append(op)
        ins.append(helper.make_tensor_value_info(f"in_{name}", onnx_type, [f"n_{name}"]))
        outs.append(helper.make_tensor_value_info(f"out_{name}", onnx_type, [f"n_{name}"]))
    g = helper.make_graph(nodes, "dtypes", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def write_config(repo, name, **config):
    os.makedirs(os.path.join(repo, name), exist_ok=True)
    with open(os.path.join(repo, name, "config.json"), "w") as f:
        json.dump(config, f)


class Server:
    """`cuvil serve` on free ports (port 0: the server picks and prints them)."""

    def __init__(self, cuvil_bin, repo, *extra, log_path=None):
        args = [cuvil_bin, "serve", "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
                "--grpc-port", "0", "--metrics-port", "0", *extra]
        if log_path:
            args += ["--access-log", log_path]
        self.stderr_path = os.path.join(repo, "..", f"serve-{os.getpid()}-{time.time_ns()}.stderr")
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        line = self._read_line(timeout=300)
        m = re.search(r"ready: http (\d+) grpc (\d+) metrics (\d+)", line or "")
        if not m:
            self.stop()
            raise RuntimeError(f"cuvil serve did not start: {line!r}\n{self.log()}")
        self.http_port, self.grpc_port, self.metrics_port = int(m.group(1)), int(m.group(2)), int(m.group(3))
        self.url = f"127.0.0.1:{self.http_port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"

    def _read_line(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                return self.proc.stdout.readline()
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                return self.proc.stdout.readline()
        return None

    def log(self):
        if not self.stderr.closed:
            self.stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30) as r:
            return r.read().decode()

    def metric(self, name, **labels):
        """The value of one sample, 0.0 when absent."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in self.metrics().splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            m = re.fullmatch(r"([^{]+)(?:\{(.*)\})?", key)
            if m and m.group(1) == name:
                got = ",".join(sorted(p for p in (m.group(2) or "").split(",") if p))
                if got == want:
                    return float(value)
        return 0.0

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops the server; returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.stderr.closed:
            self.stderr.close()
        return self.proc.returncode
