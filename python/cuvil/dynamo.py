"""torch.compile(model, backend="cuvil"): a Dynamo backend that compiles each captured FX graph with Cuvil.

Installed with the package, the backend is found through the `torch_dynamo_backends` entry point; `import
cuvil` also registers it (for PYTHONPATH use). Dynamo hands the backend a graph of torch-level calls whose
inputs are the user's tensors, the module's parameters and buffers (inlined modules), and size symbols; the
backend exports that graph to ATen with the parameters as constants, the user tensors as inputs and every dim
that Dynamo made symbolic kept symbolic, so that a new batch size or sequence length runs the same compiled
model without a recompile. Graph breaks run eagerly between compiled pieces, as Dynamo arranges them.

Inference only: outputs carry no autograd history. A graph Cuvil cannot compile runs eagerly (with a
CaptureWarning naming the reason). A parameter or buffer changed in place after compiling (an optimizer step,
`load_state_dict`) is noticed by its version counter at the next call, which first swaps the new values into the
engine (update_weights' in-place path: the passes run again, no new capture); where the conversion read the values
themselves, the graph compiles again instead (`CUVIL_LOG=weights` says why).
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .errors import CaptureWarning, CompileError


class _UserGraph(torch.nn.Module):
    """The Dynamo graph as a function of the user's tensors alone: parameters and buffers held as buffers of
    this module (export lifts them under their names, so each becomes a named constant update_weights can
    replace), size symbols read off the tensors they came from."""

    def __init__(self, gm: torch.fx.GraphModule, slots: list):
        super().__init__()
        self.gm = gm
        self.slots = slots  # per graph input: ("user", i) | ("const", tensor) | ("size", user index, axis)
        for i, s in enumerate(slots):
            if s[0] == "const":
                self.register_buffer(_state_name(i), s[1])

    def forward(self, *users):
        args = []
        for i, s in enumerate(self.slots):
            if s[0] == "user":
                args.append(users[s[1]])
            elif s[0] == "const":
                args.append(getattr(self, _state_name(i)))
            else:
                args.append(users[s[1]].size(s[2]))
        return self.gm(*args)


def _state_name(slot: int) -> str:
    return f"state_{slot}"


def _placeholder_values(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("example_value", n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]


def _is_state(name: str, value) -> bool:
    """Whether a graph input is module state (a parameter or buffer Dynamo lifted), not a user tensor."""
    if isinstance(value, torch.nn.Parameter):
        return True
    return "_buffers_" in name or "_parameters_" in name


def _slots(gm: torch.fx.GraphModule, example_inputs: list) -> tuple[list, list, list]:
    """How each graph input is fed (see _UserGraph), the user tensors' examples, and their symbolic axes."""
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    fakes = _placeholder_values(gm)
    slots, users, dynamic = [], [], []
    pending_sizes = []
    for name, ex, fake in zip(names, example_inputs, fakes):
        if isinstance(ex, torch.Tensor) and _is_state(name, ex):
            slots.append(("const", ex.detach()))
        elif isinstance(ex, torch.Tensor):
            slots.append(("user", len(users)))
            users.append(ex)
            dynamic.append({a for a, d in enumerate(getattr(fake, "shape", ())) if isinstance(d, torch.SymInt)})
        elif isinstance(ex, (torch.SymInt, int)):
            pending_sizes.append((len(slots), fake if fake is not None else ex))
            slots.append(None)
        else:
            raise CompileError(f"graph input '{name}' is a {type(ex).__name__}")
    for pos, sym in pending_sizes:  # a size input is a dim of some user tensor: find which
        found = None
        for slot, fake in zip(slots, fakes):
            if slot is None or slot[0] != "user" or fake is None:
                continue
            for axis, d in enumerate(fake.shape):
                if isinstance(d, torch.SymInt) and isinstance(sym, torch.SymInt) and d.node.expr == sym.node.expr:
                    found = ("size", slot[1], axis)
                    break
            if found:
                break
        if found is None:
            raise CompileError("a size the graph takes as an input is no dim of its tensor inputs")
        slots[pos] = found
    return slots, users, dynamic


def cuvil_backend(gm: torch.fx.GraphModule, example_inputs: list, **options) -> Callable:
    """The Dynamo backend: compiles `gm` with Cuvil, or returns it (eager) when Cuvil cannot, with a warning.

    options (torch.compile(..., options={...})): threads."""
    from .frontend import export as export_frontend

    # torch.compile hands its options dict over as one keyword, options=...; a direct call may pass threads=
    if isinstance(options.get("options"), dict):
        options = {**options["options"], **{k: v for k, v in options.items() if k != "options"}}
    unknown = set(options) - {"threads"}
    if unknown:
        raise ValueError(f"torch.compile(backend='cuvil'): unknown options {sorted(unknown)} (known: threads)")
    threads = options.get("threads")
    try:
        slots, users, dynamic = _slots(gm, example_inputs)
        module = _UserGraph(gm, slots)
        shapes = tuple({a: torch.export.Dim.DYNAMIC for a in axes} or None for axes in dynamic)
        # Export runs its own fake tracing: outside Dynamo's fake mode and tracing context.
        with torch.no_grad(), unset_fake_temporarily(), torch._guards.tracing(None):
            # forward(*users): export sees one tuple argument, so the spec is a tuple within a tuple
            # (guards as run-time asserts: export's guard function cannot name the inputs of forward(*users))
            ep = torch.export.export(module, tuple(users), dynamic_shapes=(shapes,) if any(shapes) else None,
                                     strict=False, prefer_deferred_runtime_asserts_over_guards=True)
        ep = export_frontend.functionalize(ep)
        state_keys = [_state_name(i) for i, s in enumerate(slots) if s[0] == "const"]
        compiled = export_frontend.convert_program(ep, threads=threads, state_keys=state_keys)
    except Exception as e:  # noqa: BLE001 - whatever stops Cuvil, the graph still runs (eagerly)
        warnings.warn(f"torch.compile(backend='cuvil'): this graph runs eagerly: {_first_line(e)}",
                      CaptureWarning, stacklevel=2)
        return gm.forward
    user_positions = [i for i, s in enumerate(slots) if s[0] == "user"]
    state = [(_state_name(i), s[1]) for i, s in enumerate(slots) if s[0] == "const"]
    versions = [t._version for _, t in state]
    recompiled: list[Any] = []
    lock = threading.Lock()  # one caller swaps the changed weights in; the others wait for it

    def run(*args):
        if recompiled:
            return recompiled[0](*args)
        if any(t._version != v for (_, t), v in zip(state, versions)):
            with lock:
                changed = [i for i, ((_, t), v) in enumerate(zip(state, versions)) if t._version != v]
                if changed and not recompiled and not _swap_in(compiled, state, changed, versions):
                    recompiled.append(cuvil_backend(gm, list(args), **options))
            if recompiled:
                return recompiled[0](*args)
        out = compiled(*[args[i] for i in user_positions])
        return out

    run._cuvil_module = compiled  # for tests and introspection
    return run


def _swap_in(compiled, state: list, changed: list, versions: list) -> bool:
    """Replaces the engine's constants of the state entries changed in place (positions `changed` of `state`,
    whose `versions` are brought up to date) with their current values; False where the conversion read some
    entry's values, so that only compiling again is right."""
    from .frontend.state import log_weights
    from .weights import as_array

    constants = getattr(compiled, "_state_map", None)
    problem = getattr(compiled, "_state_problem", "the capture did not keep the weights apart")
    if constants is None or problem is not None:
        log_weights(f"torch.compile(backend='cuvil'): a weight changed in place; the graph compiles again: {problem}")
        return False
    for i in changed:  # (read before the values: a change while they are copied shows at the next call)
        versions[i] = state[i][1]._version
    updates = [(constants[state[i][0]], as_array(state[i][0], state[i][1])) for i in changed
               if state[i][0] in constants]  # (an entry the graph does not read has no constant)
    if updates:
        compiled._model.update_weights(updates, False)
    return True


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)


def register() -> None:
    """Registers the backend under the name "cuvil" (a no-op when the entry point already did)."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "cuvil" not in _BACKENDS or _BACKENDS["cuvil"] is None:
        register_backend(name="cuvil")(cuvil_backend)
