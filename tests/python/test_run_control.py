"""Stopping long runs from Python: Ctrl-C (SIGINT) turns into KeyboardInterrupt within a couple of seconds while a
Loop of 2^62 iterations runs with the GIL released; CompiledModule.cancel() from another thread, and the limits of
set_limits / load_onnx (time, loop iterations) stop it with cuvil.RunCancelled / cuvil.RunLimitExceeded; and deep
graphs (a 50,000-node chain) build, compile and run on a thread with a small stack."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import cuvil
from cuvil import _C

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOREVER = 2 ** 62


def counting_loop_model(path: str) -> str:
    """y = Loop(m, true, x) { v -> v + 1 }: x + m, where m (an i64 scalar input) may be 2^62, the condition is
    always true; the loop node is named 'forever'."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["v", "one"], ["v_next"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", TensorProto.FLOAT, [3])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    loop = helper.make_node("Loop", ["m", "cond", "x"], ["y"], name="forever", body=body)
    graph = helper.make_graph(
        [loop], "g",
        [helper.make_tensor_value_info("m", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [helper.make_tensor("cond", TensorProto.BOOL, [], [True])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def loop_path(tmp_path_factory):
    return counting_loop_model(str(tmp_path_factory.mktemp("loop") / "loop.onnx"))


def m(n: int) -> np.ndarray:
    return np.array(n, dtype=np.int64)


X = np.array([1, 2, 3], dtype=np.float32)


def test_sigint_becomes_keyboard_interrupt_promptly(loop_path):
    script = textwrap.dedent(f"""
        import os, time
        import numpy as np
        import cuvil
        model = cuvil.load_onnx({loop_path!r})
        assert list(model(np.array(2, np.int64), np.ones(3, np.float32))) == [3, 3, 3]
        print("running", flush=True)
        try:
            model(np.array({FOREVER}, np.int64), np.ones(3, np.float32))
        except KeyboardInterrupt:
            print("KeyboardInterrupt", time.monotonic(), flush=True)
            os._exit(3)  # (skips the interpreter's teardown)
        print("finished", flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        assert p.stdout.readline().strip() == "running", p.stderr.read()
        time.sleep(0.5)  # well inside the endless loop
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        elapsed = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 3, f"exit {p.returncode}\nstdout: {out}\nstderr: {err}"
    assert "KeyboardInterrupt" in out
    # (Both clocks are the system's monotonic clock.)
    caught = float(out.split("KeyboardInterrupt")[1].split()[0])
    assert caught - sent < 2.0, f"KeyboardInterrupt came {caught - sent:.2f} s after SIGINT"
    assert elapsed < 30, f"the process took {elapsed:.1f} s to exit"


def test_loop_iteration_limit(loop_path):
    model = cuvil.load_onnx(loop_path, max_loop_iterations=1000)
    with pytest.raises(cuvil.RunLimitExceeded, match=r"Loop node 'forever': the loop reached the limit of 1000 "):
        model(m(FOREVER), X)
    np.testing.assert_array_equal(model(m(1000), X), X + 1000)  # exactly the limit runs
    model.set_limits()  # none
    np.testing.assert_array_equal(model(m(1001), X), X + 1001)
    model.set_limits(max_loop_iterations=10)
    with pytest.raises(cuvil.RunLimitExceeded):
        model(m(11), X)


def test_timeout(loop_path):
    model = cuvil.load_onnx(loop_path)
    model.set_limits(timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(cuvil.RunLimitExceeded, match="time limit of 200 ms"):
        model(m(FOREVER), X)
    assert 0.15 < time.monotonic() - t0 < 2.0
    np.testing.assert_array_equal(model(m(5), X), X + 5)  # per call: the next one has its own 0.2 s
    assert issubclass(cuvil.RunLimitExceeded, RuntimeError) and issubclass(cuvil.RunCancelled, RuntimeError)


def test_cancel_from_another_thread(loop_path):
    model = cuvil.load_onnx(loop_path)
    caught = []

    def run():
        try:
            model(m(FOREVER), X)
        except Exception as e:  # noqa: BLE001 - what stopped it is the point
            caught.append(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)
    sent = time.monotonic()
    model.cancel()
    t.join(timeout=5)
    assert not t.is_alive(), "cancel() did not stop the call"
    assert time.monotonic() - sent < 2.0
    assert len(caught) == 1 and isinstance(caught[0], cuvil.RunCancelled), caught
    assert "cancelled" in str(caught[0])
    # Calls after cancel() run normally; cancel() with nothing running does nothing.
    model.cancel()
    np.testing.assert_array_equal(model(m(4), X), X + 4)


def test_limit_arguments_are_checked(loop_path):
    for bad in [dict(timeout=0), dict(timeout=-1.0), dict(timeout="1"), dict(max_loop_iterations=0),
                dict(max_loop_iterations=2.5), dict(max_loop_iterations=True)]:
        with pytest.raises(ValueError):
            cuvil.load_onnx(loop_path, **bad)
    with pytest.raises(TypeError, match="timeout, max_loop_iterations"):
        cuvil.load_onnx(loop_path, timeot=1.0)
    model = cuvil.load_onnx(loop_path)
    with pytest.raises(ValueError):
        model.set_limits(timeout=float("nan"))
    with pytest.raises(TypeError):
        model.set_limits(1.0)  # keywords only
    assert "KeyboardInterrupt" in cuvil.CompiledModule.__doc__
    assert cuvil.CompiledModule.set_limits.__doc__ and cuvil.CompiledModule.cancel.__doc__


def build_chain(n: int) -> "_C.Model":
    """x -> Relu -> Neg -> Relu -> ... (n nodes), built node by node as the frontends do, compiled at -O1."""
    b = _C.GraphBuilder("chain")
    v = b.add_input("x", "f32", [4, 7])
    for k in range(n):
        v, = b.add_node("Neg" if k % 2 else "Relu", [v])
    b.set_outputs([v])
    return b.build(1)


def test_deep_chain_on_a_small_thread_stack():
    n = 50_000
    x = np.linspace(-3, 3, 28, dtype=np.float32).reshape(4, 7)
    # (Relu, Neg) n/2 times: -relu(x) after the first pair, which every later Relu zeroes.
    want = np.zeros_like(x)
    result = {}

    def work():
        try:
            model = build_chain(n)
            result["y"] = model.run([x])[0]
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    old = threading.stack_size(1 << 20)  # 1 MB, an eighth of the main thread's
    try:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    assert "error" not in result, result.get("error")
    np.testing.assert_array_equal(result["y"], want)
