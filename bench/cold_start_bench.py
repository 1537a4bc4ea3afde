"""Cold start: loading a model and running its first inference, each in a fresh process, alternated.

    python bench/cold_start_bench.py MODEL.onnx [--rounds 3] [--threads 2] [--input 1,3,224,224]

Per round, fresh processes in turn: the model's .cuv with prepacked weights (`cuvil compile`, the default: oneDNN's
images and the CPU GEMM's panels), with `--parts` also the .cuv without the GEMM panels (`CUVIL_NO_PREPACK=gemm`),
the same .cuv without either (the weights reordered and packed at load, as before the prepacked section), a cold compile from
ONNX (`cuvil.load_onnx`, model cache off), and ONNX Runtime (session creation). Each reports the load (or
compile, or session) and the first inference, wall and CPU time of its own process (imports excluded), the CPU
time of a second inference, and the minor page faults of the load and of the first inference; the table gives the
medians and the ratios the issue asks for (.cuv total over the ONNX cold compile's and over ORT's), and the floor:
the second inference alone over the cold compile.
CPU time is the robust one on a loaded machine; wall time is what a user waits on a quiet one.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import os, resource, sys, time
import numpy as np
kind, path, threads, shape = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(d) for d in sys.argv[4].split(",")]
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
if kind == "ort":
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = threads
    t0, c0, f0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    t1, c1, f1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    s.run(None, {s.get_inputs()[0].name: x})
    t2, c2, f2 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    s.run(None, {s.get_inputs()[0].name: x})
else:
    import cuvil
    t0, c0, f0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    opts = {"threads": threads} if threads > 0 else {}
    m = cuvil.load_onnx(path, **opts) if kind == "onnx" else cuvil.load(path, **opts)
    t1, c1, f1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    m(x)
    t2, c2, f2 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    m(x)
t3, c3 = time.perf_counter(), time.process_time()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (c1 - c0) * 1e3, (c2 - c1) * 1e3, (c3 - c2) * 1e3, f1 - f0, f2 - f1)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="ONNX Runtime's intra-op threads (Cuvil: its default)")
    ap.add_argument("--input", default="1,3,224,224")
    ap.add_argument("--parts", action="store_true", help="also the .cuv with oneDNN's images but no GEMM panels")
    ap.add_argument("--cuv-threads", type=int, default=0, help="Cuvil's threads (0: its default)")
    args = ap.parse_args()
    cli = os.path.join(ROOT, "build", "bin", "cuvil")
    env = {**os.environ, "CUVIL_CACHE_DIR": "off", "PYTHONPATH": os.path.join(ROOT, "python")}
    with tempfile.TemporaryDirectory() as tmp:
        packed = os.path.join(tmp, "packed.cuv")
        subprocess.run([cli, "compile", args.model, "-o", packed], check=True, capture_output=True)
        plain = os.path.join(tmp, "plain.cuv")
        subprocess.run([cli, "compile", args.model, "-o", plain], check=True, capture_output=True,
                       env={**env, "CUVIL_NO_PREPACK": "1"})
        kinds = {"cuv+prepacked": ("cuv", packed)}
        if args.parts:
            no_panels = os.path.join(tmp, "no_panels.cuv")
            subprocess.run([cli, "compile", args.model, "-o", no_panels], check=True, capture_output=True,
                           env={**env, "CUVIL_NO_PREPACK": "gemm"})
            kinds["cuv-panels"] = ("cuv", no_panels)
        kinds.update({"cuv": ("cuv", plain), "onnx cold": ("onnx", args.model), "ort": ("ort", args.model)})
        got: dict[str, list[list[float]]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for name, (kind, path) in kinds.items():
                r = subprocess.run([sys.executable, "-c", CHILD, kind, path,
                                    str(args.threads if kind == "ort" else args.cuv_threads), args.input],
                                   capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    sys.exit(f"{name}: {r.stderr[-2000:]}")
                got[name].append([float(v) for v in r.stdout.split()[-7:]])
    med = {k: [statistics.median(r[i] for r in v) for i in range(7)] for k, v in got.items()}
    print(f"{'':14} {'wall load':>10} {'wall first':>10} {'wall total':>10} {'cpu load':>9} {'cpu first':>9} "
          f"{'cpu total':>9} {'cpu 2nd':>8} {'flt load':>8} {'flt first':>9}   (ms, page faults; medians of {args.rounds} alternated rounds, load "
          f"{os.getloadavg()[0]:.1f})")
    for k, (wl, wf, cl, cf, cs, fl, ff) in med.items():
        print(f"{k:14} {wl:10.1f} {wf:10.1f} {wl + wf:10.1f} {cl:9.1f} {cf:9.1f} {cl + cf:9.1f} {cs:8.1f} {fl:8.0f} "
              f"{ff:9.0f}")
    total = {k: (v[0] + v[1], v[2] + v[3]) for k, v in med.items()}
    for other in ("onnx cold", "ort"):
        print(f"cuv+prepacked / {other}: wall {total['cuv+prepacked'][0] / total[other][0]:.2f}x, "
              f"cpu {total['cuv+prepacked'][1] / total[other][1]:.2f}x")
    # What no loader can go under: the second inference's arithmetic alone, over the cold compile.
    print(f"floor (cuv+prepacked's 2nd inference alone) / onnx cold: cpu "
          f"{med['cuv+prepacked'][4] / total['onnx cold'][1]:.2f}x")


if __name__ == "__main__":
    main()
