"""Hot weight swap for compiled modules: ``compiled.update_weights({name: tensor}, strict=True)``.

ONNX models (:func:`cuvil.load_onnx`) and ``.cuv`` artifacts replace the named constants in the engine
(``_C.Model.update_weights``: the ONNX graph before the passes is kept, so BatchNorm folding and every other
pass run again on the new weights). Modules compiled from PyTorch do the same: the captures keep each
``state_dict`` entry a constant of its own (frontend/state.py) and the engine keeps the graph before the passes,
so an update replaces those constants and runs the passes again in C++, without the GIL and without capturing
the module again — bit for bit a fresh compile. Where the capture could not keep them apart (a converter read an
entry's values, a model-cache hit, an ExportedProgram), the module is recompiled from a copy holding the new
``state_dict`` and the engine adopts the new graph (``CUVIL_LOG=weights`` says why). Either way the new version
is built and prepared on the caller's thread and published at once; calls in flight finish on the weights they
started with.
"""
from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Mapping

import numpy as np

from .errors import InputError

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def as_array(name: str, value: Any) -> np.ndarray:
    """A weight as a NumPy array the engine reads (torch bf16 as its uint16 bits)."""
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()
    if isinstance(value, np.ndarray):
        return value
    raise InputError(f"weight '{name}': expected a torch tensor or a NumPy array, got {type(value).__name__}")


def check_mapping(weights: Any) -> Mapping:
    if not isinstance(weights, Mapping):
        raise TypeError(f"update_weights takes a dict {{name: tensor}}, got {type(weights).__name__}")
    for k in weights:
        if not isinstance(k, str):
            raise TypeError(f"weight names must be strings, got {k!r}")
    return weights


class TorchRecipe:
    """How a module compiled from PyTorch is compiled again with other weights.

    `base` holds the weights the engine serves now, by state_dict name: at first the module's own tensors (not
    copied; their identity and version counter are recorded, so weights changed in place since the compile are
    noticed), after an update the merged set."""

    def __init__(self, model, args: tuple, kwargs: dict, settings: dict, compile_fn: Callable, compiled=None,
                 state: Mapping = None):
        self.model = model  # None: an ExportedProgram's (`state`: its state_dict), updated in place only
        self.args, self.kwargs, self.settings = args, kwargs, settings
        self.compile_fn = compile_fn
        self.base = dict(model.state_dict() if state is None else state)
        self.stamps = {k: _stamp(v) for k, v in self.base.items()}
        self.lock = threading.Lock()  # one update at a time: each builds on the last one's weights
        # In place: state_dict key -> the name of its constant in the graph the engine kept (frontend/state.py);
        # None: updates compile again, for the reason `why` says.
        constants = getattr(compiled, "_state_map", None)
        self.why = getattr(compiled, "_state_problem", "it was loaded from the compiled-model cache, whose "
                           "artifact keeps no graph before the passes (the next updates replace constants)")
        if settings.get("precision") in ("int8", "auto"):  # (its scales come from calibrating these weights)
            self.why = f"precision {settings['precision']!r} calibrates on the weights"
        self.constants = constants if constants is not None and self.why is None else None
        # Keys naming one tensor (tied weights): an update of one is an update of all, as load_state_dict does.
        groups: dict = {}
        for k, v in self.base.items():
            groups.setdefault((v.data_ptr(), v.dtype, tuple(v.shape), tuple(v.stride())) if v.numel() else k,
                              []).append(k)
        self.aliases = {k: g for g in groups.values() for k in g}
        self.logged = False

    def names(self) -> dict:
        return {k: f"{str(v.dtype).replace('torch.', '')}{list(v.shape)}" for k, v in self.base.items()}

    def update(self, compiled, weights: Mapping, strict: bool) -> int:
        with self.lock:
            return self._update(compiled, weights, strict)

    def _update(self, compiled, weights: Mapping, strict: bool) -> int:
        given = {k: _as_tensor(k, v) for k, v in weights.items()}
        problems = []
        for k, v in given.items():
            b = self.base.get(k)
            if b is None:
                problems.append(f"'{k}' is not in the module's state_dict")
            elif v.dtype != b.dtype:
                problems.append(f"'{k}' is {str(b.dtype).replace('torch.', '')}, given "
                                f"{str(v.dtype).replace('torch.', '')}")
            elif tuple(v.shape) != tuple(b.shape):
                problems.append(f"'{k}' has shape {list(b.shape)}, given {list(v.shape)}")
        if strict:
            missing = [k for k in self.base if k not in given]
            if missing:
                shown = ", ".join(f"'{k}'" for k in missing[:8]) + (f", ... ({len(missing)} in all)"
                                                                     if len(missing) > 8 else "")
                problems.append(f"strict update: missing {shown} (update a subset with strict=False)")
        elif self.constants is None and any(_stamp(v) != self.stamps[k] for k, v in self.base.items()
                                            if k not in given):
            problems.append("the module's weights changed in place since it was compiled, so the weights not given "
                            "are unknown: give the full state_dict (strict=True)")
        if problems:
            raise InputError("weights not updated: " + "; ".join(problems[:8]))
        if self.constants is not None:
            return self._replace(compiled, given)
        if self.model is None:  # (an ExportedProgram: no module to compile again)
            raise InputError(f"weights not updated: {self.why}")
        if not self.logged:
            from .frontend.state import log_weights
            log_weights(f"update_weights compiles the module again: {self.why}")
            self.logged = True
        merged = dict(self.base)
        merged.update({k: v.clone() for k, v in given.items()})  # ours: the caller may change its tensors
        module = _copy_with(self.model, merged)
        fresh = self.compile_fn(module, self.args, self.kwargs, **self.settings)
        version = compiled._model.adopt(fresh._model)
        self.base = merged
        self.stamps = {k: _stamp(v) for k, v in merged.items()}
        if getattr(fresh, "_state_problem", "") is None and self.settings.get("precision") not in ("int8", "auto"):
            # (a model-cache hit: the engine now holds the new compile's graph before the passes, so the next
            # updates replace constants there)
            self.constants, self.why = fresh._state_map, None
        return version


    def _replace(self, compiled, given: dict) -> int:
        """The given entries (and those tied to them) replace their constants in the graph kept before the
        passes, which run again natively with the GIL released (_C.Model.update_weights)."""
        order = {k: i for i, k in enumerate(self.base)}
        value: dict = {}
        for k in sorted(given, key=order.__getitem__):  # the last of tied keys wins, as in load_state_dict
            for alias in self.aliases[k]:
                value[alias] = given[k]
        updates = [(self.constants[k], as_array(k, v)) for k, v in value.items() if k in self.constants]
        return compiled._model.update_weights(updates, False)


def _copy_with(model, state: dict):
    """A deep copy of the module holding `state`'s tensors: its parameters and buffers are not copied first
    (deepcopy's memo maps each to its new tensor), then load_state_dict makes sure every entry landed."""
    memo = {}
    named = list(model.named_parameters(remove_duplicate=False)) + list(model.named_buffers(remove_duplicate=False))
    for name, t in named:
        if name in state and id(t) not in memo:
            new = state[name]
            memo[id(t)] = torch.nn.Parameter(new, requires_grad=t.requires_grad) \
                if isinstance(t, torch.nn.Parameter) else new
    module = copy.deepcopy(model, memo)
    module.load_state_dict(state, strict=True)
    return module


def _stamp(t) -> tuple:
    return (t.data_ptr(), t._version) if torch is not None and isinstance(t, torch.Tensor) else (id(t), 0)


def _as_tensor(name: str, value: Any):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    raise InputError(f"weight '{name}': expected a torch tensor or a NumPy array, got {type(value).__name__}")

