"""What a hot weight swap costs: the swap itself, and the request path's latency with and without swaps.

    python bench/weight_swap_bench.py [--model convnet|resnet18|all] [--threads 2] [--seconds 4] [--interval 0.25]

`convnet` is an ONNX model (Conv + BatchNormalization blocks, a Gemm) built here: its swaps replace the
initializers and run the passes again (BatchNorm folded into the new convolution weights). `resnet18` is
torchvision's, through cuvil.compile: its swaps replace the state_dict entries in the graph kept before the
passes and run them again, natively (`--recompile`: the old path, compiling the module again, for comparison;
`--model resnet18-both` runs both paths one after the other in one process). For each,
`--threads` threads call the model for `--seconds` without swaps, then as long again while another thread swaps
the weights every `--interval` seconds; the table gives the calls' p50/p99/max latency in each phase and the
swaps' mean time (all of it off the request path: the callers never wait for a swap).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import cuvil  # noqa: E402


def convnet(tmp: str, seed: int) -> tuple[str, dict]:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    f = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)  # noqa: E731
    w, nodes, prev, c = {}, [], "x", 3
    for i, co in enumerate([32, 64, 64, 128]):
        w.update({f"c{i}.w": f(co, c, 3, 3), f"c{i}.b": f(co), f"bn{i}.s": rng.uniform(0.5, 1.5, co).astype(np.float32),
                  f"bn{i}.b": f(co), f"bn{i}.m": f(co), f"bn{i}.v": rng.uniform(0.5, 2, co).astype(np.float32)})
        nodes += [helper.make_node("Conv", [prev, f"c{i}.w", f"c{i}.b"], [f"conv{i}"], pads=[1, 1, 1, 1],
                                   strides=[2, 2] if i else [1, 1]),
                  helper.make_node("BatchNormalization", [f"conv{i}", f"bn{i}.s", f"bn{i}.b", f"bn{i}.m", f"bn{i}.v"],
                                   [f"bn{i}"]),
                  helper.make_node("Relu", [f"bn{i}"], [f"r{i}"])]
        prev, c = f"r{i}", co
    w.update({"fc.w": f(10, c), "fc.b": f(10)})
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["p"]), helper.make_node("Flatten", ["p"], ["fl"]),
              helper.make_node("Gemm", ["fl", "fc.w", "fc.b"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                          [numpy_helper.from_array(v, k) for k, v in w.items()])
    path = os.path.join(tmp, f"convnet{seed}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, w


def setup(name: str, tmp: str):
    """(compiled model, input, [weight sets to cycle through])"""
    if name == "convnet":
        path, w0 = convnet(tmp, 0)
        sets = [w0] + [convnet(tmp, s)[1] for s in (1, 2)]
        return cuvil.load_onnx(path), np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32), sets
    import torch
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 224, 224)
    sets = [{k: v.clone() for k, v in m.state_dict().items()}]
    for s in (1, 2):
        torch.manual_seed(s)
        sets.append({k: v.clone() for k, v in torchvision.models.resnet18().eval().state_dict().items()})
    return cuvil.compile(m, (x,)), x, sets


def measure(compiled, x, threads: int, seconds: float, swap_every: float | None, sets: list, nice: int = 0):
    stop = threading.Event()
    lat: list[list[float]] = [[] for _ in range(threads)]
    swaps: list[float] = []

    def caller(i):
        while not stop.is_set():
            t0 = time.perf_counter()
            compiled(x)
            lat[i].append(time.perf_counter() - t0)

    def swapper():
        if nice:  # this thread only (Linux: a thread id is a process id for setpriority)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        k = 0
        while not stop.is_set():
            k += 1
            t0 = time.perf_counter()
            compiled.update_weights(sets[k % len(sets)])
            swaps.append(time.perf_counter() - t0)
            stop.wait(swap_every)

    ts = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
    if swap_every is not None:
        ts.append(threading.Thread(target=swapper))
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    all_lat = np.array([v for per in lat for v in per]) * 1e3
    return all_lat, np.array(swaps) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="all", choices=["convnet", "resnet18", "resnet18-both", "all"])
    ap.add_argument("--recompile", action="store_true", help="PyTorch models swap by compiling again")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between swaps")
    ap.add_argument("--nice", type=int, default=0, help="niceness of the swapping thread (0: the callers')")
    a = ap.parse_args()
    names = ["convnet", "resnet18"] if a.model == "all" else \
        ["resnet18", "resnet18:recompile"] if a.model == "resnet18-both" else [a.model]
    print(f"{'model':<18} {'phase':<12} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'swaps':>6} "
          f"{'swap ms':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            compiled, x, sets = setup(name.split(":")[0], tmp)
            if compiled._weights_recipe is not None and (a.recompile or name.endswith(":recompile")):
                compiled._weights_recipe.constants = None  # (the old path: capture and compile again)
            for _ in range(20):  # warm
                compiled(x)
            compiled.update_weights(sets[1])  # the first swap prepares as many executors as the threads will use
            for phase, every in (("no swaps", None), ("swapping", a.interval)):
                lat, sw = measure(compiled, x, a.threads, a.seconds, every, sets, a.nice)
                swap = f"{sw.mean():8.1f}" if len(sw) else f"{'-':>8}"
                print(f"{name:<18} {phase:<12} {len(lat):>6} {np.percentile(lat, 50):8.2f} "
                      f"{np.percentile(lat, 99):8.2f} {lat.max():8.2f} {len(sw):>6} {swap}")


if __name__ == "__main__":
    main()
