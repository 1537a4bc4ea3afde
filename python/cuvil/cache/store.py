"""Where the compiled-model cache lives, whom it trusts, and its entries on disk: records, listing, verifying,
pruning (LRU)."""
from __future__ import annotations

import json
import os
import stat
import sys
import time
import warnings
from typing import Iterable, Optional

from .. import _C
from .hashing import _mapped_hash

RECORD_FORMAT = "cuvil-model-cache"
RECORD_VERSION = 1
DEFAULT_MAX_MB = 4096

class CacheWarning(UserWarning):
    """A damaged entry in the compiled-model cache (it is compiled again and replaced), or a cache directory
    that cannot be used."""


# ---- where, how big, logging

def root_dir() -> Optional[str]:
    """The cache's root ($CUVIL_CACHE_DIR, else $XDG_CACHE_HOME/cuvil, else ~/.cache/cuvil), None when off; the
    per-kernel JIT cache uses the same one (src/codegen/llvm/jit.cpp)."""
    d = os.environ.get("CUVIL_CACHE_DIR")
    if d is not None:
        return None if d == "off" or not d else d
    x = os.environ.get("XDG_CACHE_HOME")
    if x:
        return os.path.join(x, "cuvil")
    h = os.environ.get("HOME")
    return os.path.join(h, ".cache", "cuvil") if h else None


def models_dir() -> Optional[str]:
    r = root_dir()
    return None if r is None else os.path.join(r, "models")


def max_bytes() -> int:
    """CUVIL_MODEL_CACHE_MAX_MB (default 4096; fractions allowed) in bytes; a malformed value is an error."""
    v = os.environ.get("CUVIL_MODEL_CACHE_MAX_MB", "")
    if not v:
        return DEFAULT_MAX_MB << 20
    try:
        mb = float(v)
    except ValueError:
        mb = -1.0
    if not (0 <= mb <= 1e12):
        raise ValueError(f"CUVIL_MODEL_CACHE_MAX_MB={v!r} is not a size in megabytes (a non-negative number such "
                         f"as 4096 or 0.5)")
    return int(mb * 1024 * 1024)


_refused: set = set()  # directories warned about once


def _trusted(path: str, directory: bool) -> bool:
    """Whether an existing path deserves trust (docs/SECURITY.md): not a symbolic link, owned by this user, not
    writable by group or others; a directory or a regular file as expected."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    return kind_ok and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _usable_dir(directory: str) -> bool:
    """The models directory and its parent must be this user's alone (an artifact holds machine code): else one
    warning and no model cache for the process."""
    for d in (os.path.dirname(directory), directory):
        if not _trusted(d, True):
            if d not in _refused:
                _refused.add(d)
                warnings.warn(f"cuvil: the compiled-model cache is off: {d} is not a directory owned by this user "
                              f"and writable by no one else", CacheWarning, stacklevel=4)
            return False
    return True


def enabled(cache: Optional[bool]) -> bool:
    """cache=True/False decides; None: on unless CUVIL_MODEL_CACHE=off. Never without a directory
    (CUVIL_CACHE_DIR=off)."""
    if cache is not None and not isinstance(cache, bool):
        raise TypeError(f"cache must be True, False or None (None: on unless CUVIL_MODEL_CACHE=off), got {cache!r}")
    if cache is None:
        cache = os.environ.get("CUVIL_MODEL_CACHE", "on") not in ("off", "0", "false", "no")
    if cache and models_dir() is not None:
        max_bytes()  # a malformed bound is an error before compiling, not after
        return _usable_dir(models_dir())
    return False


def _logging() -> bool:
    return any(w.strip() in ("cache", "all") for w in os.environ.get("CUVIL_LOG", "").split(","))


def log(message: str) -> None:
    """A line on stderr when CUVIL_LOG names `cache` (or `all`)."""
    if _logging():
        print(f"cuvil cache: {message}", file=sys.stderr, flush=True)


# ---- entries

def _records(directory: str) -> Iterable[tuple[str, Optional[dict]]]:
    """(record path, record or None when unreadable) for every record in the directory."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for n in sorted(names):
        if n.endswith(".json") and not n.startswith("."):
            p = os.path.join(directory, n)
            yield p, _read_record(p)


def _read_record(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not (isinstance(r, dict) and r.get("format") == RECORD_FORMAT and r.get("format_version") == RECORD_VERSION
            and isinstance(r.get("key"), str) and isinstance(r.get("parts"), dict)
            and isinstance(r.get("artifact"), str) and os.sep not in r["artifact"]
            and isinstance(r.get("artifact_size"), int)):
        return None
    return r


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ---- maintenance: list, verify, prune

def entries(directory: Optional[str] = None) -> list[dict]:
    """Every entry: its record (None when unreadable) with 'path', 'bytes' (record and artifact) and 'used'."""
    directory = directory or models_dir()
    out = []
    for p, r in _records(directory) if directory else ():
        try:
            st = os.stat(p)
        except OSError:
            continue
        size = st.st_size
        if r is not None:
            try:
                size += os.path.getsize(os.path.join(directory, r["artifact"]))
            except OSError:
                pass
        out.append({"path": p, "record": r, "bytes": size, "used": st.st_mtime})
    return out


def verify_entry(directory: str, r: Optional[dict], deep: bool = False) -> Optional[str]:
    """None when the entry is sound, else what is wrong: its record, the artifact's presence, size and hash,
    and (deep) that the artifact loads (every section's checksum, the manifest, the graph)."""
    if r is None:
        return "the record is unreadable"
    art = os.path.join(directory, r["artifact"])
    if not os.path.exists(art):
        return f"the artifact {r['artifact']} is missing"
    size = os.path.getsize(art)
    if size != r["artifact_size"]:
        return f"the artifact is {size} bytes, the record says {r['artifact_size']}"
    if _mapped_hash(art) != r.get("artifact_hash"):
        return "the artifact's hash differs from the record's (corrupt)"
    if deep:
        try:
            _C.load_artifact(art)
        except _C.Error as e:
            return f"the artifact does not load: {e}"
    return None


def prune(directory: Optional[str] = None, max_size: Optional[int] = None, max_age_s: Optional[float] = None,
          now: Optional[float] = None) -> list[str]:
    """Removes the entries unused for longer than max_age_s, then the least recently used until the directory
    holds at most max_size bytes, then artifacts no record names (an interrupted or overtaken write, older than
    a minute). Returns the removed records' paths."""
    directory = directory or models_dir()
    if not directory or not os.path.isdir(directory):
        return []
    now = time.time() if now is None else now
    es = sorted(entries(directory), key=lambda e: e["used"])
    total = sum(e["bytes"] for e in es)
    removed = []
    for e in es:
        too_old = max_age_s is not None and now - e["used"] > max_age_s
        too_big = max_size is not None and total > max_size
        if not (too_old or too_big):
            continue
        _remove(e["path"])
        if e["record"] is not None:
            _remove(os.path.join(directory, e["record"]["artifact"]))
        total -= e["bytes"]
        removed.append(e["path"])
    named = {e["record"]["artifact"] for e in entries(directory) if e["record"] is not None}
    for n in os.listdir(directory):
        p = os.path.join(directory, n)
        if (n.endswith(".cuv") or ".cuv.tmp" in n or n.endswith(".json.tmp")) and n not in named:
            try:
                if now - os.stat(p).st_mtime > 60:
                    _remove(p)
            except OSError:
                pass
    return removed
