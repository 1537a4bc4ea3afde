"""A module's state_dict entries as named constants of the graph, so that weights update without a new capture.

The captures hand every parameter and buffer to the converters as a constant Value of the graph's top level,
named after its state_dict key, one per key (TorchScript: the entries stay module attributes through
torch.jit.freeze and each prim::GetAttr of one becomes its Value; torch.export: each lifted parameter or buffer).
Nothing is derived from them in PyTorch: transposes, casts, BatchNorm folds are graph nodes that Cuvil's passes
fold, so update_weights (cuvil/weights.py) replaces these constants in the graph kept before the passes
(`_C.GraphBuilder.build(keep_source=True)`) and runs the passes again: the same bits as a fresh compile.

A converter that reads an entry's data at compile time (`ConvertContext.const`, `constant_data`) bakes the
current values into the graph; that is noted (`StateConstants.baked`) and such a module updates by compiling
again, with the reason logged."""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

import torch


class StateConstants:
    """The state_dict entries of one capture: which constant Value holds each, and which were read as data."""

    def __init__(self, root_builder, keys):
        self.root = root_builder  # constants go to the top level, where updates find them (not into a region)
        self.keys = frozenset(keys)
        self.values: dict[str, Any] = {}   # key -> its constant Value
        self.by_name: dict[str, str] = {}  # the Value's name -> key
        self.baked: dict[str, str] = {}    # key -> where its data was read while converting
        self.paths: dict[int, str] = {}    # id(submodule object) -> its path (TorchScript attribute reads)

    def value(self, key: str, t: torch.Tensor):
        """The constant Value holding entry `key` (made at the first read)."""
        v = self.values.get(key)
        if v is None:
            t = t.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            t = t.contiguous()
            if t.dtype == torch.bfloat16:
                v = self.root.add_constant(key, t.view(torch.int16).numpy().view("uint16"), "bf16")
            else:
                v = self.root.add_constant(key, t.numpy())
            self.values[key] = v
            self.by_name[v.name] = key
        return v

    def key_of(self, v) -> Optional[str]:
        return self.by_name.get(getattr(v, "name", None))

    def note_read(self, v, where: str) -> None:
        key = self.key_of(v)
        if key is not None and key not in self.baked:
            self.baked[key] = where

    def mapping(self) -> dict[str, str]:
        """key -> the name of the constant holding it."""
        return {k: name for name, k in self.by_name.items()}  # (names: the Values die with the passes)

    def problem(self) -> Optional[str]:
        """Why updates of these entries cannot replace constants (None: they can)."""
        if not self.baked:
            return None
        shown = ", ".join(f"'{k}' ({w})" for k, w in list(self.baked.items())[:4])
        more = f" and {len(self.baked) - 4} more" if len(self.baked) > 4 else ""
        return f"the conversion read the values of {shown}{more} at compile time"


def attach_state(compiled, state: Optional[StateConstants]) -> None:
    """Records on the compiled module which constant holds each state_dict entry (`_state_map`, None when the
    entries were not tracked) and why they cannot be replaced in place (`_state_problem`, None when they can)."""
    compiled._state_map = state.mapping() if state is not None else None
    compiled._state_problem = state.problem() if state is not None else "the capture did not keep the weights apart"


def log_weights(message: str) -> None:
    """A line on stderr when CUVIL_LOG names `weights` (or `all`)."""
    if any(w.strip() in ("weights", "all") for w in os.environ.get("CUVIL_LOG", "").split(",")):
        print(f"cuvil[weights]: {message}", file=sys.stderr, flush=True)
