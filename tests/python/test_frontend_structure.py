"""The PyTorch front end's structure: no import cycle among its modules (the converters import context.py, never
a front end), a conversion context with declared fields only, and one dtype table that is the core's."""
import ast
import pathlib

import numpy as np
import pytest
import torch

from cuvil import _C
from cuvil.frontend import context

FRONTEND = pathlib.Path(context.__file__).parent


def _imports() -> dict:
    """Each frontend module's imports of sibling modules (at any depth in the file: lazy imports count)."""
    graph = {}
    for path in FRONTEND.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        graph[path.stem] = deps
    return graph


def test_no_import_cycle():
    graph = _imports()
    state = {}

    def visit(m, path):
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                pytest.fail("import cycle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d, path + [d])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_converters_import_no_front_end():
    for m, deps in _imports().items():
        if m.startswith("aten_"):
            assert not deps & {"torchscript", "export", "fx_graph", "capture"}, (m, deps)


def test_context_fields_are_declared():
    ctx = context.ConvertContext(_C.GraphBuilder("g"))
    assert not hasattr(ctx, "__dict__")
    with pytest.raises(AttributeError):
        ctx.undeclared_state = 1  # noqa: B010


def test_one_dtype_table_from_the_core():
    core = {name: (size, onnx_id, kind) for name, size, onnx_id, kind, _ in _C.dtypes()}
    assert {n: (d.itemsize, d.onnx_id, d.kind) for n, d in context.DTYPES.items()} == core
    for torch_dt, name in context.TORCH_TO_CUVIL.items():
        assert torch.empty((), dtype=torch_dt).element_size() == context.DTYPES[name].itemsize
        assert context.CUVIL_TO_TORCH[name] is torch_dt
    for name, np_type in context.NUMPY_DTYPES.items():
        assert np.dtype(np_type).itemsize == context.DTYPES[name].itemsize
    assert context.onnx_dtype_id("f32") == 1 and context.onnx_dtype_id("bf16") == 16
    assert context.CATEGORY["bool"] < context.CATEGORY["i64"] < context.CATEGORY["f16"]
    assert context.SCALAR_TYPE_TO_TORCH[6] is torch.float32 and context.TORCH_TO_SCALAR_TYPE[torch.bool] == 11
