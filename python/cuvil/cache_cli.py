"""`cuvil cache ls|verify|prune|explain`: the compiled-model cache's command (cuvil.cache).

    cuvil cache ls [--json]                    entries, most recently used first
    cuvil cache verify [--deep] [--remove]     checks every entry (record, artifact size and hash; --deep loads it)
    cuvil cache prune [--max-mb N] [--max-age DAYS] [--all]
                                               least recently used out (default: down to CUVIL_MODEL_CACHE_MAX_MB)
    cuvil cache explain MODEL.onnx [--precision fp32|bf16]
                                               hit, or the nearest entry and the parts that differ
    cuvil cache dir                            the directory

The directory is $CUVIL_CACHE_DIR/models (see cuvil.cache). PyTorch models: cuvil.cache.explain_torch(model, args).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

from . import cache


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _when(t: float) -> str:
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _directory() -> str:
    d = cache.models_dir()
    if d is None:
        sys.exit("cuvil cache: the cache is off (CUVIL_CACHE_DIR=off)")
    return d


def cmd_ls(a) -> int:
    d = _directory()
    es = sorted(cache.entries(d), key=lambda e: -e["used"])
    if a.json:
        print(json.dumps([{"key": (e["record"] or {}).get("key"), "path": e["path"], "bytes": e["bytes"],
                           "used": e["used"], "kind": (e["record"] or {}).get("kind"),
                           "model": (e["record"] or {}).get("model"),
                           "compile_s": (e["record"] or {}).get("compile_s")} for e in es], indent=1))
        return 0
    print(f"{d}: {len(es)} entries, {_size(sum(e['bytes'] for e in es))} (limit {_size(cache.max_bytes())})")
    for e in es:
        r = e["record"]
        if r is None:
            print(f"  {os.path.basename(e['path'])[:16]:16}  {_size(e['bytes']):>9}  {_when(e['used'])}  "
                  f"(unreadable record)")
            continue
        print(f"  {r['key'][:16]:16}  {_size(e['bytes']):>9}  {_when(e['used'])}  {r.get('kind', '?'):5}  "
              f"{r.get('model', '?')}  (compiled in {r.get('compile_s', 0):.2f} s)")
    return 0


def cmd_verify(a) -> int:
    d = _directory()
    bad = 0
    es = cache.entries(d)
    for e in es:
        r = e["record"]
        name = r["key"][:16] if r else os.path.basename(e["path"])
        why = cache.verify_entry(d, r, deep=a.deep)
        if why is None:
            print(f"ok       {name}  {r.get('model', '?')}")
            continue
        bad += 1
        print(f"DAMAGED  {name}  {why}" + ("  (removed)" if a.remove else ""))
        if a.remove:
            cache._remove(e["path"])
            if r is not None:
                cache._remove(os.path.join(d, r["artifact"]))
    print(f"{len(es)} entries, {bad} damaged")
    return 1 if bad and not a.remove else 0


def cmd_prune(a) -> int:
    d = _directory()
    max_size = 0 if a.all else (int(a.max_mb * 1024 * 1024) if a.max_mb is not None else cache.max_bytes())
    max_age = None if a.max_age is None else a.max_age * 86400
    removed = cache.prune(d, max_size, max_age)
    left = cache.entries(d)
    print(f"removed {len(removed)} entries; {len(left)} left, {_size(sum(e['bytes'] for e in left))}")
    return 0


def cmd_explain(a) -> int:
    d = _directory()
    if not os.path.exists(a.model):
        sys.exit(f"cuvil cache: no such file: {a.model}")
    config = {"precision": a.precision, "device": "cpu", "opt_level": 1}
    try:
        parts, details = cache.onnx_parts(a.model, config)
    except cache.NotCacheable:  # keyed after import, as load_onnx does
        from . import _C
        parts, details = cache.graph_parts(_C.load_onnx(a.model), config)
    print(cache.explain_key(parts, details, d))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cuvil cache", description="The compiled-model cache (cuvil.cache).")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("ls", help="list the entries")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("verify", help="check every entry")
    s.add_argument("--deep", action="store_true", help="also load each artifact (every section's checksum)")
    s.add_argument("--remove", action="store_true", help="remove damaged entries")
    s = sub.add_parser("prune", help="remove entries, least recently used first")
    s.add_argument("--max-mb", type=float, help="keep at most this many megabytes")
    s.add_argument("--max-age", type=float, help="remove entries unused for more than this many days")
    s.add_argument("--all", action="store_true", help="remove every entry")
    s = sub.add_parser("explain", help="would this ONNX model hit? if not, which parts differ")
    s.add_argument("model")
    s.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    sub.add_parser("dir", help="print the directory")
    a = p.parse_args(argv)
    if a.command == "dir":
        print(_directory())
        return 0
    return {"ls": cmd_ls, "verify": cmd_verify, "prune": cmd_prune, "explain": cmd_explain}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
