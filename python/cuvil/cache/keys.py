"""A model's key: a hash over named parts, each a hash of one thing the compiled code depends on (PyTorch models
before capture, ONNX files, graphs after import), and what differs from the nearest entry when a key misses."""
from __future__ import annotations

import hashlib
import json
import marshal
import mmap
import os
import re
import sys
import sysconfig
import types
from typing import Any, Optional

import numpy as np

from .. import _C
from .hashing import _bytes_hash, _file_hash, _h, _mapped_hash
from .store import _records, models_dir

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



class NotCacheable(Exception):
    """Why a model has no key before capture."""


# ---- the parts every key has

_build: Optional[dict] = None


def _package_sources() -> list[str]:
    """The cuvil package's own Python files (the front ends turn models into graphs), as path, size and mtime:
    any edit changes them (as the JIT cache keys on its library's)."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cuvil/
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
