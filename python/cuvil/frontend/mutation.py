"""In-place writes in a TorchScript graph: which tensors each write reaches, and what converting it means.

TorchScript's own pass (_jit_pass_remove_mutation) makes pure the writes it can prove nothing else sees; the
writes left are analysed here, before the graph is converted, from each op's schema (`Tensor(a!) self`: written;
`-> Tensor(a)`: shares memory with the input annotated `(a)`):

- a write that may reach a graph input, or a module's parameter or buffer (directly, through a view such as
  `x[0].add_(1)` / `x.view(-1).relu_()`, or as an `out=` argument), is refused with ModelRefused naming the op
  and its line. Eager PyTorch writes into the caller's tensor (or the module's state); a compiled model returns
  fresh outputs and never writes to its inputs, so compiling it would silently give other results. torch.export
  refuses the same programs (export.convert_program), so both capture paths agree.
- a write to an intermediate tensor is modelled: the op's result becomes the tensor's new value for every later
  reader, and the views taken of it earlier (view, select, slice, transpose, ...) are taken again from the new
  value. A write inside an If branch or a Loop body to a tensor defined outside becomes an output of the branch /
  a value the loop carries (torchscript.py does that part).
- writes Cuvil's TorchScript capture cannot model exactly — through a view of an intermediate, or to a tensor
  that may or may not share memory with another (reshape, contiguous, to, chunk: which is up to strides and
  dtypes at run time) — are an UnsupportedError naming the op and line; cuvil.compile then tries torch.export,
  whose functionalization models them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ..errors import CompileError, UnsupportedError
from .context import SCALAR_TYPE_TO_TORCH, location as file_line

class ModelRefused(CompileError):
    """The model does something a compiled model cannot reproduce (it writes in place to its inputs or state, as
    eager PyTorch writes into the caller's tensors): no capture path may compile it, so cuvil.compile's
    automatic capture does not try another."""


# Ops whose output is always a view of their first input, recomputable from it (no copies, whatever the strides).
PURE_VIEWS = frozenset({
    "aten::view", "aten::view_as", "aten::select", "aten::slice", "aten::narrow", "aten::transpose",
    "aten::permute", "aten::t", "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::expand_as",
    "aten::detach", "aten::alias", "aten::movedim", "aten::moveaxis", "aten::swapaxes", "aten::swapdims",
    "aten::unflatten", "aten::diagonal", "aten::unfold", "aten::numpy_T", "aten::mT",
})
# In-place ops that change a tensor's shape or strides, not its data.
METADATA_WRITES = frozenset({
    "aten::transpose_", "aten::t_", "aten::unsqueeze_", "aten::squeeze_", "aten::swapaxes_", "aten::swapdims_",
    "aten::as_strided_", "aten::resize_", "aten::resize_as_",
})

_LETTERS_RE = re.compile(r"\(([a-z]+)(?:\s*->\s*\*)?!?\)")


def _location(node) -> str:

    file, line = file_line(node)
    return f"{file}:{line}" if file else "<unknown location>"


def _has_tensor(t) -> bool:
    """Whether a TorchScript type is or holds tensors (traced graphs type tensors as Float(3, ...))."""
    if t.kind() == "TensorType":
        return True
    return any(_has_tensor(c) for c in t.containedTypes())


@dataclass
class _Schema:
    arg_letters: list           # per argument: the alias set letters it carries, '*' for wildcards
    ret_letters: list           # per return
    writes: list                # indices of arguments the op writes (tensors only)
    kwarg_only_writes: list     # of those, the out= arguments
    container_writes: list      # arguments written that are not tensors (lists: append, +=)
    escapes: list               # arguments that end up inside a container (`t(c -> *) el`)


_SCHEMAS: dict[str, Optional[_Schema]] = {}


def _schema(node) -> Optional[_Schema]:
    text = node.schema()
    if text == "(no schema)":
        return None
    if text in _SCHEMAS:
        return _SCHEMAS[text]
    try:
        fs = torch._C.parse_schema(text)
    except RuntimeError:
        _SCHEMAS[text] = None
        return None

    def letters(a) -> set:
        ai = a.alias_info
        return set() if ai is None else set(ai.before_set) | set(ai.after_set)

    args = [letters(a) for a in fs.arguments]
    # Containers' element annotations ("Tensor(a)[]") are not in alias_info: read them from the text.
    returns_text = text.split(") -> ", 1)[1] if ") -> " in text else ""
    rets = []
    for r in fs.returns:
        ls = letters(r)
        if not ls and r.type.kind() != "TensorType":
            ls = set(_LETTERS_RE.findall(returns_text))
        rets.append(ls)
    writes = [i for i, a in enumerate(fs.arguments)
              if a.alias_info is not None and a.alias_info.is_write and _has_tensor(a.type)]
    kw = [i for i in writes if fs.arguments[i].kwarg_only]
    containers = [i for i, a in enumerate(fs.arguments)
                  if a.alias_info is not None and a.alias_info.is_write and i not in writes]
    escapes = [i for i, a in enumerate(fs.arguments) if a.alias_info is not None and "*" in a.alias_info.after_set]
    s = _Schema(args, rets, writes, kw, containers, escapes)
    _SCHEMAS[text] = s
    return s


@dataclass
class Write:
    """What converting one in-place node means (torchscript._Converter applies it)."""
    node: Any
    written: int                 # the input the node writes
    out_argument: bool           # an out= argument (dropped from the converter's inputs)
    rebind: list                 # TorchScript values that are the written tensor itself: they take the result
    views: list                  # (value, chain of view nodes from the written tensor): taken again from it
    metadata: bool = False       # the op changes shape/strides only


@dataclass
class _Info:
    roots: set                   # the base values (or external names) this value may share memory with
    chain: Optional[tuple]       # view nodes from its one root; () for the root itself; None: opaque alias
    block: Any = None            # the block defining it


@dataclass
class Analysis:
    writes: dict = field(default_factory=dict)        # node -> Write
    # If / Loop node -> values written inside it that are defined outside: a branch's outputs, a loop's carried
    outer_writes: dict = field(default_factory=dict)


class _External:
    """A root outside the graph: an input, parameter or buffer, named for messages."""

    def __init__(self, label: str):
        self.label = label

    def __repr__(self):
        return self.label


def analyse(graph, input_labels: list, attribute_label: Callable[[str], str],
            input_dtypes: Optional[list] = None) -> Analysis:
    """Checks and plans the in-place writes of `graph` (inlined and frozen). `input_labels`: per graph input,
    "input 'x'" (None for `self`); `attribute_label(path)`: "parameter 'w'" / "buffer 'b'" for state read
    through prim::GetAttr; `input_dtypes`: per graph input its torch dtype where known (so that `x.float()` of
    a uint8 input is known to be a copy, and of a float one the input itself). Raises ModelRefused or
    UnsupportedError (see the module docstring)."""
    return _Analyser(input_labels, attribute_label, input_dtypes or []).run(graph)


class _Analyser:
    def __init__(self, input_labels, attribute_label, input_dtypes):
        self.input_labels = input_labels
        self.attribute_label = attribute_label
        self.dtypes: dict[Any, Any] = {}  # values -> torch dtype, where known
        self.input_dtypes = input_dtypes
        self.info: dict[Any, _Info] = {}
        self.members: dict[Any, dict] = {}    # root value -> values that may share its memory (ordered)
        self.attr_paths: dict[Any, str] = {}  # module-typed values -> attribute path
        self.externals: dict[str, _External] = {}
        self.blocks: list = []                 # the blocks being walked, outermost first
        self.out = Analysis()
        self.controls: list = []               # (If/Loop node, its block being walked), outermost first

    def run(self, graph) -> Analysis:
        block = graph.block()
        self.blocks.append(block)
        for v, dt in zip(graph.inputs(), self.input_dtypes):
            if dt is not None:
                self.dtypes[v] = dt
        for v, label in zip(graph.inputs(), self.input_labels):
            if label is None:
                self.attr_paths[v] = ""
            elif _has_tensor(v.type()):
                self._root(v, self._external(label))
        self._block(block)
        return self.out

    def _external(self, label: str) -> _External:
        return self.externals.setdefault(label, _External(label))

    # ---- facts about values

    def _root(self, v, root=None) -> None:
        root = v if root is None else root
        self.info[v] = _Info({root}, (), self.blocks[-1])
        self.members.setdefault(root, {})[v] = None

    def _alias(self, v, roots: set, chain: Optional[tuple]) -> None:
        """v may share memory with `roots` (a view along `chain` of its one root, or opaque when None)."""
        if not roots:
            self._root(v)
            return
        self.info[v] = _Info(set(roots), chain, self.blocks[-1])
        for r in roots:
            self.members.setdefault(r, {})[v] = None

    def _roots(self, v) -> set:
        i = self.info.get(v)
        return i.roots if i is not None else set()

    # ---- the walk

    def _block(self, block) -> None:
        for node in block.nodes():
            self._node(node)

    def _node(self, node) -> None:
        kind = node.kind()
        ins, outs = list(node.inputs()), list(node.outputs())
        if kind == "prim::If":
            return self._if(node, outs)
        if kind == "prim::Loop":
            return self._loop(node, ins, outs)
        if kind == "prim::GetAttr":
            path = self.attr_paths.get(ins[0])
            name = node.s("name")
            full = name if not path else f"{path}.{name}"
            if _has_tensor(outs[0].type()):
                self._root(outs[0], self._external(self.attribute_label(full)))
            else:
                self.attr_paths[outs[0]] = full
            return
        schema = _schema(node)
        if schema is not None and schema.writes:
            self._write(node, schema, ins, outs)
            return
        if schema is not None and schema.container_writes and schema.escapes:  # l.append(x): l holds x now
            extra = set().union(*(self._roots(ins[e]) for e in schema.escapes if e < len(ins)))
            for c in schema.container_writes:
                if c < len(ins) and extra:
                    self._alias(ins[c], self._roots(ins[c]) | extra, None)
        tensor_outs = [o for o in outs if _has_tensor(o.type())]
        if not tensor_outs:
            return
        if schema is None:  # prim:: plumbing (lists, tuples, casts): outputs may alias every input
            roots = set().union(*(self._roots(i) for i in ins))
            for o in tensor_outs:
                self._alias(o, roots, None)
            return
        if kind == "aten::to" and self._conversion(node, ins, outs[0]):
            return
        if kind in PURE_VIEWS and len(outs) == 1 and ins and ins[0] in self.info:
            src = self.info[ins[0]]
            if src.chain is not None and len(src.roots) == 1:
                self._alias(outs[0], src.roots, src.chain + (node,))
                return
        for k, o in enumerate(outs):
            if o not in tensor_outs:
                continue
            lets = schema.ret_letters[k] if k < len(schema.ret_letters) else set()
            roots: set = set()
            for i, a in enumerate(ins):
                al = schema.arg_letters[i] if i < len(schema.arg_letters) else set()
                if al and (lets & al or "*" in lets):
                    roots |= self._roots(a)
            self._alias(o, roots, None)

    def _if(self, node, outs) -> None:
        blocks = list(node.blocks())
        for b in blocks:
            self._sub_block(b, [], node)
        local = set()  # values defined inside the branches
        for b in blocks:
            for n in _nodes_in(b):
                local.update(n.outputs())
        per_out = []
        for k, o in enumerate(outs):
            per_out.append(set().union(*(self._roots(list(b.outputs())[k]) for b in blocks))
                           if _has_tensor(o.type()) else None)
        for k, o in enumerate(outs):
            roots = per_out[k]
            if roots is None:
                continue
            shared = any(j != k and r is not None and r & roots for j, r in enumerate(per_out))
            if roots and roots <= local and not shared:
                self._root(o)  # fresh in every branch: a tensor of its own
            else:
                self._alias(o, roots, None)

    def _dtype(self, v):
        if v in self.dtypes:
            return self.dtypes[v]
        try:
            return v.type().dtype()  # (traced graphs carry dtypes)
        except (AttributeError, RuntimeError):
            return None

    def _conversion(self, node, ins, out) -> bool:
        """aten::to returns its input itself when the dtype stays (and copy=False), else a copy: decided where
        both dtypes are known (then True), else left to the general rule (an alias that may or may not be)."""

        try:
            fs = torch._C.parse_schema(node.schema())
        except RuntimeError:
            return False
        args = {a.name: v for a, v in zip(fs.arguments, ins)}
        src = self._dtype(ins[0])

        def const(name):
            v = args.get(name)
            return None if v is None or v.node().kind() != "prim::Constant" else v.toIValue()

        if "other" in args:
            want = self._dtype(args["other"])
        else:
            code = const("dtype")
            want = SCALAR_TYPE_TO_TORCH.get(code) if isinstance(code, int) else code
        if src is None or not isinstance(want, torch.dtype) or ins[0] not in self.info:
            return False
        self.dtypes[out] = want
        if want != src or const("copy") is True:
            self._root(out)  # a copy: a tensor of its own
            return True
        i = self.info[ins[0]]  # the input itself
        self.info[out] = _Info(set(i.roots), i.chain, self.blocks[-1])
        for r in i.roots:
            self.members.setdefault(r, {})[out] = None
        return True

    def _read_after(self, v, node, loops) -> bool:
        """Whether v is read after `node` runs: later in program order, or anywhere at all when a loop around
        `node` does not define v (its next iteration reads it again)."""
        if any(self.info[v].block not in set(_blocks_of(loop)) for loop in loops):
            return bool(v.uses())
        return any(u.user.isAfter(node) for u in v.uses())

    def _sub_block(self, block, param_roots: list, owner) -> None:
        self.blocks.append(block)
        self.controls.append((owner, block))
        try:
            for p, roots in zip(block.inputs(), param_roots):
                if roots is not None:
                    self._alias(p, roots, None)
            self._block(block)
        finally:
            self.blocks.pop()
            self.controls.pop()

    def _loop(self, node, ins, outs) -> None:
        body = next(node.blocks())
        carried_in = ins[2:]
        roots = [set(self._roots(c)) if _has_tensor(c.type()) else None for c in carried_in]
        for _ in range(4):  # until the carried values' aliases stop growing
            self._sub_block(body, [None] + roots, node)
            grown = False
            for k, o in enumerate(list(body.outputs())[1:]):
                if roots[k] is not None and not self._roots(o) <= roots[k]:
                    roots[k] |= self._roots(o)
                    grown = True
            if not grown:
                break
        for o, r in zip(outs, roots):
            if r is not None:
                self._alias(o, r, None)

    # ---- writes

    def _write(self, node, schema: _Schema, ins, outs) -> None:
        kind = node.kind()
        where = _location(node)
        if len(schema.writes) != 1:
            raise UnsupportedError(f"{kind} at {where} writes to {len(schema.writes)} tensors in place; Cuvil's "
                                   f"TorchScript capture models in-place ops that write one")
        w = schema.writes[0]
        target = ins[w]
        info = self.info.get(target)
        if info is None:
            self._root(target)
            info = self.info[target]
        external = sorted((r.label for r in info.roots if isinstance(r, _External)))
        if external:
            how = "" if info.chain == () else (
                f" on a view of it ({', '.join(n.kind() for n in info.chain)})" if info.chain else
                " on a tensor that may share its memory")
            op = kind + (" (its out= argument)" if w in schema.kwarg_only_writes else "")
            raise ModelRefused(f"forward() mutates {', '.join(external)} in place (at {where}) with "
                               f"{op}{how}; a compiled model never writes to its inputs or state: return the new "
                               f"value instead (e.g. `y = x.add(1)` for `x.add_(1)`)")
        metadata = kind in METADATA_WRITES
        in_scope = set(self.blocks)
        loops = [owner for owner, _ in self.controls if owner.kind() == "prim::Loop"]
        rebind, views = [], []
        for root in info.roots:
            for m in self.members.get(root, {}):
                mi = self.info[m]
                if mi.block not in in_scope or m in rebind or any(m is v for v, _ in views):
                    continue  # defined in a block that has ended: nothing reads it any more
                if m == target or (mi.chain is not None and mi.chain == info.chain and mi.roots == info.roots):
                    rebind.append(m)  # the written tensor itself
                elif info.chain == () and mi.chain and not metadata:
                    views.append((m, mi.chain))  # a view of it: taken again from the new value
                elif self._read_after(m, node, loops):
                    # What else sees the write cannot be modelled (it may or may not share memory, or it is the
                    # tensor a written view was taken of): only a tensor nothing reads afterwards is left stale.
                    if info.chain is None:
                        why = (f"writes in place to a tensor that may share memory with another (it comes from "
                               f"{target.node().kind()}, which copies or not depending on strides and dtypes)")
                    elif info.chain:
                        why = (f"writes in place through a view ({', '.join(n.kind() for n in info.chain)}) of "
                               f"another tensor")
                    elif metadata:
                        why = "changes the shape of a tensor that was viewed"
                    else:
                        why = "writes in place to a tensor"
                    sees = "may share that memory" if mi.chain is None or info.chain is None else "sees that memory"
                    raise UnsupportedError(
                        f"{kind} at {where} {why}; the result of {m.node().kind()} at {_location(m.node())} {sees} "
                        f"and is read afterwards, and Cuvil's TorchScript capture does not carry a write to the "
                        f"other tensors that see it (torch.export does: capture='export'). Use the out-of-place op")
        for o in outs:  # the op's result is the written tensor itself
            if _has_tensor(o.type()):
                self.info[o] = _Info(set(info.roots), info.chain, self.blocks[-1])
                for r in info.roots:
                    self.members[r][o] = None
        self.out.writes[node] = Write(node, w, w in schema.kwarg_only_writes, rebind, [v for v in views],
                                      metadata)
        # What an enclosing If must output, or a Loop carry: the values this write changes that are defined
        # outside it.
        for owner, block in self.controls:
            outer = set(self.blocks[:self.blocks.index(block)])
            changed = self.out.outer_writes.setdefault(owner, [])
            for v in rebind + [v for v, _ in views]:
                if self.info[v].block in outer and v not in changed:
                    changed.append(v)


def _blocks_of(node):
    """The blocks inside a node, nested ones included."""
    for b in node.blocks():
        yield b
        for n in b.nodes():
            yield from _blocks_of(n)


def _nodes_in(block):
    for n in block.nodes():
        yield n
        for b in n.blocks():
            yield from _nodes_in(b)


