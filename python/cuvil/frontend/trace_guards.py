"""Guards torch.jit.trace would drop: a `raise` (or `assert`) under a condition on tensor values.

A trace records the ops the example inputs ran, never Python's control flow: `if x.abs().max() > limit: raise
ValueError(...)` leaves no trace, so the compiled model would return a value where eager PyTorch raises. The
tracer says where it turned a tensor into a Python value (a TracerWarning, "Converting a tensor to a Python
boolean ..."); at each such line this module reads the source and looks for a `raise`/`assert` that the
condition guards: the `if`/`while`/`assert` on that line, or a later one in the same function that tests a name
that line assigned (`big = bool(...)`, then `if big: raise`). A trace cannot keep such a guard (scripting and
export keep it as an Assert), so torchscript._capture refuses the traced model, naming the `raise`.
"""
from __future__ import annotations

import ast
import linecache
import os
import sys
import traceback
import warnings
from dataclasses import dataclass
from typing import Optional

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_DATA_DEPENDENT = "Converting a tensor to a Python"


@dataclass
class _Seen:
    message: Warning
    category: type
    filename: str
    lineno: int
    stack: list  # (file, line) outermost first, up to the warning's frame
    registry: Optional[dict]  # the warning module's "once per location" registry, as warnings.warn keeps it


class RecordWarnings:
    """Records the warnings raised inside (with the Python stack that raised them) and re-emits them on exit, so
    the caller sees what it would have seen."""

    def __enter__(self) -> list:
        self.seen: list[_Seen] = []
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("always")

        def hook(message, category, filename, lineno, file=None, line=None):
            stack = [(f.filename, f.lineno) for f in traceback.extract_stack()[:-1]
                     if not f.filename.startswith(_THIS_DIR) and os.path.basename(f.filename) != "warnings.py"]
            frame, registry = sys._getframe(1), None
            while frame is not None:
                if frame.f_code.co_filename == filename and frame.f_lineno == lineno:
                    registry = frame.f_globals.setdefault("__warningregistry__", {})
                    break
                frame = frame.f_back
            self.seen.append(_Seen(message, category, filename, lineno, stack, registry))

        warnings.showwarning = hook
        return self.seen

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)
        done = set()
        for w in self.seen:
            key = (w.category, w.filename, w.lineno, str(w.message))
            if key not in done:
                done.add(key)
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=w.registry)


@dataclass
class DroppedGuard:
    raise_file: str
    raise_line: int
    what: str        # "raise ValueError" / "assert"
    guard_file: str  # where the tensor became a Python value
    guard_line: int
    caller: Optional[tuple]  # the innermost frame outside torch, when the guard is in torch's own code


def dropped_guards(seen: list) -> list[DroppedGuard]:
    """The raises guarded by a condition on tensor values among the recorded tracer warnings."""
    out, done = [], set()
    for w in seen:
        if not issubclass(w.category, torch.jit.TracerWarning) or not str(w.message).startswith(_DATA_DEPENDENT):
            continue
        if (w.filename, w.lineno) in done:
            continue
        done.add((w.filename, w.lineno))
        found = _guarded_raise(w.filename, w.lineno)
        if found is None:
            continue
        line, what = found
        caller = None
        if w.filename.startswith(_TORCH_DIR):
            user = [fr for fr in w.stack if not fr[0].startswith(_TORCH_DIR)]
            caller = user[-1] if user else None
        out.append(DroppedGuard(w.filename, line, what, w.filename, w.lineno, caller))
    return out


_TREES: dict[str, Optional[ast.AST]] = {}


def _tree(filename: str) -> Optional[ast.AST]:
    if filename not in _TREES:
        try:
            _TREES[filename] = ast.parse("".join(linecache.getlines(filename)), filename)
        except (SyntaxError, ValueError):
            _TREES[filename] = None
    return _TREES[filename]


def _guarded_raise(filename: str, lineno: int) -> Optional[tuple[int, str]]:
    """(line, "raise X" / "assert") of a raise the condition read at filename:lineno guards, else None."""
    tree = _tree(filename)
    if tree is None:
        return None
    stmt, func = _innermost(tree, lineno)
    if stmt is None:
        return None
    if _guards(stmt, lineno):
        return _first_raise(stmt)
    # `c = bool(x.max() > 1)` / `m = x.max().item()`, tested further down: `if c: raise`, `assert m < 2`
    names = _assigned(stmt)
    if not names or func is None:
        return None
    for later in ast.walk(func):
        if isinstance(later, (ast.If, ast.While, ast.Assert)) and later.lineno > stmt.end_lineno and \
                any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(later.test)):
            found = _first_raise(later)
            if found is not None:
                return found
    return None


def _innermost(tree, lineno: int):
    """The innermost statement spanning `lineno`, and the function holding it."""
    best, func = None, None

    def visit(node, fn):
        nonlocal best, func
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and child.lineno <= lineno <= (child.end_lineno or child.lineno):
                best, func = child, fn
                visit(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn)
            elif not isinstance(child, ast.stmt):
                visit(child, fn)

    visit(tree, None)
    return best, func


def _guards(stmt, lineno: int) -> bool:
    """Whether `lineno` lies in the condition of an if/while/assert statement."""
    if isinstance(stmt, (ast.If, ast.While, ast.Assert)):
        t = stmt.test
        return t.lineno <= lineno <= (t.end_lineno or t.lineno)
    return False


def _assigned(stmt) -> set:
    targets = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _first_raise(stmt) -> Optional[tuple[int, str]]:
    if isinstance(stmt, ast.Assert):
        return stmt.lineno, "assert"
    todo = list(getattr(stmt, "body", [])) + list(getattr(stmt, "orelse", []))
    while todo:
        s = todo.pop(0)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, ast.Raise):
            exc = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
            name = ast.unparse(exc) if exc is not None else ""
            return s.lineno, f"raise {name}".rstrip()
        if isinstance(s, ast.Assert):
            return s.lineno, "assert"
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(s, field, []) or [])
    return None
