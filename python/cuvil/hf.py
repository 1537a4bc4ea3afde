"""Hugging Face pipelines on Cuvil: `cuvil.hf.compile_pipeline(pipe)` makes `pipe("text")` run its model compiled.

The pipeline keeps its own pre- and post-processing (tokenizer, labels, pooling); only the model's forward is
replaced. Each set of tensor inputs the pipeline passes (input_ids, attention_mask, token_type_ids, ...)
compiles once through torch.export with batch and sequence length symbolic, so new batch sizes and lengths run
the same compiled model; the model's own output type (SequenceClassifierOutput, ...) comes back.
"""
from __future__ import annotations

from typing import Any

import torch

from .frontend.capture import compile as _compile


class _Forward(torch.nn.Module):
    """The model's original forward with the tensor keywords a pipeline passes, for capture."""

    def __init__(self, model: torch.nn.Module, forward):
        super().__init__()
        self.model = model
        self._forward = forward

    def forward(self, **inputs):
        return self._forward(**inputs)


def compile_pipeline(pipe: Any, **options) -> Any:
    """Makes `pipe`'s model run on Cuvil (in place; returns `pipe`). options go to cuvil.compile (threads, ...).
    Calls that pass non-tensor arguments other than None to the model run it eagerly."""
    model = pipe.model
    original = model.forward
    wrapper = _Forward(model, original).eval()
    compiled: dict[tuple, Any] = {}

    def forward(*args, **kwargs):
        tensors = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        others = {k: v for k, v in kwargs.items() if k not in tensors and v is not None}
        if args or others or not tensors:
            return original(*args, **kwargs)
        key = tuple(tensors)
        if key not in compiled:
            shapes = {k: {0: "batch", 1: "seq"} if v.dim() >= 2 else {0: "batch"} for k, v in tensors.items()}
            compiled[key] = _compile(wrapper, (), tensors, dynamic_shapes=shapes, capture="export", **options)
        return compiled[key](**tensors)

    forward.cuvil_compiled = compiled  # introspection: one compiled model per set of inputs
    model.forward = forward
    return pipe
