"""The .cuv artifact from Python: CompiledModule.save(path) and cuvil.load(path).

The file (src/artifact/format.h) holds the optimized graph, its weights (mapped, not copied, at load), a
manifest (versions, the normalized configuration, the model's fingerprint, the input/output signature and dim
ranges, the CPU features the code requires) and a source map. What only Python knows of a compiled module (how
its outputs nest, the ranges of its symbolic dims) travels in the manifest's ``extra`` object.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Optional

from . import _C
from .compiled import CompiledModule, DimBound, _check_limits, check_options


class ArtifactError(RuntimeError):
    """A .cuv file cannot be loaded: not an artifact, truncated or corrupt, written by an incompatible Cuvil
    version, or compiled for CPU features this machine lacks (the message lists them)."""


def _structure_to_json(s: Any) -> Any:
    if s is None or isinstance(s, str):
        return s
    kind, items = s
    if kind == "dict":
        return {"kind": "dict", "items": [[k, _structure_to_json(v)] for k, v in items]}
    return {"kind": kind, "items": [_structure_to_json(x) for x in items]}


def _structure_from_json(j: Any) -> Any:
    if j is None or isinstance(j, str):
        return j
    if not isinstance(j, dict) or j.get("kind") not in ("dict", "tuple", "list") or not isinstance(j.get("items"), list):
        raise ArtifactError("artifact: malformed output structure in the manifest")
    if j["kind"] == "dict":
        return ("dict", [(k, _structure_from_json(v)) for k, v in j["items"]])
    return (j["kind"], [_structure_from_json(x) for x in j["items"]])


def _file_fingerprint(path: Optional[str]) -> str:
    if not path or not os.path.isfile(path):
        return ""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def _pytree_unflatten(saved: Any, path: str):
    """The outputs' unflattening of a torch.export module, rebuilt from its stored pytree spec (None: none)."""
    if not saved:
        return None
    try:
        from torch.utils import _pytree as pytree
        spec = pytree.treespec_loads(saved["pytree"])
        nones = [bool(n) for n in saved["nones"]]
    except ImportError:  # no torch: flat outputs
        return None
    except Exception as e:  # noqa: BLE001 - whatever a malformed spec raises
        raise ArtifactError(f"{path}: malformed output pytree in the manifest ({e})") from None

    def unflatten(outs: list):
        if any(nones):
            it = iter(outs)
            outs = [None if n else next(it) for n in nones]
        return pytree.tree_unflatten(outs, spec)

    unflatten.cuvil_saved = saved
    return unflatten


def save_module(m: CompiledModule, path: "str | os.PathLike") -> None:
    path = os.fspath(path)
    bounds = [b._asdict() for b in m._dim_bounds]
    saved = getattr(m._unflatten, "cuvil_saved", None)
    extra = {
        "output_structure": _structure_to_json(m._structure),
        # torch.export's output pytree, as pytree writes it; one it cannot write loads as flat outputs (a tuple).
        "output_pytree": saved,
        "outputs_flattened": m._unflatten is not None and saved is None,
        "dim_bounds": bounds,
    }
    ranges = [(b.symbol, -1 if b.lo is None else b.lo, -1 if b.hi is None else b.hi) for b in m._dim_bounds]
    # bf16 / int8: the precision is in the configuration (set again at load), the int8 grids are node attributes
    # of the saved graph, and the calibration's per-layer record rides along for precision_report.
    config = json.dumps(dict(m._config, precision=m._model.precision), sort_keys=True)
    if getattr(m, "_quant", None):
        extra["quant"] = m._quant
    if getattr(m, "_auto", None):
        extra["auto"] = m._auto
    m._model.save(path, config, json.dumps(extra), _file_fingerprint(m._source_path), ranges)


def load(path: "str | os.PathLike", *, threads: Optional[int] = None, timeout: Optional[float] = None,
         max_loop_iterations: Optional[int] = None, _prepare: bool = True) -> CompiledModule:
    """Loads a ``.cuv`` artifact written by :meth:`CompiledModule.save` or ``cuvil compile``: no compilation, the
    weights used where the file is mapped. Options as in :func:`cuvil.load_onnx`. Raises FileNotFoundError for a
    missing file and :class:`ArtifactError` for a file that cannot be loaded (the message says why)."""
    check_options("fp32", "cpu", threads, {}, names="threads, timeout, max_loop_iterations")
    limits = _check_limits(timeout, max_loop_iterations)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such artifact: {path}")
    try:
        model, _manifest, extra_json, ranges = _C.load_artifact(path)
    except _C.Error as e:
        raise ArtifactError(str(e)) from None
    extra = json.loads(extra_json)
    structure = None
    bounds = []
    try:
        if not extra.get("outputs_flattened"):
            structure = _structure_from_json(extra.get("output_structure"))
        for b in extra.get("dim_bounds", []):
            bounds.append(DimBound(int(b["input"]), int(b["axis"]), str(b["symbol"]),
                                   None if b["lo"] is None else int(b["lo"]), None if b["hi"] is None else int(b["hi"])))
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"{path}: malformed front-end data in the manifest ({e})") from None
    if not bounds:  # no front-end bounds (an ONNX model, `cuvil compile --dim`): the manifest's ranges
        bounds = [DimBound(i, a, sym, None if lo < 0 else lo, None if hi < 0 else hi) for i, a, sym, lo, hi in ranges]
    if threads is not None:
        model.set_threads(threads)
    model.set_limits(*limits)
    config = json.loads(_manifest).get("config", {})
    if config.get("precision", "fp32") != "fp32":
        model.set_precision(config["precision"])
    if _prepare:  # (the model cache defers it to the first call: cuvil.cache)
        model.prepare_static()
    unflatten = _pytree_unflatten(extra.get("output_pytree"), path)
    compiled = CompiledModule(model, structure, unflatten=unflatten, dim_bounds=bounds)
    compiled._config = config
    if extra.get("quant"):
        compiled._quant = extra["quant"]
    if extra.get("auto"):
        compiled._auto = extra["auto"]
    return compiled
