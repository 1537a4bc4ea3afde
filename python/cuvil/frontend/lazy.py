"""@cuvil.compile as a decorator: compile when the user says, not necessarily at definition.

    @cuvil.compile                      # lazy: compiles at the first call, from its inputs
    def f(x, y): ...
    @cuvil.compile(args=(example,))     # eager: compiles now
    class Net(nn.Module): ...
    f.compile(example)                  # explicit

A call whose inputs differ from the compiled ones in some dims compiles once more with those dims symbolic
(as torch.compile's automatic dynamic shapes do); from then on any size of those dims runs the same symbolic
plan. Dims named in dynamic_shapes are symbolic from the start.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch


class LazyCompiled:
    """A function or module compiled at its first call (or at `.compile(...)`), recompiled only to make a
    dim symbolic the first time a call changes it."""

    def __init__(self, fn: Callable, compile_fn: Callable, options: dict):
        self._fn = fn
        self._compile_fn = compile_fn
        self._options = dict(options)
        self._user_shapes = self._options.pop("dynamic_shapes", None) or {}
        self._compiled = None
        self._examples: Optional[list] = None  # the shapes compiled for, per input (None: symbolic dim)
        self._names: list[str] = []
        self.recompiles = 0  # compiles after the first (each makes more dims symbolic)
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def compile(self, *args, **kwargs) -> "LazyCompiled":
        """Compiles now for inputs like these (their dtypes and ranks; dims stay as given unless symbolic)."""
        self._build(args, kwargs, extra={})
        return self

    def _build(self, args: tuple, kwargs: dict, extra: dict) -> None:
        shapes: dict[str, dict] = {}
        for source in (self._user_shapes, extra):
            for name, axes in source.items():
                shapes.setdefault(name, {}).update(axes)
        self._compiled = self._compile_fn(self._fn, args, kwargs or None, dynamic_shapes=shapes or None,
                                          **self._options)
        self._names = list(self._compiled.input_names)
        values = list(args) + list(kwargs.values())
        self._examples = [list(v.shape) if isinstance(v, torch.Tensor) else list(getattr(v, "shape", ()))
                          for v in values]
        for i, name in enumerate(self._names):
            for axis in shapes.get(name, {}):
                self._examples[i][axis] = None
        self._shapes = shapes

    def __call__(self, *args, **kwargs):
        if self._compiled is None:
            self._build(args, kwargs, extra={})
        else:
            changed = self._changed_dims(list(args) + list(kwargs.values()))
            if changed:
                self.recompiles += 1
                extra = dict(self._shapes)
                for name, axis in changed:
                    extra.setdefault(name, {})[axis] = f"{name}_{axis}"
                self._build(args, kwargs, extra=extra)
        return self._compiled(*args, **kwargs)

    def _changed_dims(self, values: list) -> list[tuple[str, int]]:
        out = []
        for i, (v, example) in enumerate(zip(values, self._examples)):
            shape = getattr(v, "shape", None)
            if shape is None or len(shape) != len(example):
                continue  # a rank change is the compiled model's InputError to report
            for axis, (n, want) in enumerate(zip(shape, example)):
                if want is not None and n != want:
                    out.append((self._names[i], axis))
        return out

    @property
    def compiled(self):
        """The CompiledModule behind this (None before the first compile)."""
        return self._compiled


def decorate(target: Any, compile_fn: Callable, options: dict, args, kwargs):
    """What @cuvil.compile makes of a function, a module instance or an nn.Module class."""
    eager = args is not None or kwargs is not None
    if isinstance(target, type):
        if not issubclass(target, torch.nn.Module):
            raise TypeError(f"@cuvil.compile decorates functions and nn.Module classes, not {target.__name__}")
        return _module_class(target, compile_fn, options, args, kwargs)
    lazy = LazyCompiled(target, compile_fn, options)
    if eager:
        lazy.compile(*_as_tuple(args), **(kwargs or {}))
    return lazy


def _as_tuple(args) -> tuple:
    if args is None:
        return ()
    return args if isinstance(args, (tuple, list)) else (args,)


def _module_class(cls, compile_fn, options, args, kwargs):
    """A subclass whose instances run compiled: each instance compiles at its first call (or at construction,
    given example inputs), in eval mode."""

    class Compiled(cls):
        def __call__(self, *a, **k):
            if self.__dict__.get("_cuvil_capturing"):  # torch.export / TorchScript tracing the original
                return super().__call__(*a, **k)
            lazy = self.__dict__.get("_cuvil_lazy")
            if lazy is None:
                lazy = self.__dict__["_cuvil_lazy"] = LazyCompiled(self, _capturing(self, compile_fn), options)
            return lazy(*a, **k)

        def compile(self, *a, **k):
            """Compiles this instance now for inputs like these."""
            lazy = LazyCompiled(self, _capturing(self, compile_fn), options)
            self.__dict__["_cuvil_lazy"] = lazy.compile(*a, **k)
            return self

    Compiled.__name__ = cls.__name__
    Compiled.__qualname__ = cls.__qualname__
    Compiled.__module__ = cls.__module__
    Compiled.__doc__ = cls.__doc__
    if args is not None or kwargs is not None:
        init = Compiled.__init__

        def eager_init(self, *a, **k):
            init(self, *a, **k)
            self.compile(*_as_tuple(args), **(kwargs or {}))

        Compiled.__init__ = eager_init
    return Compiled


def _capturing(module: torch.nn.Module, compile_fn: Callable) -> Callable:
    """compile_fn for a decorated module: while it captures, calls run the original forward."""
    def compile_module(_fn, *a, **k):
        module.__dict__["_cuvil_capturing"] = True
        try:
            return compile_fn(module, *a, **k)
        finally:
            module.__dict__["_cuvil_capturing"] = False
    return compile_module
