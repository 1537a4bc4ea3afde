"""ONNX sequence and optional values at a model's boundary, as ONNX Runtime takes and gives them from Python.

Cuvil resolves sequence and optional values when the graph is built (src/frontend/onnx/static_sequences.h): a
sequence of n tensors is n values, an absent optional none. So a model whose graph inputs are sequences or
optionals is compiled once per binding of them, as calls meet them: the lengths of the lists given for its sequence
inputs and which optional inputs are None. Each binding's compiled module is kept, so a call with a binding seen
before runs at once. Sequence outputs come back as lists and an absent optional output as None."""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Sequence

from . import _C
from .errors import InputError, compile_error


def output_structure(slots: Sequence[tuple]) -> Any:
    """The CompiledModule output structure of the ONNX outputs' layout: None (the plain one) when every output
    is a tensor, else one entry per ONNX output (a list of tensors for a sequence, None for an absent optional)."""
    if all(kind == "tensor" for _, kind, _, _ in slots):
        return None
    items = []
    for _, kind, count, _ in slots:
        if kind == "tensor":
            items.append("tensor")
        elif kind == "sequence":
            items.append(("list", ["tensor"] * count))
        else:
            items.append("none")
    return items[0] if len(items) == 1 else ("tuple", items)


class BoundInputsModule:
    """An ONNX model with sequence or optional graph inputs (from :func:`cuvil.load_onnx`). Call it like a
    compiled module, giving a list (or tuple) of arrays for each sequence input and an array or None for each
    optional one; it compiles the model for that binding (list lengths, absent optionals) the first time it meets
    it and keeps the result. :meth:`compiled_for` gives that :class:`cuvil.CompiledModule` (to save, profile or
    inspect it); :attr:`bindings` lists those compiled so far."""

    def __init__(self, path: str, input_slots: Sequence[tuple], compile_bound: Callable[[dict, frozenset], Any],
                 first: Any = None):
        self._path = path
        self._slots = [(name, kind, optional) for name, kind, _, optional in input_slots]
        self._compile_bound = compile_bound
        self._compiled: dict = {}
        self._lock = threading.Lock()
        if first is not None:
            self._compiled[((), frozenset())] = first

    @property
    def input_names(self) -> list[str]:
        """The ONNX graph's inputs, in call order."""
        return [name for name, _, _ in self._slots]

    @property
    def bindings(self) -> list[tuple[dict, frozenset]]:
        """The bindings compiled so far: ({sequence input: length}, {optional inputs given as None})."""
        with self._lock:
            return [(dict(lengths), absent) for lengths, absent in self._compiled]

    def _values(self, args: Sequence[Any], kwargs: dict) -> list:
        names = self.input_names
        if len(args) > len(names):
            raise InputError(f"expected {len(names)} input(s) ({', '.join(names)}), got {len(args)}")
        values = list(args)
        for name in names[len(args):]:
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif any(n == name and optional for n, _, optional in self._slots):
                values.append(None)  # an optional input left out is absent, as in ONNX Runtime
            else:
                raise InputError(f"missing input '{name}' (the model takes {', '.join(names)})")
        for name in names[:len(args)]:
            if name in kwargs:
                raise InputError(f"input '{name}' given both by position and by keyword")
        if kwargs:
            raise InputError(f"unknown input(s): {', '.join(sorted(kwargs))} (the model takes {', '.join(names)})")
        return values

    def _bind(self, values: list) -> tuple[tuple, frozenset, list]:
        """The binding these values make, and the flat tensor arguments of its compiled module."""
        lengths, absent, flat = [], set(), []
        for (name, kind, optional), v in zip(self._slots, values):
            if v is None:
                if not optional:
                    raise InputError(f"input '{name}' is not optional: None was given")
                absent.add(name)
            elif kind == "sequence":
                if not isinstance(v, (list, tuple)):
                    raise InputError(f"input '{name}' is a sequence: give a list of tensors, got {type(v).__name__}")
                lengths.append((name, len(v)))
                flat.extend(v)
            else:
                if isinstance(v, (list, tuple)):
                    raise InputError(f"input '{name}' is a tensor, not a sequence: got a {type(v).__name__}")
                flat.append(v)
        return tuple(lengths), frozenset(absent), flat

    def compiled_for(self, *args, **kwargs):
        """The compiled module these inputs run on (compiled now if their binding is new)."""
        lengths, absent, _ = self._bind(self._values(args, dict(kwargs)))
        return self._module(lengths, absent)

    def _module(self, lengths: tuple, absent: frozenset):
        key = (lengths, absent)
        m = self._compiled.get(key)
        if m is not None:
            return m
        with self._lock:  # (one compile per binding, even when threads meet it together)
            m = self._compiled.get(key)
            if m is None:
                try:
                    m = self._compile_bound(dict(lengths), absent)
                except _C.Error as e:
                    raise compile_error(e, f"{self._path}: {e}" if not str(e).startswith(self._path) else str(e)) \
                        from None
                self._compiled[key] = m
        return m

    def __call__(self, *args, **kwargs):
        lengths, absent, flat = self._bind(self._values(args, dict(kwargs)))
        return self._module(lengths, absent)(*flat)

    def __repr__(self) -> str:
        kinds = ", ".join(f"{n}: {'optional ' if o else ''}{k}" for n, k, o in self._slots)
        return f"<cuvil BoundInputsModule {self._path} ({kinds}), {len(self._compiled)} binding(s) compiled>"
