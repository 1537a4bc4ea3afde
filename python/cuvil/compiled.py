"""CompiledModule: a compiled model you call like the original one."""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from . import _C

try:  # torch is optional: ONNX models run without it
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _to_array(x: Any, name: str) -> tuple[np.ndarray, bool]:
    """A C-contiguous NumPy view of `x` (no copy when it already is one) and whether it came from torch."""
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"input '{name}' is on {x.device}; the CPU backend needs CPU tensors")
        t = x.detach()
        if not t.is_contiguous():
            t = t.contiguous()  # one copy, only for non-contiguous views
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16), True
        return t.numpy(), True
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x), False
    if isinstance(x, (bool, int, float, np.generic)):
        return np.asarray(x), False
    raise TypeError(f"input '{name}' must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")


def _to_torch(a: np.ndarray, cuvil_type: str):
    t = torch.from_numpy(a)  # shares memory; the array's base keeps Cuvil's buffer alive
    return t.view(torch.bfloat16) if cuvil_type.startswith("bf16") else t


class CompiledModule:
    """A compiled model. Call it with the original model's arguments (torch tensors or NumPy arrays); it returns
    torch tensors when given torch tensors and NumPy arrays otherwise, in the original output structure.

    Thread-safe: concurrent calls each run on their own executor; the GIL is released while running."""

    def __init__(self, model: "_C.Model", output_structure: Any = None):
        self._model = model
        self._structure = output_structure  # None: a tuple of outputs (single output unwrapped)
        self._lock = threading.Lock()

    @property
    def input_names(self) -> list[str]:
        return list(self._model.input_names)

    @property
    def input_types(self) -> list[str]:
        return list(self._model.input_types)

    @property
    def output_names(self) -> list[str]:
        return list(self._model.output_names)

    def ir(self, elide_large_constants: bool = True) -> str:
        """The compiled graph as Cuvil IR text."""
        return self._model.ir(elide_large_constants)

    def _arrays(self, args: Sequence[Any], kwargs: dict) -> tuple[list[np.ndarray], bool]:
        names = self.input_names
        if len(args) > len(names):
            raise ValueError(f"expected {len(names)} inputs ({', '.join(names)}), got {len(args)}")
        values = list(args)
        for name in names[len(args):]:
            if name not in kwargs:
                raise ValueError(f"missing input '{name}'")
            values.append(kwargs.pop(name))
        if kwargs:
            raise ValueError(f"unknown input(s): {', '.join(sorted(kwargs))}")
        arrays, any_torch = [], False
        for name, v in zip(names, values):
            a, is_torch = _to_array(v, name)
            arrays.append(a)
            any_torch |= is_torch
        return arrays, any_torch

    def __call__(self, *args, **kwargs):
        arrays, as_torch = self._arrays(args, kwargs)
        outs = self._model.run(arrays)
        if as_torch:
            if torch is None:  # pragma: no cover
                raise RuntimeError("torch is not importable")
            outs = [_to_torch(a, t) for a, t in zip(outs, self._model.output_types)]
        return self._restructure(outs)

    def _restructure(self, outs: list):
        if self._structure is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        it = iter(outs)

        def build(s):
            if s == "tensor":
                return next(it)
            kind, items = s
            built = [build(x) for x in items]
            return tuple(built) if kind == "tuple" else built

        return build(self._structure)

    def profile(self, *args, **kwargs) -> str:
        """Runs once and returns a per-node table (time, share, op, location) followed by totals per op."""
        arrays, _ = self._arrays(args, kwargs)
        rows = self._model.profile(arrays)
        total = sum(ms for _, _, ms in rows) or 1e-12
        lines = [f"{'ms':>10} {'share':>7}  {'op':<24} location"]
        for op, loc, ms in rows:
            lines.append(f"{ms:10.4f} {100 * ms / total:6.2f}%  {op:<24} {loc}")
        by_op: dict[str, float] = {}
        for op, _, ms in rows:
            by_op[op] = by_op.get(op, 0.0) + ms
        lines.append("totals by op:")
        for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
            lines.append(f"{ms:10.4f} {100 * ms / total:6.2f}%  {op}")
        lines.append(f"{total:10.4f} 100.00%  total")
        return "\n".join(lines)

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {t}" for n, t in zip(self.input_names, self.input_types))
        return f"<cuvil.CompiledModule ({ins}) -> {len(self.output_names)} output(s)>"


def load_onnx(path: str, **options) -> CompiledModule:
    """Compiles an ONNX model file. Raises cuvil.CompileError for an unreadable or unsupported model."""
    if options:
        raise TypeError(f"unknown option(s): {', '.join(sorted(options))}")
    from .errors import CompileError
    try:
        return CompiledModule(_C.load_onnx(str(path)))
    except _C.Error as e:
        raise CompileError(str(e)) from None
