"""CompiledModule: a compiled model you call like the original one, and load_onnx."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from . import _C
from .errors import CompileError, InputError, RunCancelled, RunLimitExceeded, compile_error  # noqa: F401 (documented here)

try:  # torch is optional: ONNX models run without it
    import torch
except ImportError:  # pragma: no cover
    torch = None

# NumPy dtype kinds the core accepts: bool, signed and unsigned ints, floats.
_NUMERIC_KINDS = frozenset("biuf")
# The same as native-endian dtypes: an array of one of these that is aligned and C-contiguous goes to the core as
# it is, after three cheap checks (the per-call path of small models; the general checks cost ~1 µs).
_NATIVE_NUMERIC_DTYPES = frozenset(np.dtype(c) for c in "?bhilqBHILQefd")
# torch dtypes whose .numpy() view the core reads as they are (bf16 travels as uint16 bits).
_PLAIN_TORCH_DTYPES = frozenset() if torch is None else frozenset({
    torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
    torch.bool})


# The precisions cuvil.compile and cuvil.load_onnx take (the core's parse_precision takes the same names).
PRECISIONS = ("fp32", "bf16", "int8", "auto")  # auto: per node, within an accuracy budget (auto_precision.py)


def check_options(precision: str, device: str, threads: Optional[int], unknown: dict,
                  names: str = "precision, device, threads") -> None:
    """Validates the compile options shared by cuvil.compile and cuvil.load_onnx (`names`: the caller's options,
    for the message about unknown ones)."""
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))} "
                        f"(the options are {names})")
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: precision must be one of "
                         f"{', '.join(map(repr, PRECISIONS))}")
    if device != "cpu":
        raise ValueError(f"device {device!r} is not available yet (only 'cpu')")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")


def _check_limits(timeout: Optional[float], max_loop_iterations: Optional[int]) -> tuple[float, int]:
    """The run limits as the core takes them (0: none), validated."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0 or timeout > 1e9):
        raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    if max_loop_iterations is not None and (isinstance(max_loop_iterations, bool)
                                            or not isinstance(max_loop_iterations, int) or max_loop_iterations < 1):
        raise ValueError(f"max_loop_iterations must be a positive int or None, got {max_loop_iterations!r}")
    return float(timeout or 0.0), int(max_loop_iterations or 0)


def _to_array(x: Any, name: str, expected_type: str) -> tuple[np.ndarray, bool]:
    """An aligned, native-endian NumPy view of `x` and whether `x` was a torch tensor. Views share memory with
    `x`, strided ones included (the engine copies a non-contiguous input once, into a buffer its plan keeps); a
    copy is made here only when the layout requires one (misaligned, byte-swapped, strides of partial
    elements)."""
    if type(x) is np.ndarray and x.dtype in _NATIVE_NUMERIC_DTYPES:
        flags = x.flags
        if flags.aligned and flags.c_contiguous:
            return x, False
    if torch is not None and isinstance(x, torch.Tensor):
        if not x.is_cpu:
            raise InputError(f"input '{name}' is on {x.device}; the CPU backend needs CPU tensors")
        t = x.detach() if x.requires_grad else x  # (the cheap checks first: this is the per-call path)
        if t.dtype not in _PLAIN_TORCH_DTYPES:
            if t.dtype == torch.bfloat16:
                if not expected_type.startswith("bf16"):
                    raise InputError(f"input '{name}': expected dtype {expected_type.split('[')[0]}, got bf16")
                return t.contiguous().view(torch.int16).numpy().view(np.uint16), True
            raise InputError(f"input '{name}': unsupported dtype {t.dtype}")
        if t.is_neg():  # a lazy negated view (torch._neg_view): materialize it
            t = t.resolve_neg()
        return t.numpy(), True  # a strided view stays one
    if isinstance(x, (np.ndarray, np.generic)):
        a = np.asarray(x)
        if a.dtype.kind in "USO":  # strings (str, bytes or objects holding them): the engine copies their text
            if not expected_type.startswith("str"):
                raise InputError(f"input '{name}': expected dtype {expected_type.split('[')[0]}, got strings "
                                 f"({a.dtype})")
            return a, False
        if a.dtype.kind not in _NUMERIC_KINDS or a.dtype.itemsize > 8:  # (float128 has kind 'f' too)
            raise InputError(f"input '{name}': unsupported dtype {a.dtype}")
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        if not a.flags.aligned or any(st % a.itemsize for st in a.strides):
            a = np.ascontiguousarray(a).copy()  # NumPy allocations are aligned
        return a, False
    raise TypeError(f"input '{name}' must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")


def _to_torch(a: np.ndarray, cuvil_type: str):
    """A torch view of an output array (shares memory; the array's base keeps Cuvil's buffer alive)."""
    if cuvil_type.startswith("str"):  # torch has no strings: an object array of str
        return a
    if cuvil_type.startswith("bf16"):  # bf16 arrives as uint16 bits, which torch 1.13 cannot wrap directly
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if a.dtype in (np.uint16, np.uint32, np.uint64):  # no such torch dtypes: the array itself
        return a
    return torch.from_numpy(a)


class DimBound(NamedTuple):
    """A range a symbolic input dim must lie in (torch.export.Dim's min/max), checked on every call."""
    input: int             #: the input's position
    axis: int
    symbol: str
    lo: Optional[int]      #: inclusive; None: no lower bound
    hi: Optional[int]      #: inclusive; None: no upper bound


class ProfileRow(NamedTuple):
    """One kernel's time in a profiled run."""
    op: str        #: Cuvil op name ("Conv", "MatMul", ...)
    location: str  #: where the node came from: Python "file:line", or an ONNX node name
    ms: float      #: milliseconds spent in the kernel
    impl: str = ""      #: the kernel that ran: "onednn:brgconv:avx512_core", "jit:Add+Relu:...", "ref:Gather"
    fallback: str = ""  #: why a faster kernel was passed over (empty when none was)
    nested: int = 0     #: rows just before this one that ran inside it (a fused body op by op); their time is its
    stack: str = ""     #: the user's Python call chain ("test.py:40 in test -> model.py:12 in forward"), if known


class Profile:
    """The result of CompiledModule.profile: per-node kernel times in execution order (nodes inside If/Loop
    regions included, once per execution) and totals per op. ``str(profile)`` is a readable table."""

    def __init__(self, rows: Sequence[ProfileRow], report: Optional[Callable[[int], str]] = None):
        self.nodes: list[ProfileRow] = list(rows)
        self._make_report = report  # iters -> the report's JSON text (src/report/profile_report.h)
        self._report: Optional[str] = None

    # ---- the report: HTML, JSON, Chrome trace
    def report(self, iters: int = 10) -> dict:
        """The profile report (a "cuvil-profile" version 1 document): ``iters`` more profiled runs and as many
        unprofiled ones on the same inputs give each kernel's median and p90 time, its implementation, fallback
        reason, shapes, FLOPs, bytes, rates and share of this machine's roof, a fused kernel's IR nodes with their
        source lines, the end-to-end latency and the time no kernel accounts for. Measured once, then kept."""
        return json.loads(self._report_json(iters))

    def _report_json(self, iters: int = 10) -> str:
        if self._report is None:
            if self._make_report is None:
                raise ValueError("this Profile was not made by CompiledModule.profile: it has no report")
            self._report = self._make_report(iters)
        return self._report

    def to_json(self, path: "str | os.PathLike", iters: int = 10) -> None:
        """Writes the report's JSON (``cuvil profile --diff a.json b.json`` compares two)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._report_json(iters))

    def to_html(self, path: "str | os.PathLike", iters: int = 10) -> None:
        """Writes the report as one self-contained HTML page (opens offline): summary, sortable kernel table,
        roofline against this machine's measured roofs, time per op, fused kernels' IR nodes and source lines."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(_C.report_html(self._report_json(iters)))

    def to_chrome_trace(self, path: "str | os.PathLike", iters: int = 10) -> None:
        """Writes the report's first profiled run as Chrome trace JSON (Perfetto, chrome://tracing)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(_C.chrome_trace(self._report_json(iters)))

    def top_level(self) -> list[bool]:
        """Per row: whether it ran at the top (not inside another row's kernel, whose time holds its own)."""
        top = [True] * len(self.nodes)
        for i, r in enumerate(self.nodes):
            covered, j = r.nested, i - 1
            while covered > 0 and j >= 0:  # (`nested` counts every row run inside it, grandchildren too)
                top[j] = False
                covered -= 1
                j -= 1
        return top

    @property
    def total_ms(self) -> float:
        """The sum of all rows' times (excludes the Python call and input validation). A row that ran inside
        another (see ``nested``) counts in both: ``kernel_ms`` counts each kernel once."""
        return sum(r.ms for r in self.nodes)

    @property
    def kernel_ms(self) -> float:
        """The sum of the top-level rows' times: each kernel counted once (a fused body run op by op, a Loop's
        body, is inside the time of the node that ran it)."""
        return sum(r.ms for r, top in zip(self.nodes, self.top_level()) if top)

    def by_op(self) -> dict[str, tuple[float, int]]:
        """{op: (total ms, number of kernel runs)}, slowest op first."""
        acc: dict[str, list] = {}
        for r in self.nodes:
            e = acc.setdefault(r.op, [0.0, 0])
            e[0] += r.ms
            e[1] += 1
        return {op: (ms, n) for op, (ms, n) in sorted(acc.items(), key=lambda kv: -kv[1][0])}

    def table(self, top: Optional[int] = None) -> str:
        """The per-node table (time, share, op, location) followed by totals per op. `top` keeps only the slowest
        `top` nodes in the first part."""
        total = self.total_ms or 1e-12
        rows = self.nodes if top is None else sorted(self.nodes, key=lambda r: -r.ms)[:top]
        width = max([len(r.op) for r in self.nodes] + [10])
        lines = [f"{'ms':>10} {'share':>7}  {'op':<{width}}  location"]
        for r in rows:
            lines.append(f"{r.ms:10.4f} {100 * r.ms / total:6.2f}%  {r.op:<{width}}  {_short_location(r.location)}")
        if top is not None and top < len(self.nodes):
            lines.append(f"{'':>10} {'':>7}  ({len(self.nodes) - top} faster nodes not shown)")
        lines.append("")
        lines.append(f"{'ms':>10} {'share':>7}  {'op':<{width}}  runs")
        for op, (ms, n) in self.by_op().items():
            lines.append(f"{ms:10.4f} {100 * ms / total:6.2f}%  {op:<{width}}  {n}")
        lines.append(f"{self.total_ms:10.4f} {100.0:6.2f}%  {'total':<{width}}  {len(self.nodes)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<cuvil.Profile {len(self.nodes)} kernel runs, {self.total_ms:.3f} ms>"


def _short_location(loc: str) -> str:
    """Library paths shortened to the package ("torch/nn/modules/conv.py:459"), others relative to the cwd."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in loc:
            return loc.split(marker, 1)[1]
    if loc.startswith(os.sep):
        try:
            rel = os.path.relpath(loc)
            return rel if not rel.startswith("..") else loc
        except ValueError:  # pragma: no cover - other drive on Windows
            return loc
    return loc


class CompiledModule:
    """A compiled model. Call it with the original model's arguments, positionally or by forward()'s parameter
    names: ``compiled(x)``, ``compiled(x=x)``.

    Inputs are torch tensors or NumPy arrays, passed to the engine without copies; views of larger tensors
    (slices, a window of a batch) are accepted as they are: a contiguous one is used in place, a strided one is
    copied once by the engine into a buffer kept with the plan for its shape. Every input is checked before anything runs: count, dtype, rank, static
    dims and the consistency of symbolic dims (a ValueError, :class:`cuvil.InputError`, naming the input).
    Outputs are fresh buffers owned by the caller, returned without copies: torch tensors when any input was a torch
    tensor, NumPy arrays otherwise (bf16 outputs come back to NumPy as uint16 bits), in the original output
    structure (a single tensor, or nested tuples/lists).

    Thread-safe: concurrent calls each run on their own executor from a pool, and the GIL is released while the
    model runs, so several Python threads can run one compiled module at once.

    Long calls can be stopped: Ctrl-C (any signal whose Python handler raises) interrupts a call made on the main
    thread within a few tens of milliseconds, between nodes or loop iterations, as that exception
    (KeyboardInterrupt); :meth:`cancel` stops the calls in progress from another thread
    (:class:`cuvil.RunCancelled`); :meth:`set_limits` bounds each call's time and its loops' iterations
    (:class:`cuvil.RunLimitExceeded`). A single kernel is not interrupted: the check comes when it returns.
    """

    def __init__(self, model: "_C.Model", output_structure: Any = None, *, unflatten=None,
                 dim_bounds: Sequence[DimBound] = ()):
        self._model = model
        # How the flat outputs nest (see frontend.torchscript._output_structure); None: one output unwrapped,
        # several as a tuple. `unflatten` (flat outputs -> the model's own structure) takes precedence.
        self._structure = output_structure
        self._unflatten = unflatten
        self._dim_bounds = tuple(dim_bounds)
        # Cached once: the call path reads them on every call.
        self._input_names = tuple(model.input_names)
        self._input_types = tuple(model.input_types)
        self._output_types = tuple(model.output_types)
        # What an artifact records (cuvil.artifact): the normalized configuration and the source model's file.
        self._config = {"device": "cpu", "opt_level": 1, "precision": "fp32"}
        self._source_path: Optional[str] = None
        self._weights_recipe = None  # (cuvil.weights.TorchRecipe: modules compiled from PyTorch)

    def save(self, path: "str | os.PathLike") -> None:
        """Writes this compiled model as a ``.cuv`` artifact (one file: manifest, optimized graph, weights, source
        map). :func:`cuvil.load` gives it back, in any process, without compiling again."""
        from .artifact import save_module
        save_module(self, path)

    @property
    def input_names(self) -> list[str]:
        """The inputs' names, in call order (forward()'s parameter names, or the ONNX graph's input names)."""
        return list(self._input_names)

    @property
    def input_types(self) -> list[str]:
        """Each input's declared type, e.g. ``"f32[batch, 3, 224, 224]"`` (symbolic dims by name)."""
        return list(self._input_types)

    @property
    def output_names(self) -> list[str]:
        """The flattened outputs' names."""
        return list(self._model.output_names)

    @property
    def output_types(self) -> list[str]:
        """Each flattened output's type as inferred at compile time (dims may be symbolic expressions)."""
        return list(self._output_types)

    def ir(self, elide_large_constants: bool = True) -> str:
        """The compiled graph as Cuvil IR text; large constants (weights) are elided unless asked for."""
        return self._model.ir(elide_large_constants)

    # ---- hot weight swap (cuvil/weights.py, runtime/versioned_model.h)
    def update_weights(self, weights: dict, strict: bool = True) -> int:
        """Replaces the model's weights while it serves, and returns the new :attr:`weights_version`.

        weights: ``{name: tensor}`` (torch tensors or NumPy arrays), named as in the PyTorch ``state_dict`` for
        modules from :func:`cuvil.compile`, as the ONNX initializers for :func:`cuvil.load_onnx` and ``.cuv``
        artifacts of ONNX models (:meth:`weight_names` lists them). strict=True: every weight must be given (the
        full ``state_dict``; for ONNX, every floating-point initializer); strict=False updates a subset.

        The whole set is checked first — unknown names, dtypes, shapes: a :class:`cuvil.InputError` naming every
        problem, and nothing changes. The new version is then built on this thread (the passes run again, so
        BatchNorms fold into the new convolution weights; weights are packed into the kernels' layouts for the
        input shapes served) and published at once: calls in flight finish on the weights they started with, no
        call sees a mix or waits, and the old weights are freed when their last call ends. Thread-safe."""
        from . import weights as _w
        weights = _w.check_mapping(weights)
        if self._weights_recipe is not None:
            return self._weights_recipe.update(self, weights, bool(strict))
        arrays = [(k, _w.as_array(k, v)) for k, v in weights.items()]
        return self._model.update_weights(arrays, bool(strict))

    @property
    def weights_version(self) -> int:
        """The weights version calls starting now run on: 1 as compiled, one more per :meth:`update_weights`."""
        return self._model.weights_version

    def weight_names(self) -> dict:
        """The weights :meth:`update_weights` takes: ``{name: type}`` (e.g. ``"f32[64, 3, 7, 7]"``)."""
        if self._weights_recipe is not None:
            return self._weights_recipe.names()
        return {name: t for name, t, _ in self._model.weights()}

    def call_with_version(self, *args, **kwargs) -> tuple:
        """``(outputs, version)``: a call like ``compiled(*args)``, and the weights version that produced it."""
        arrays, as_torch = self._arrays(args, kwargs)
        try:
            outs, version = self._model.run_versioned(arrays)
        except _C.CheckFailed as e:
            raise model_exception(e) from None
        if as_torch:
            outs = [_to_torch(a, t) for a, t in zip(outs, self._output_types)]
        return self._restructure(outs), version

    def set_limits(self, *, timeout: Optional[float] = None, max_loop_iterations: Optional[int] = None) -> None:
        """Bounds every later call (None: no limit; each call replaces both limits). `timeout`: seconds of wall-clock
        time one call may take. `max_loop_iterations`: iterations one execution of a Loop or Scan node may run (a
        loop whose trip count or condition comes from the data can otherwise run practically forever). A call past
        a limit stops at the next node or loop iteration with :class:`cuvil.RunLimitExceeded`, whose message names
        the node and the limit; the module stays usable."""
        self._model.set_limits(*_check_limits(timeout, max_loop_iterations))

    def cancel(self) -> None:
        """Stops every call of this module running at this moment (made from other threads): each raises
        :class:`cuvil.RunCancelled` at its next node or loop iteration. Calls that start afterwards run normally."""
        self._model.cancel()

    def _arrays(self, args: Sequence[Any], kwargs: dict) -> tuple[list[np.ndarray], bool]:
        names = self._input_names
        if len(args) > len(names):
            raise InputError(f"expected {len(names)} input(s) ({', '.join(names)}), got {len(args)}")
        values = list(args)
        if not args and len(kwargs) == len(names) and all(n in kwargs for n in names):
            values = [kwargs[n] for n in names]  # every input by keyword, nothing else: no checks to make
        elif kwargs or len(args) < len(names):
            for name in names[:len(args)]:
                if name in kwargs:
                    raise InputError(f"input '{name}' given both by position and by keyword")
            missing = [n for n in names[len(args):] if n not in kwargs]
            if missing:
                raise InputError(f"missing input(s): {', '.join(repr(n) for n in missing)} (the model takes "
                                 f"{', '.join(names)})")
            values.extend(kwargs.pop(n) for n in names[len(args):])
            if kwargs:
                raise InputError(f"unknown input(s): {', '.join(sorted(kwargs))} (the model takes "
                                 f"{', '.join(names)})")
        arrays, any_torch = [], False
        for name, t, v in zip(names, self._input_types, values):
            a, is_torch = _to_array(v, name, t)
            arrays.append(a)
            any_torch |= is_torch
        for b in self._dim_bounds:
            n = arrays[b.input].shape[b.axis]
            if (b.lo is not None and n < b.lo) or (b.hi is not None and n > b.hi):
                rng = f"[{b.lo if b.lo is not None else ''}..{b.hi if b.hi is not None else ''}]"
                raise InputError(f"input '{names[b.input]}': dim {b.axis} ({b.symbol}) is {n}, outside the range "
                                 f"{rng} it was compiled for")
        return arrays, any_torch

    def __call__(self, *args, **kwargs):
        """Runs the model; see the class docstring for what goes in and comes out."""
        arrays, as_torch = self._arrays(args, kwargs)
        try:
            outs = self._model.run(arrays)
        except _C.CheckFailed as e:
            raise model_exception(e) from None
        if as_torch:
            outs = [_to_torch(a, t) for a, t in zip(outs, self._output_types)]
        return self._restructure(outs)

    async def run_async(self, *args, **kwargs):
        """``await compiled.run_async(x)``: the call of ``compiled(x)`` as an awaitable for asyncio code (FastAPI,
        Ray Serve handlers). Inputs are checked at once; the model runs on a worker thread of the running loop's
        default executor with the GIL released, and the result is delivered in the caller's loop, which is never
        blocked. Cancelling the awaiting task cancels the run itself: it stops at its next node or loop iteration,
        and the ``asyncio.CancelledError`` reaches the caller once the run has stopped (its executor is free
        again). Other calls of the module are not affected."""
        import asyncio
        import concurrent.futures

        arrays, as_torch = self._arrays(args, kwargs)
        token = _C.CancelToken()
        loop = asyncio.get_running_loop()
        cf = concurrent.futures.Future()

        def work():
            if not cf.set_running_or_notify_cancel():
                return
            try:
                cf.set_result(self._model.run(arrays, token))
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                cf.set_exception(e)

        loop.run_in_executor(None, work)
        try:
            outs = await asyncio.wrap_future(cf)
        except asyncio.CancelledError:
            token.cancel()
            if not cf.cancel():  # already running: wait (without blocking the loop) until it stops
                stopped = asyncio.wrap_future(cf)
                await asyncio.wait([stopped])
                if not stopped.cancelled():
                    stopped.exception()  # (RunCancelled, expected: retrieved so asyncio does not report it)
            raise
        if as_torch:
            outs = [_to_torch(a, t) for a, t in zip(outs, self._output_types)]
        return self._restructure(outs)

    def _restructure(self, outs: list):
        if self._unflatten is not None:
            return self._unflatten(outs)
        if self._structure is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        it = iter(outs)

        def build(s):
            if s == "tensor":
                return next(it)
            if s == "none":
                return None
            kind, items = s
            if kind == "dict":
                return {k: build(v) for k, v in items}
            built = [build(x) for x in items]
            return tuple(built) if kind == "tuple" else built

        return build(self._structure)

    def profile(self, *args, **kwargs) -> Profile:
        """Runs once with these inputs (same rules as a call) and returns a :class:`Profile`: each kernel's time,
        share, op and source location (Python file:line for torch models, node name for ONNX), and totals per op.
        ``print(compiled.profile(x))`` prints the table."""
        arrays, _ = self._arrays(args, kwargs)
        name = getattr(self, "_report_name", "")  # (load_onnx: the file)
        return Profile([ProfileRow(*row) for row in self._model.profile(arrays)],
                       lambda iters: self._model.profile_report(arrays, iters, 1, name))

    def precision_report(self, *args, **kwargs) -> list[dict]:
        """Runs once on these inputs and returns, per node in execution order, what it ran at: ``op``,
        ``location``, ``kernel`` (e.g. "onednn:brg:avx512_core_bf16"), ``precision`` ("fp32" or "bf16") and
        ``reason`` (why a node asked to run in bf16 kept f32: "final output stays f32", "bf16 would run
        onednn:gemm:jit, slower than f32 on this machine", ...; empty where it got what was asked). At int8,
        quantized layers also get ``sqnr`` (their output on these inputs against the fp32 model's, dB) and
        ``input_sqnr`` (their input's quantization on the calibration samples)."""
        arrays, _ = self._arrays(args, kwargs)
        rows = [dict(op=op, location=loc, kernel=kernel, precision=p, reason=reason, _out=out)
                for op, loc, kernel, p, reason, out in self._model.precision_report(arrays)]
        quant = getattr(self, "_quant", None)
        if self._model.precision == "int8":  # per quantized layer: measured SQNR (dB) and calibration's
            from .quantization import layer_sqnr
            sqnr = layer_sqnr(self, arrays)
            layers = quant["layers"] if quant else {}
            for r in rows:
                if r["_out"] in sqnr and r["precision"] == "int8":
                    r["sqnr"] = sqnr[r["_out"]]
                layer = layers.get(r["_out"])
                if layer:
                    r["input_sqnr"] = layer["input_sqnr"]
                    if layer["reason"] and r["precision"] == "fp32":
                        r["reason"] = layer["reason"]
        for r in rows:
            del r["_out"]
        return rows

    def stats(self) -> dict:
        """Counters of the engine behind this module: ``plans_built`` (shape signatures planned; again after an
        eviction), ``plans_cached``, ``plan_evictions``, ``kernel_evictions``, ``kernels_prepared`` (per node
        and shape; once for shape-generic matrix products), ``staged_inputs`` (strided inputs copied in the
        last calls), summed over idle executors; and the process-wide ``generated_kernels_compiled`` (LLVM),
        ``generated_kernels_loaded`` (disk cache) and ``onednn_primitives_created``."""
        out = dict(self._model.stats())
        out.update(_C.compile_counters())
        return out

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {t}" for n, t in zip(self._input_names, self._input_types))
        outs = ", ".join(self._output_types)
        return f"<cuvil.CompiledModule ({ins}) -> ({outs})>"


def model_exception(e: "_C.CheckFailed") -> Exception:
    """The model's own exception for a run-time check it failed (`raise ValueError(...)` under a data-dependent
    condition, an assert, torch._check): the class named by its qualified name when its module is loaded (never
    imported here: the name comes from the model), else RuntimeError; a note says where the check was."""
    module, _, name = e.exception_type.rpartition(".")
    cls = getattr(sys.modules.get(module or "builtins"), name, None)
    exc = None
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(e.message)
        except Exception:  # a constructor that wants more than a message
            exc = None
    if exc is None:
        exc = RuntimeError(f"{e.exception_type}: {e.message}")
    exc.add_note(f"raised by a run-time check of the compiled model{' at ' + e.location if e.location else ''}")
    return exc


class _ModelsPrecision:
    """load_onnx's default precision: the model's own (f32, and int8 where a QDQ model quantizes); see
    docs/decisions/0004-qdq-models-run-int8.md. Not a name users pass: they leave precision out."""

    def __repr__(self) -> str:
        return "the model's"


MODELS_PRECISION = _ModelsPrecision()


def load_onnx(path: "str | os.PathLike", *, precision: "str | _ModelsPrecision" = MODELS_PRECISION, device: str = "cpu",
              threads: Optional[int] = None, timeout: Optional[float] = None,
              max_loop_iterations: Optional[int] = None, cache: Optional[bool] = None, **options) -> CompiledModule:
    """Compiles an ONNX model file into a :class:`CompiledModule`, called with the ONNX graph's inputs in order
    (or by name) and returning its outputs (one array/tensor, or a tuple of them).

    Options are those of :func:`cuvil.compile`: ``precision`` (left out: the model's own — f32, and int8
    on the layers a QDQ model quantizes, QuantizeLinear/DequantizeLinear as onnxruntime's quantize_static and NNCF
    write them, each such layer's reason "int8: QDQ in the model"; "fp32": f32 throughout, a QDQ model's graph
    computed exactly as written; "bf16", "int8", "auto"), ``device`` ("cpu"), ``threads`` (threads of
    oneDNN and Cuvil's kernels; None: all cores); and the run limits of :meth:`CompiledModule.set_limits`:
    ``timeout`` (seconds per call) and ``max_loop_iterations`` (per execution of a Loop/Scan node), None for no
    limit. ``cache``: whether to use the compiled-model cache (cuvil.cache; None: unless CUVIL_CACHE_DIR=off).
    Symbolic dims come from the ONNX model's input shapes. Raises FileNotFoundError for a missing file and
    cuvil.CompileError for an unreadable or unsupported model."""
    calibration, method = options.pop("calibration", None), options.pop("calibration_method", "minmax")
    accuracy = options.pop("accuracy", None)
    # precision="fp32" asked explicitly keeps a QDQ model's own int8 layers f32 (docs/decisions/0004); the
    # default runs them int8. Both compile (and cache) the same graph: the f32 marks are set after.
    exact_fp32 = precision == "fp32"
    precision = "fp32" if precision is MODELS_PRECISION else precision
    check_options(precision, device, threads, options,
                  names="precision, device, threads, timeout, max_loop_iterations, calibration, "
                        "calibration_method, accuracy")
    if (accuracy is not None) != (precision == "auto"):
        raise ValueError("precision='auto' takes accuracy={'metric': ..., 'budget': ..., 'data': [...]}, and "
                         "accuracy is only for precision='auto'")
    if calibration is not None and precision != "int8":
        raise ValueError("calibration is for precision='int8'")
    limits = _check_limits(timeout, max_loop_iterations)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such ONNX file: {path}")
    from . import cache as _cache
    lookup = _cache.onnx_lookup(path, precision=precision, cache=cache) if precision != "auto" else None
    if isinstance(lookup, _cache.Lookup):
        hit = lookup.hit(threads=threads, timeout=timeout, max_loop_iterations=max_loop_iterations)
        if hit is not None:
            hit._source_path = hit._report_name = path
            hit._model.set_onnx_source(path)  # (update_weights: by initializer names, as a fresh load)
            if exact_fp32:
                hit._model.keep_model_int8_in_f32()
            return hit
    try:
        model, input_slots, output_slots = _C.load_onnx_io(path)
        if model is None or any(optional or kind != "tensor" for _, kind, _, optional in input_slots):
            # Sequence or optional inputs: one compile per binding of them (list lengths, Nones) met at call time.
            from .onnx_io import BoundInputsModule

            def finish(m, outs) -> CompiledModule:
                compiled = _finish_onnx(m, path, outs, precision, threads, limits, calibration, method, accuracy)
                if exact_fp32 and compiled._model.keep_model_int8_in_f32():
                    compiled._model.prepare_static()
                return compiled

            def compile_bound(lengths: dict, absent: frozenset) -> CompiledModule:
                bound, _, outs = _C.load_onnx_io(path, 1, lengths, set(absent))
                return finish(bound, outs)
            # (imported with every optional present: the binding of calls that give them all)
            first = None if model is None else finish(model, output_slots)
            return BoundInputsModule(path, input_slots, compile_bound, first)
        if lookup is not None and not isinstance(lookup, _cache.Lookup):  # keyed after import
            lookup = lookup.after_import(model)
            hit = lookup.hit(threads=threads, timeout=timeout, max_loop_iterations=max_loop_iterations)
            if hit is not None:
                hit._source_path = hit._report_name = path
                hit._model.set_onnx_source(path)
                if exact_fp32:
                    hit._model.keep_model_int8_in_f32()
                return hit
        compiled = _finish_onnx(model, path, output_slots, precision, threads, limits, calibration, method, accuracy)
    except _C.Error as e:
        raise compile_error(e, _with_path(path, str(e))) from None
    if lookup is not None:
        lookup.store(compiled)
    if exact_fp32 and compiled._model.keep_model_int8_in_f32():  # (after the cache stored the model as it is)
        compiled._model.prepare_static()
    return compiled


def _finish_onnx(model: "_C.Model", path: str, output_slots: list, precision: str, threads: Optional[int],
                 limits: tuple, calibration: Any, method: str, accuracy: Optional[dict]) -> CompiledModule:
    """The imported ONNX model set up as load_onnx's options say, calibrated or quantized where they ask, and
    prepared when its shapes are fixed."""
    from .onnx_io import output_structure
    if threads is not None:
        model.set_threads(threads)
    if precision not in ("fp32", "int8", "auto"):
        model.set_precision(precision)
    model.set_limits(*limits)
    compiled = CompiledModule(model, output_structure(output_slots))
    if precision == "int8":
        # A QDQ model carries its own quantization (its nodes' hints); a plain one is calibrated here.
        from .quantization import quantize
        if calibration is not None or method == "dynamic":
            quantize(compiled, calibration, method=method)
        elif any(t[5] for t in model.quant_targets()):
            model.set_precision("int8")
            compiled._config = dict(compiled._config, precision="int8")
        else:
            raise ValueError("precision='int8' needs calibration=[input samples] (or calibration_method="
                             "'dynamic') for a model that is not quantized (QDQ) already")
    if precision == "auto":
        from .auto_precision import choose
        choose(compiled, accuracy)
    # A model with fixed input shapes is prepared (plan, kernels, packed weights) now, not at the first call.
    model.prepare_static()
    compiled._source_path = path
    compiled._report_name = os.fspath(path)
    return compiled


def _with_path(path: str, message: str) -> str:
    """The message of an error about the model file at `path`, naming the path once: the importer already
    starts its messages with it (and file errors quote it); later stages (verification, planning) do not."""
    if message.startswith(f"{path}:") or f"'{path}'" in message:
        return message
    return f"{path}: {message}"
