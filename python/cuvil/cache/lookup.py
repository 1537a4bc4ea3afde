"""The front ends' way in: a Lookup per model (hit loads the entry, store writes it), and explanations."""
from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from typing import Iterable, Optional

from .. import _C
from .hashing import _mapped_hash
from .keys import PART_MEANING, NotCacheable, explain_parts, graph_parts, key_of, onnx_parts, torch_parts
from .store import (RECORD_FORMAT, RECORD_VERSION, CacheWarning, _read_record, _remove, _trusted, _usable_dir, enabled, log, max_bytes,
                    models_dir, prune)

class Lookup:
    """One model's place in the cache: its parts and key; hit() loads the entry, store() writes it."""

    def __init__(self, parts: dict, details: dict, description: str, kind: str,
                 example_values: Optional[str] = None, directory: Optional[str] = None):
        self.parts, self.details = parts, details
        self.description, self.kind = description, kind
        self.example_values = example_values
        self.key = key_of(parts)
        self.directory = directory or models_dir()
        self.record_path = os.path.join(self.directory, self.key + ".json")
        self.replace_reason: Optional[str] = None
        self.t0 = time.perf_counter()

    def hit(self, *, threads: Optional[int] = None, timeout: Optional[float] = None,
            max_loop_iterations: Optional[int] = None):
        """The cached compiled module, or None (a miss: logged with its reason; a damaged entry warns)."""
        from ..artifact import ArtifactError, load
        if not os.path.exists(self.record_path):
            _, _, why = explain_parts(self.parts, self.details, self.directory)
            log(f"miss {self.description} [{self.key[:16]}]: {why}")
            return None
        for attempt in range(3):
            r = _read_record(self.record_path)
            if r is None or r.get("key") != self.key:
                return self._damaged("its record is unreadable or not a cache record")
            art = os.path.join(self.directory, r["artifact"])
            if os.path.lexists(art):
                break
            # Another process may have just replaced the entry (and pruned the artifact this record named).
            if attempt == 2 or _read_record(self.record_path) == r:
                return self._damaged(f"its artifact {r['artifact']} is missing")
        if r.get("trace") and r.get("example_values") != self.example_values:
            self.replace_reason = "traced with other example values"
            log(f"miss {self.description} [{self.key[:16]}]: example_values ({PART_MEANING['example_values']}) "
                f"differ from the entry's")
            return None
        if not (_trusted(self.record_path, False) and _trusted(art, False)):
            return self._damaged("its record or artifact is not a regular file of this user's, writable by no one else")
        try:
            size = os.path.getsize(art)
        except OSError:
            return self._damaged(f"its artifact {r['artifact']} is missing")
        if size != r["artifact_size"]:
            return self._damaged(f"its artifact is {size} bytes, the record says {r['artifact_size']} (truncated?)")
        try:
            compiled = load(art, threads=threads, timeout=timeout, max_loop_iterations=max_loop_iterations,
                            _prepare=False)
        except (ArtifactError, OSError) as e:
            return self._damaged(f"its artifact does not load: {e}")
        try:
            os.utime(self.record_path)  # last use, for LRU
        except OSError:
            pass
        for category, message in r.get("warnings", []):
            cls = _warning_class(category)
            warnings.warn(f"{message} (replayed from the compiled-model cache)", cls, stacklevel=3)
        log(f"hit {self.description} [{self.key[:16]}] in {1e3 * (time.perf_counter() - self.t0):.1f} ms")
        compiled._cache_key = self.key
        return compiled

    def _damaged(self, why: str):
        self.replace_reason = why
        warnings.warn(f"cuvil: damaged entry {self.key[:16]} in the compiled-model cache ({self.directory}): {why}; "
                      f"compiling again and replacing it", CacheWarning, stacklevel=4)
        log(f"miss {self.description} [{self.key[:16]}]: damaged entry ({why})")
        return None

    def store(self, compiled, recorded_warnings: Iterable = (), trace: bool = False) -> Optional[str]:
        """Writes the entry (artifact, then record, each atomically); returns the record's path, or None when
        this module cannot be stored (logged)."""
        compile_s = time.perf_counter() - self.t0
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            gparts, gdetails = graph_parts(compiled._model, self.details.get("config", {}))
            art_name = f"{self.key}.{os.getpid()}.{os.urandom(4).hex()}.cuv"
            art = os.path.join(self.directory, art_name)
            if not _usable_dir(self.directory):
                return None
            if compiled._model.precision != "fp32":  # int8 grids come from calibration data the key lacks
                log(f"not stored {self.description}: precision {compiled._model.precision} is not cached")
                return None
            try:
                compiled.save(art)
                os.chmod(art, 0o600)
            except ValueError as e:  # what an artifact cannot hold yet (e.g. bf16 decisions)
                log(f"not stored {self.description}: {e}")
                return None
            except _C.Error as e:  # never fails the compile itself
                _remove(art)
                warnings.warn(f"cuvil: the compiled model could not be stored in the cache ({e})", CacheWarning,
                              stacklevel=3)
                return None
            record = {
                "format": RECORD_FORMAT, "format_version": RECORD_VERSION, "key": self.key, "kind": self.kind,
                "model": self.description, "parts": self.parts, "details": self.details,
                "graph_parts": gparts, "graph_details": gdetails,
                "artifact": art_name, "artifact_size": os.path.getsize(art), "artifact_hash": _mapped_hash(art),
                "created": time.time(), "compile_s": round(compile_s, 4),
                "warnings": [[w.category.__name__, str(w.message)] for w in recorded_warnings],
                "trace": bool(trace), "example_values": self.example_values,
            }
            old = _read_record(self.record_path)
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".json.tmp", dir=self.directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, indent=1, sort_keys=True)
            os.replace(tmp, self.record_path)
            # A damaged entry's artifact goes now; one overtaken by a concurrent writer stays for readers that
            # hold its record, until prune() finds it unnamed and a minute old.
            if old is not None and old.get("artifact") != art_name and self.replace_reason:
                _remove(os.path.join(self.directory, old["artifact"]))
        except OSError as e:
            warnings.warn(f"cuvil: cannot write to the compiled-model cache {self.directory}: {e}", CacheWarning,
                          stacklevel=3)
            return None
        what = f"replaced ({self.replace_reason})" if self.replace_reason else "stored"
        log(f"{what} {self.description} [{self.key[:16]}] after {compile_s:.3f} s of compiling "
            f"({record['artifact_size']} bytes)")
        prune(self.directory, max_bytes())
        return self.record_path


def _warning_class(name: str) -> type:
    from .. import errors
    cls = getattr(errors, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning



# ---- the front ends' entry points

def torch_lookup(model, args: tuple, kwargs: dict, dynamic_shapes: Optional[dict], *, capture: str, precision: str,
                 device: str, cache: Optional[bool]) -> Optional[Lookup]:
    """The Lookup for cuvil.compile of an nn.Module, or None (cache off, or the model has no key: logged)."""
    if not enabled(cache):
        return None
    config = {"precision": precision, "device": device, "capture": capture, "opt_level": 1}
    name = f"{type(model).__module__}.{type(model).__qualname__}"
    t0 = time.perf_counter()
    try:
        parts, details, values = torch_parts(model, args, kwargs, dynamic_shapes, config)
    except NotCacheable as e:
        log(f"not cached {name}: {e}")
        return None
    lk = Lookup(parts, details, name, "torch", example_values=values)
    lk.t0 = t0
    return lk


def onnx_lookup(path: str, *, precision: str, cache: Optional[bool]) -> Optional[Lookup]:
    if not enabled(cache):
        return None
    t0 = time.perf_counter()
    config = {"precision": precision, "device": "cpu", "opt_level": 1}
    try:
        parts, details = onnx_parts(path, config)
    except NotCacheable as e:
        log(f"{os.path.basename(path)}: {e}: keyed after import")
        return _Deferred(config, os.path.abspath(path))
    lk = Lookup(parts, details, os.path.abspath(path), "onnx")
    lk.t0 = t0
    return lk


class _Deferred:
    """An ONNX model keyed after import (graph_parts) instead of by its file."""

    def __init__(self, config: dict, description: str):
        self.config, self.description = config, description

    def after_import(self, model: "_C.Model") -> Lookup:
        parts, details = graph_parts(model, self.config)
        return Lookup(parts, details, self.description, "onnx")


def explain_torch(model, args=(), kwargs=None, *, dynamic_shapes=None, capture: str = "auto",
                  precision: str = "fp32", device: str = "cpu") -> str:
    """Whether ``cuvil.compile(model, args, kwargs, ...)`` would hit the cache, and if not, the nearest entry and
    the parts that differ (the text ``CUVIL_LOG=cache`` logs)."""
    from ..frontend.capture import _as_args, _input_names, normalize_dynamic_shapes
    args = _as_args(args)
    kwargs = dict(kwargs or {})
    names = _input_names(model, len(args), kwargs)
    ds = normalize_dynamic_shapes(dynamic_shapes, names, list(args) + list(kwargs.values()))
    config = {"precision": precision, "device": device, "capture": capture, "opt_level": 1}
    try:
        parts, details, _ = torch_parts(model, args, kwargs, ds, config)
    except NotCacheable as e:
        return f"not cached: {e}"
    return explain_key(parts, details)


def explain_key(parts: dict, details: dict, directory: Optional[str] = None) -> str:
    directory = directory or models_dir()
    key = key_of(parts)
    if directory and os.path.exists(os.path.join(directory, key + ".json")):
        r = _read_record(os.path.join(directory, key + ".json"))
        if r is not None:
            return f"hit: entry {key[:16]} ({r.get('model', '?')})"
        return f"damaged entry {key[:16]}: it would be compiled again and replaced"
    return "miss: " + explain_parts(parts, details, directory)[2]
