"""The main job: export torchvision ResNet-18 (fixed-seed weights) to ONNX, run it through `cuvil run`, and print the
output checksum, the max difference from PyTorch, and Cuvil's latency next to PyTorch's."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUVIL = os.path.join(ROOT, "build", "bin", "cuvil")


def main() -> int:
    out = os.path.join(ROOT, "out", "main_job")
    name = sys.argv[1] if len(sys.argv) > 1 else "resnet18"
    paths = models.export(name, out)
    run = subprocess.run([CUVIL, "run", paths["onnx"], "--input", f"input={paths['input.npy']}",
                          "--output-dir", out], capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    got = np.load(os.path.join(out, "logits.npy"))
    ref = np.load(paths["torch.npy"])
    rel_l2 = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))

    bench = subprocess.run([CUVIL, "bench", paths["onnx"], "--input", f"input={paths['input.npy']}",
                            "--iters", "20", "--warmup", "2", "--json"], capture_output=True, text=True, check=True)
    result = json.loads(bench.stdout)
    cuvil_ms, cuvil_threads = result["median_ms"], result["threads"]
    compile_ms = result["load_optimize_ms"] + result["prepare_ms"]

    torch.set_num_threads(os.cpu_count() or 1)
    model = models.build(name)
    x = torch.from_numpy(np.load(paths["input.npy"]))
    times = []
    with torch.no_grad():
        model(x)
        for _ in range(20):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e3)
    torch_ms = float(np.median(times))

    print(f"model:            {name} (torchvision, fixed-seed weights), input {list(x.shape)}")
    print(f"output checksum:  sum={got.sum():.6f} abs-sum={np.abs(got).sum():.6f} shape={list(got.shape)}")
    print(f"max |cuvil - torch|: {np.abs(got - ref).max():.3e}   relative L2: {rel_l2:.3e}")
    print(f"latency (median): cuvil {cuvil_ms:.2f} ms ({cuvil_threads} threads; compiled in {compile_ms:.0f} ms)   "
          f"pytorch eager {torch_ms:.2f} ms ({torch.get_num_threads()} threads)   ratio {cuvil_ms / torch_ms:.2f}x")
    return 0 if rel_l2 < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
