"""The compiled-model cache: cuvil.compile and cuvil.load_onnx look here before compiling.

An entry is a ``.cuv`` artifact (cuvil.artifact) and a JSON record of its key's named parts, in
``$CUVIL_CACHE_DIR/models`` (default ``$XDG_CACHE_HOME/cuvil/models``, else ``~/.cache/cuvil/models``, beside the
per-kernel JIT cache's ``*.cuvk`` files; ``CUVIL_CACHE_DIR=off`` disables both, ``CUVIL_MODEL_CACHE=off`` or
``cache=False`` this one alone). The key is a hash over the parts;
each part is a hash of one thing the compiled code depends on, so a miss names what differs from the nearest
entry (``CUVIL_LOG=cache`` logs every hit and miss with its reason; ``cuvil cache explain MODEL``):

- PyTorch models (nn.Module) are keyed *before* capture, since capture (TorchScript, torch.export) is most of a
  compile: ``source`` (the files defining the model's classes and the byte code of their methods and of the
  user functions they reach), ``module_state`` (each submodule's path, class, training flag and plain
  attributes), ``weights`` (parameters, buffers and tensor attributes: names, dtypes, shapes, contents),
  ``inputs`` (the examples' names, dtypes and shapes, dynamic dims and their ranges), ``config``, ``version``
  (Cuvil's version, git revision, the front end's Python sources and the native libraries' identity), ``deps``
  (torch, NumPy, LLVM, oneDNN, Python) and ``cpu`` (the host CPU and features the code is generated for). A model
  captured by torch.jit.trace (its control flow frozen to the example's path) also records the examples' values,
  and a hit needs the same ones. Functions, ScriptModules and modules with hooks are not cached (logged).
- ONNX files are keyed by ``model_file`` (the file's contents) with ``config``, ``version``, ``deps`` and ``cpu``;
  a file with external data is keyed after import by ``graph`` (the optimized graph without source locations)
  and ``graph_weights`` (its constants) instead. Every entry records these two, which tell a weights-only change
  apart from a graph change.

A hit loads the artifact (mapped, its kernels as machine code) and defers preparation (oneDNN primitives, packed
weights) to the first call. A miss compiles; a weights-only change still reuses the generated kernels' machine
code from the per-kernel JIT cache (no LLVM code generation again). Writes are atomic (artifact under a fresh
name, then the record renamed into place: a record always names a complete artifact), concurrent processes
are safe (the last writer's entry wins, whole), a damaged entry (unreadable record, missing, truncated or
corrupt artifact) is a miss with a :class:`CacheWarning` and is replaced, and the directory is kept under
``CUVIL_MODEL_CACHE_MAX_MB`` (default 4096) by removing the entries used least recently.
"""
from __future__ import annotations

import hashlib
import json
import marshal
import mmap
import os
import re
import stat
import sys
import sysconfig
import tempfile
import time
import types
import warnings
from typing import Any, Iterable, Optional

import numpy as np

from . import _C

RECORD_FORMAT = "cuvil-model-cache"
RECORD_VERSION = 1
DEFAULT_MAX_MB = 4096
# The order in which parts are listed (and compared) everywhere.
PART_ORDER = ("front_end", "model_file", "source", "module_state", "graph", "graph_weights", "weights", "inputs",
              "config", "version", "deps", "cpu")
# What each part means, for explanations.
PART_MEANING = {
    "front_end": "the front end (PyTorch before capture, ONNX file, graph after import)",
    "model_file": "the ONNX file's contents",
    "source": "the model's code (files defining its classes, byte code of their methods and helpers)",
    "module_state": "the modules' structure, training flags and plain attributes",
    "graph": "the compiled graph (without source locations)",
    "graph_weights": "the compiled graph's constants",
    "weights": "the weights (parameters, buffers, tensor attributes)",
    "inputs": "the input signature (names, dtypes, shapes, dynamic dims and ranges)",
    "config": "the compile configuration",
    "version": "Cuvil's version (release, git revision, front end sources, native libraries)",
    "deps": "dependency versions (torch, NumPy, LLVM, oneDNN, Python)",
    "cpu": "the CPU the code is generated for",
    "example_values": "the example inputs' values (the model was captured by torch.jit.trace)",
}


class CacheWarning(UserWarning):
    """A damaged entry in the compiled-model cache (it is compiled again and replaced), or a cache directory
    that cannot be used."""


class NotCacheable(Exception):
    """Why a model has no key before capture."""


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


# ---- the parts every key has

_build: Optional[dict] = None


def _package_sources() -> list[str]:
    """The cuvil package's own Python files (the front ends turn models into graphs), as path, size and mtime:
    any edit changes them (as the JIT cache keys on its library's)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    items = []
    for dirpath, dirnames, files in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(dirpath, f)
                st = os.stat(p)
                items.append(f"{p[len(pkg) + 1:]} {st.st_size} {st.st_mtime_ns}")
    return items


def _build_parts() -> dict:
    """{part: (hash, detail)} for version, deps and cpu: what this process's Cuvil is and runs on."""
    global _build
    if _build is None:
        info = _C.build_info()
        libs = [ln for ln in info["libraries"].splitlines() if ln]  # _C, libcuvil, libcuvil_runtime
        sources = _h(*_package_sources())
        version = f"cuvil {info['version']} (git {info['git_revision']})"
        deps = {"llvm": info["llvm_version"], "onednn": info["onednn_version"], "numpy": np.__version__,
                "python": ".".join(map(str, sys.version_info[:3]))}
        _build = {
            "version": (_h(version, sources, *libs), {"release": version, "front_end_sources": sources,
                                                      "native_libraries": libs}),
            "deps": (_h(json.dumps(deps, sort_keys=True)), deps),
            "cpu": (_h(info["host"]), info["host"]),
        }
    return dict(_build)


def _with_build(parts: dict, details: dict, config: dict, torch_version: Optional[str] = None) -> None:
    for name, (h, d) in _build_parts().items():
        if name == "deps" and torch_version is not None and isinstance(d, dict):
            d = dict(d, torch=torch_version)
            h = _h(json.dumps(d, sort_keys=True))
        parts[name], details[name] = h, d
    parts["config"], details["config"] = _h(json.dumps(config, sort_keys=True)), config


# ---- PyTorch models, before capture

_TORCH_DIR = None
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])
_LIBRARY_DIRS = tuple({os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")})
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _torch_dir() -> str:
    global _TORCH_DIR
    if _TORCH_DIR is None:
        import torch
        _TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__))
    return _TORCH_DIR


def _is_torch_module(name: str) -> bool:
    """Code whose version is a part already: torch, cuvil itself, and built-in modules."""
    return (name in ("torch", "cuvil", "builtins") or name.startswith(("torch.", "cuvil.")) or
            name in sys.builtin_module_names)


def _module_file(modname: str) -> Optional[str]:
    mod = sys.modules.get(modname)
    f = getattr(mod, "__file__", None)
    return os.path.realpath(f) if f else None


def _is_user_file(path: str) -> bool:
    """Code Cuvil fingerprints transitively: not the standard library, not an installed package (whose class
    files are hashed where the model uses them), not torch (its version is a part)."""
    return not (path.startswith(_STDLIB + os.sep) or path.startswith(_LIBRARY_DIRS) or
                path.startswith(_torch_dir() + os.sep))


def _code_bytes(fn: Any) -> Optional[bytes]:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        return marshal.dumps(code)
    except ValueError:
        return None


class _SourceWalk:
    """The model's code: the files defining its classes, the byte code of their methods (so a method replaced
    at run time counts), and, transitively through module globals, of the user functions and classes they
    reach (installed packages and torch are covered by their files and versions)."""

    MAX_MODULES = 200

    def __init__(self):
        self.files: dict[str, str] = {}  # path -> hash
        self.code = hashlib.sha256()
        self.seen_classes: set = set()
        self.seen_modules: set = set()
        self.queue: list = []
        self.packages: dict[str, str] = {}  # installed packages defining the model's classes -> version

    def add_class(self, cls: type) -> None:
        for c in cls.__mro__:
            if c in self.seen_classes or c is object or _is_torch_module(c.__module__):
                continue
            self.seen_classes.add(c)
            path = _module_file(c.__module__)
            if path is None:
                raise NotCacheable(f"class {c.__module__}.{c.__qualname__} has no source file")
            self.files.setdefault(path, _file_hash(path))
            self.code.update(f"class {c.__module__}.{c.__qualname__}\n".encode())
            for name, v in sorted(vars(c).items(), key=lambda kv: kv[0]):
                for fn in (v, getattr(v, "__func__", None), getattr(v, "fget", None)):
                    b = _code_bytes(fn) if fn is not None else None
                    if b is not None:
                        self.code.update(name.encode() + b"\0" + b)
            if not _is_user_file(path):  # an installed package: its version covers the helpers it calls
                top = c.__module__.split(".")[0]
                self.packages[top] = str(getattr(sys.modules.get(top), "__version__", "unknown"))
            elif c.__module__ not in self.seen_modules:
                self.seen_modules.add(c.__module__)
                self.queue.append(c.__module__)

    def add_function(self, fn: Any) -> None:
        b = _code_bytes(fn)
        if b is not None:
            self.code.update(f"def {getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}\n".encode())
            self.code.update(b)

    def walk(self) -> None:
        while self.queue:
            if len(self.seen_modules) > self.MAX_MODULES:
                raise NotCacheable(f"the model's code reaches more than {self.MAX_MODULES} modules")
            mod = sys.modules.get(self.queue.pop())
            for name, v in sorted(vars(mod).items(), key=lambda kv: kv[0]) if mod else ():
                modname = getattr(v, "__module__", None) if not isinstance(v, types.ModuleType) else v.__name__
                if not isinstance(modname, str) or _is_torch_module(modname):
                    continue
                path = _module_file(modname)
                if path is None or not _is_user_file(path):
                    continue
                if isinstance(v, type):
                    self.add_class(v)
                elif isinstance(v, types.FunctionType):
                    self.add_function(v)
                    self.files.setdefault(path, _file_hash(path))
                if modname not in self.seen_modules:
                    self.seen_modules.add(modname)
                    self.queue.append(modname)

    def result(self) -> tuple[str, dict]:
        files = dict(sorted(self.files.items()))
        packages = dict(sorted(self.packages.items()))
        return (_h(json.dumps(files), json.dumps(packages), self.code.hexdigest()),
                {"files": files, "packages": packages, "code": self.code.hexdigest()[:32]})


def _stable_repr(v: Any, depth: int = 0) -> str:
    """A repr of a plain attribute that is the same in every process (no addresses)."""
    if depth > 4:
        return "..."
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return repr(v)
    if isinstance(v, (tuple, list, set, frozenset)):
        items = [_stable_repr(x, depth + 1) for x in v]
        if isinstance(v, (set, frozenset)):
            items.sort()
        return f"{type(v).__name__}({', '.join(items)})"
    if isinstance(v, dict):
        return "{" + ", ".join(sorted(f"{_stable_repr(k, depth + 1)}: {_stable_repr(x, depth + 1)}"
                                      for k, x in v.items())) + "}"
    if isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType)):
        return f"<{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', repr(v))}>"
    if isinstance(v, np.ndarray):  # (their reprs elide the middle of large arrays)
        return f"ndarray {v.dtype}{list(v.shape)}:{_bytes_hash(np.ascontiguousarray(v).reshape(-1).view(np.uint8))}"
    if type(v).__module__.startswith("torch") and hasattr(v, "dtype") and hasattr(v, "shape"):
        return f"tensor {v.dtype}{list(v.shape)}:{_bytes_hash(_tensor_bytes(v))}"
    try:
        text = repr(v)
    except Exception as e:  # noqa: BLE001 - whatever a user's __repr__ raises
        raise NotCacheable(f"an attribute of type {type(v).__qualname__} has no repr ({type(e).__name__})") from None
    return f"{type(v).__module__}.{type(v).__qualname__}:{_ADDRESS.sub('', text)}"


def _tensor_bytes(t) -> np.ndarray:
    import torch
    if t.layout != torch.strided or t.is_quantized or t.device.type != "cpu" or t.is_meta:
        raise NotCacheable(f"a {t.layout} / {t.device} tensor cannot be fingerprinted")
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)


_SKIPPED_ATTRS = frozenset({"training", "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
                            "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook", "_forward_hooks",
                            "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
                            "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
                            "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"})


def torch_parts(model, args: tuple, kwargs: dict, dynamic_shapes: Optional[dict],
                config: dict) -> tuple[dict, dict, str]:
    """(parts, details, example values' hash) of an nn.Module before capture; NotCacheable says why there are
    none."""
    import torch
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise NotCacheable("a ScriptModule (its code is not fingerprinted before capture)")
    if not isinstance(model, torch.nn.Module):
        raise NotCacheable("a function, not an nn.Module (its globals and closure are not fingerprinted)")
    from torch.nn.modules import module as nn_module
    if any(getattr(nn_module, g, None) for g in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                                  "_global_forward_hooks_with_kwargs")):
        raise NotCacheable("global forward hooks are registered")
    walk = _SourceWalk()
    state = {}
    weights = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if m._forward_hooks or m._forward_pre_hooks:
            raise NotCacheable(f"module '{name}' has forward hooks")
        walk.add_class(type(m))
        attrs = []
        for k, v in sorted(vars(m).items(), key=lambda kv: kv[0]):
            # (dunder attributes are torch's own bookkeeping: torch.jit.script adds __overloads__)
            if k in _SKIPPED_ATTRS or (k.startswith("__") and k.endswith("__")) or isinstance(v, torch.nn.Module):
                continue
            if isinstance(v, torch.Tensor):
                weights[f"{name}.{k}" if name else k] = v
            elif isinstance(v, (types.FunctionType, types.MethodType)) and not isinstance(v, type):
                walk.add_function(getattr(v, "__func__", v))
                attrs.append(f"{k}={_stable_repr(v)}")
            else:
                attrs.append(f"{k}={_stable_repr(v)}")
        cls = f"{type(m).__module__}.{type(m).__qualname__}"
        state[name or "(root)"] = _h(f"{cls} training={m.training} {' '.join(attrs)}")[:16]
    walk.walk()
    for name, t in model.named_parameters(remove_duplicate=False):
        weights[name] = t
    for name, t in model.named_buffers(remove_duplicate=False):
        weights[name] = t
    wdetail = {}
    for name in sorted(weights):
        t = weights[name]
        wdetail[name] = f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}:{_bytes_hash(_tensor_bytes(t))}"
    parts, details = {"front_end": _h("torch-before-capture/1")}, {"front_end": "torch (before capture)"}
    parts["source"], details["source"] = walk.result()
    parts["module_state"], details["module_state"] = _h(json.dumps(state)), state
    parts["weights"], details["weights"] = _h(json.dumps(wdetail, sort_keys=True)), wdetail
    sig = _torch_signature(args, kwargs, dynamic_shapes)
    parts["inputs"], details["inputs"] = _h(sig), sig
    _with_build(parts, details, dict(config, default_dtype=str(torch.get_default_dtype())), torch.__version__)
    values = _h(*[_bytes_hash(_tensor_bytes(x)) for x in list(args) + list(kwargs.values())])
    return parts, details, values


def _torch_signature(args: tuple, kwargs: dict, dynamic_shapes: Optional[dict]) -> str:
    def dim(s) -> str:
        if isinstance(s, str):
            return s
        name = getattr(s, "__name__", type(s).__name__)
        lo, hi = getattr(s, "min", None), getattr(s, "max", None)
        return f"{name}[{lo}..{hi}]" if lo is not None or hi is not None else str(name)

    items = [f"arg{i}: {str(x.dtype).replace('torch.', '')}{list(x.shape)}" for i, x in enumerate(args)]
    items += [f"{k}=: {str(x.dtype).replace('torch.', '')}{list(x.shape)}" for k, x in kwargs.items()]
    dyn = {k: {a: dim(s) for a, s in sorted(axes.items())} for k, axes in sorted((dynamic_shapes or {}).items())}
    return f"({', '.join(items)}) dynamic={json.dumps(dyn, sort_keys=True)}"


# ---- ONNX files

def _has_external_data(path: str) -> bool:
    """Whether an ONNX file may name external data files (their contents are not in its hash): then the key is
    taken after import. A false alarm only costs that."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"location") >= 0


def onnx_parts(path: str, config: dict) -> tuple[dict, dict]:
    if _has_external_data(path):
        raise NotCacheable("the ONNX file may have external data")
    parts = {"front_end": _h("onnx-file/1"), "model_file": _mapped_hash(path)}
    details = {"front_end": "ONNX file", "model_file": f"{os.path.abspath(path)} ({os.path.getsize(path)} bytes)"}
    _with_build(parts, details, config)
    return parts, details


def graph_parts(model: "_C.Model", config: dict) -> tuple[dict, dict]:
    """The key taken after import: the compiled graph (without locations) and its constants."""
    g, w = model.cache_key()
    parts = {"front_end": _h("graph/1"), "graph": g, "graph_weights": w}
    sig = f"({', '.join(f'{n}: {t}' for n, t in zip(model.input_names, model.input_types))})"
    parts["inputs"] = _h(sig)
    details = {"front_end": "graph (after import)", "graph": g, "graph_weights": w, "inputs": sig}
    _with_build(parts, details, config)
    return parts, details


def key_of(parts: dict) -> str:
    return _h(*(f"{k}={parts[k]}" for k in PART_ORDER if k in parts))


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


def differing(parts: dict, other: dict) -> list[str]:
    names = [k for k in PART_ORDER if k in parts or k in other]
    return [k for k in names if parts.get(k) != other.get(k)]


def _detail_diff(name: str, mine: Any, theirs: Any) -> str:
    """What changed inside a part, when its details say (which tensors, which files, which settings)."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        changed = [k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
        if name == "source":
            files = [os.path.basename(k) for k in sorted(set(mine.get("files", {})) | set(theirs.get("files", {})))
                     if mine.get("files", {}).get(k) != theirs.get("files", {}).get(k)]
            pk = [f"{k} {theirs.get('packages', {}).get(k)} -> {mine.get('packages', {}).get(k)}"
                  for k in sorted(set(mine.get("packages", {})) | set(theirs.get("packages", {})))
                  if mine.get("packages", {}).get(k) != theirs.get("packages", {}).get(k)]
            what = (f"files {', '.join(files)}" if files else f"packages {', '.join(pk)}" if pk
                    else "the byte code of a method or helper")
            return f": {what} changed"
        if changed and name in ("config", "deps"):  # short values: show them
            return ": " + ", ".join(f"{k}: {theirs.get(k)} -> {mine.get(k)}" for k in changed)
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
            return f": {shown}"
    elif mine is not None and theirs is not None and mine != theirs and len(str(mine)) + len(str(theirs)) < 300:
        return f": {theirs} -> {mine}"
    return ""


def explain_parts(parts: dict, details: dict, directory: Optional[str] = None) -> tuple[Optional[dict], list[str], str]:
    """(the nearest entry's record or None, the parts that differ, a sentence): the entry with the fewest
    differing parts among those of the same front end (the most recently used first)."""
    directory = directory or models_dir()
    best = None
    for p, r in _records(directory) if directory else ():
        if r is None:
            continue
        for cand in (r["parts"], r.get("graph_parts")):
            if not isinstance(cand, dict) or cand.get("front_end") != parts.get("front_end"):
                continue
            d = differing(parts, cand)
            used = os.stat(p).st_mtime if os.path.exists(p) else 0
            if best is None or (len(d), -used) < (len(best[1]), -best[2]):
                best = (r, d, used, cand)
    if best is None:
        return None, [], "no entry of this kind in the cache"
    r, d, _, _ = best
    if not d:
        return r, d, f"entry {r['key'][:16]} ({r.get('model', '?')}) matches"
    rdetails = r.get("details", {}) if r["parts"] is best[3] else r.get("graph_details", {})
    why = "; ".join(f"{k} ({PART_MEANING.get(k, k)}){_detail_diff(k, details.get(k), rdetails.get(k))}" for k in d)
    return r, d, f"nearest entry {r['key'][:16]} ({r.get('model', '?')}) differs in {len(d)} part(s): {why}"


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
        from .artifact import ArtifactError, load
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
    from . import errors
    cls = getattr(errors, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning


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
    from .frontend.capture import _as_args, _input_names, normalize_dynamic_shapes
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
