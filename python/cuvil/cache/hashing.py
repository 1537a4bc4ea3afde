"""The hashes the cache's keys and records are made of."""
from __future__ import annotations

import hashlib
import mmap
import os
import time
from typing import Any

import numpy as np

from .. import _C

# ---- hashing

def _h(*items: Any) -> str:
    h = hashlib.sha256()
    for it in items:
        h.update(it if isinstance(it, bytes) else str(it).encode("utf-8", "backslashreplace"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def _bytes_hash(a: np.ndarray) -> str:
    return f"{_C.bytes_hash(a):016x}"


_file_hashes: dict = {}  # path -> ((size, mtime_ns, inode), hash)


def _file_hash(path: str) -> str:
    """The file's SHA-256 (memoized by size, mtime and inode, but only once the mtime is 2 s old: a file
    rewritten within a coarse mtime's tick is hashed again)."""
    st = os.stat(path)
    sig = (st.st_size, st.st_mtime_ns, st.st_ino)
    got = _file_hashes.get(path)
    if got is not None and got[0] == sig:
        return got[1]
    with open(path, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:32]
    if time.time_ns() - st.st_mtime_ns > 2_000_000_000:
        _file_hashes[path] = (sig, h)
    return h


def _mapped_hash(path: str) -> str:
    """A fast hash of a whole file (weights-sized files: GB/s)."""
    size = os.path.getsize(path)
    if size == 0:
        return "0" * 16
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return f"{_C.bytes_hash(np.frombuffer(m, dtype=np.uint8)):016x}-{size}"
