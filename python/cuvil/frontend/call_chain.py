"""The user's Python call chain of a captured node: "test.py:40 in test_it\\nmodel.py:12 in forward", outermost
first, one ``file:line in function`` per line, the frames of libraries (torch, Cuvil, site-packages, the
standard library) left out. It goes into the node's IR location (Location::stack), so a run-time error and the
profile name the user's own lines, not torch/nn/functional.py's.

- torch.jit.trace: the node's source range is the whole Python stack that ran the op, innermost first.
- torch.export (FX): node.meta["stack_trace"], a traceback from forward() down to the op.
- torch.jit.script: inlining keeps only the innermost source range (TorchScript does not expose its inlined call
  stack to Python), so the chain is rebuilt from the node's module path: for each submodule on it, the line of
  its parent's forward() that calls it (script_call_sites), then the node's own line when it is the user's.
"""
from __future__ import annotations

import os
import re
import sysconfig
from typing import Optional

import torch

_TRACE_FRAME_RE = re.compile(r"^(.+)\((\d+)\): (\S+)$", re.M)
_FX_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_SCRIPT_LOC_RE = re.compile(r'File "([^"]+)", line (\d+)')

Frame = tuple[str, int, str]  # (file, line, function)


def _library_dirs() -> tuple[str, ...]:
    dirs = {os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    return tuple(os.path.join(d, "") for d in dirs)


_LIBRARY_DIRS = _library_dirs()


def is_user_file(path: str) -> bool:
    """Whether `path` is the user's code: not torch's, Cuvil's, an installed package's or the standard library's,
    nor a pseudo-file ("<string>", "<eval_with_key>.3")."""
    return not path.startswith(_LIBRARY_DIRS) and not path.startswith("<") and "/site-packages/" not in path \
        and "/dist-packages/" not in path


def format_chain(frames: list[Frame]) -> str:
    """The user's frames of `frames` (outermost first) as Location::stack text."""
    return "\n".join(f"{f}:{ln} in {fn}" for f, ln, fn in frames if is_user_file(f))


def trace_frames(source_range: str) -> list[Frame]:
    """A traced node's stack (its source range text, innermost first), outermost first."""
    return [(f, int(ln), fn) for f, ln, fn in _TRACE_FRAME_RE.findall(source_range)][::-1]


def fx_frames(stack_trace: Optional[str]) -> list[Frame]:
    """An FX node's meta["stack_trace"] as frames, outermost first (the traceback's order)."""
    return [(f, int(ln), fn) for f, ln, fn in _FX_FRAME_RE.findall(stack_trace or "")]


def script_call_sites(module) -> dict[str, Frame]:
    """For a scripted module (before freezing or inlining): by submodule path ("layer1.0.conv1"), the line of its
    parent's forward() that calls it. Submodules called from library code (nn.Sequential's loop) map to that
    library line, which format_chain leaves out."""
    sites: dict[str, Frame] = {}

    def visit(mod, prefix: str, depth: int) -> None:
        if depth > 32 or not hasattr(mod, "graph"):
            return
        try:
            graph = mod.graph
        except RuntimeError:  # a module without forward()
            return
        self_value = next(graph.inputs(), None)
        for node in graph.findAllNodes("prim::CallMethod"):
            owner = node.inputsAt(0).node()
            if owner.kind() != "prim::GetAttr" or owner.inputsAt(0) != self_value:
                continue
            m = _SCRIPT_LOC_RE.search(node.sourceRange() or "")
            if m:
                path = f"{prefix}{owner.s('name')}"
                sites.setdefault(path, (m.group(1), int(m.group(2)), "forward"))
        for name, child in mod.named_children():
            visit(child, f"{prefix}{name}.", depth + 1)

    try:
        visit(module, "", 0)
    except (RuntimeError, AttributeError):  # a module TorchScript represents otherwise: no chain, no failure
        pass
    return sites


def script_frames(module_path: str, own: tuple[str, int], sites: dict[str, Frame]) -> list[Frame]:
    """A scripted node's chain: the call site of each submodule on `module_path` ("layer1.0.conv1"), then the
    node's own (file, line)."""
    frames: list[Frame] = []
    parts = module_path.split(".") if module_path else []
    for k in range(1, len(parts) + 1):
        site = sites.get(".".join(parts[:k]))
        if site:
            frames.append(site)
    if own[0] and (not frames or frames[-1][:2] != own):
        frames.append((own[0], own[1], enclosing_function(own[0], own[1])))
    return frames


_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")


def enclosing_function(path: str, line: int) -> str:
    """The name of the function whose body holds `line` of `path` (read with linecache), or "?"."""
    import linecache
    text = linecache.getline(path, line)
    indent = len(text) - len(text.lstrip()) if text.strip() else 1 << 30
    for ln in range(line, max(line - 2000, 0), -1):
        m = _DEF_RE.match(linecache.getline(path, ln))
        if m and len(m.group(1)) < indent:
            return m.group(2)
    return "?"
