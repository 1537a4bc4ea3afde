#!/usr/bin/env python3
"""A fair speed comparison of Cuvil and ONNX Runtime over the real-model corpus (scripts/model_corpus.py), robust
on a small, loaded machine: both engines run on ONE thread on the calling thread (ORT: intra_op=1, inter_op=1,
sequential; Cuvil: threads=1, CUVIL_IGNORE_LOAD=1), in one process, alternated batch by batch, and what is
compared is the CPU time of the calling thread per call (time.thread_time), not wall-clock time: time the
scheduler gives to other processes does not count against either engine.

    python bench/corpus_cpu_bench.py [--only NAME[,NAME..]] [--rounds 15] [--batch-ms 20] [--json out.json]

Prints per model the median per-call CPU time of each engine and the ratio Cuvil/ORT (< 1: Cuvil faster), then
the geometric mean and the models where Cuvil is slower. The process CPU time per call is recorded beside it: a
process/thread mismatch means work ran on another thread (which thread_time would miss), and is flagged.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("CUVIL_IGNORE_LOAD", "1")  # one thread means one thread, whatever the load
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import numpy as np  # noqa: E402

import model_corpus  # noqa: E402


def ort_one_thread(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def per_call_cpu(fn, n):
    """(thread CPU s, process CPU s) per call over n calls."""
    t0, p0 = time.thread_time(), time.process_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t0) / n, (time.process_time() - p0) / n


def bench_model(path, feeds, rounds, batch_ms):
    import cuvil

    model = cuvil.load_onnx(path, threads=1)
    sess = ort_one_thread(path)
    names = {i.name for i in sess.get_inputs()}
    ofeeds = {k: v for k, v in feeds.items() if k in names}
    cu = lambda: model(**feeds)  # noqa: E731
    ot = lambda: sess.run(None, ofeeds)  # noqa: E731
    for _ in range(3):  # warm-up: plans, packed weights, caches
        cu(); ot()
    # Calls per batch: about batch_ms of CPU for the slower engine (at least 1).
    one = max(per_call_cpu(cu, 2)[0], per_call_cpu(ot, 2)[0], 1e-6)
    n = max(1, min(2000, int(batch_ms * 1e-3 / one)))
    res = {"cuvil": [], "ort": [], "cuvil_proc": [], "ort_proc": []}
    for r in range(rounds):
        order = [("cuvil", cu), ("ort", ot)] if r % 2 == 0 else [("ort", ot), ("cuvil", cu)]
        for key, fn in order:
            t, p = per_call_cpu(fn, n)
            res[key].append(t)
            res[key + "_proc"].append(p)
    med = {k: float(np.median(v)) for k, v in res.items()}
    return dict(calls_per_batch=n, cuvil_us=1e6 * med["cuvil"], ort_us=1e6 * med["ort"],
                cuvil_proc_us=1e6 * med["cuvil_proc"], ort_proc_us=1e6 * med["ort_proc"],
                ratio=med["cuvil"] / med["ort"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated corpus entry names")
    ap.add_argument("--rounds", type=int, default=15, help="alternated batches per engine")
    ap.add_argument("--batch-ms", type=float, default=20.0, help="CPU time per batch (sets the calls per batch)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    root = model_corpus.build(None if not only or len(only) > 1 else next(iter(only)))
    manifest = json.loads((root / "manifest.json").read_text())
    print(f"load average {open('/proc/loadavg').read().split()[:3]} (1 thread each, thread CPU time per call)")
    print("| model | Cuvil µs | ORT µs | Cuvil/ORT | calls/batch |")
    print("|---|---|---|---|---|")
    out, slower = {}, []
    for name, item in manifest.items():
        if (only and name not in only) or "error" in item:
            continue
        feeds, _ = model_corpus.load_io(item)
        try:
            r = bench_model(item["model"], feeds, args.rounds, args.batch_ms)
        except Exception as exc:  # noqa: BLE001 - a model Cuvil refuses is reported, not fatal
            print(f"| {name} | error: {type(exc).__name__}: {str(exc)[:200]} | | | |")
            continue
        flag = ""
        for k in ("cuvil", "ort"):  # work on other threads would escape thread_time
            if r[f"{k}_proc_us"] > 1.3 * r[f"{k}_us"] + 5:
                flag += f" ({k} process CPU {r[f'{k}_proc_us']:.0f} µs)"
        print(f"| {name} | {r['cuvil_us']:.1f} | {r['ort_us']:.1f} | {r['ratio']:.2f}{flag} | "
              f"{r['calls_per_batch']} |", flush=True)
        out[name] = r
        if r["ratio"] > 1.0:
            slower.append((r["ratio"], name))
    if out:
        gm = math.exp(sum(math.log(r["ratio"]) for r in out.values()) / len(out))
        print(f"\ngeometric mean Cuvil/ORT over {len(out)} models: {gm:.3f}")
        print("Cuvil slower on: " + (", ".join(f"{n} ({x:.2f})" for x, n in sorted(slower, reverse=True)) or "none"))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
