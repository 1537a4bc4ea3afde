"""The compiled-model cache: cuvil.compile and cuvil.load_onnx look here before compiling.

An entry is a ``.cuv`` artifact (cuvil.artifact) and a JSON record of its key's named parts, in
``$CUVIL_CACHE_DIR/models`` (default ``$XDG_CACHE_HOME/cuvil/models``, else ``~/.cache/cuvil/models``, beside the
per-kernel JIT cache's ``*.cuvk`` files; ``CUVIL_CACHE_DIR=off`` disables both, ``CUVIL_MODEL_CACHE=off`` or
``cache=False`` this one alone). The key is a hash over the parts;
each part is a hash of one thing the compiled code depends on, so a miss names what differs from the nearest
entry (``CUVIL_LOG=cache`` logs every hit and miss with its reason; ``cuvil cache explain MODEL``):

- PyTorch models (nn.Module) are keyed *before* capture, since capture (TorchScript, torch.export) is most of a
  compile: ``source`` (the files defining the model's classes and the byte code of their methods and of the
  user functions they reach), ``module_state`` (each submodule's path, class, training flag and plain
  attributes), ``weights`` (parameters, buffers and tensor attributes: names, dtypes, shapes, contents),
  ``inputs`` (the examples' names, dtypes and shapes, dynamic dims and their ranges), ``config``, ``version``
  (Cuvil's version, git revision, the front end's Python sources and the native libraries' identity), ``deps``
  (torch, NumPy, LLVM, oneDNN, Python) and ``cpu`` (the host CPU and features the code is generated for). A model
  captured by torch.jit.trace (its control flow frozen to the example's path) also records the examples' values,
  and a hit needs the same ones. Functions, ScriptModules and modules with hooks are not cached (logged).
- ONNX files are keyed by ``model_file`` (the file's contents) with ``config``, ``version``, ``deps`` and ``cpu``;
  a file with external data is keyed after import by ``graph`` (the optimized graph without source locations)
  and ``graph_weights`` (its constants) instead. Every entry records these two, which tell a weights-only change
  apart from a graph change.

A hit loads the artifact (mapped, its kernels as machine code) and defers preparation (oneDNN primitives, packed
weights) to the first call. A miss compiles; a weights-only change still reuses the generated kernels' machine
code from the per-kernel JIT cache (no LLVM code generation again). Writes are atomic (artifact under a fresh
name, then the record renamed into place: a record always names a complete artifact), concurrent processes
are safe (the last writer's entry wins, whole), a damaged entry (unreadable record, missing, truncated or
corrupt artifact) is a miss with a :class:`CacheWarning` and is replaced, and the directory is kept under
``CUVIL_MODEL_CACHE_MAX_MB`` (default 4096) by removing the entries used least recently.

The package: ``store`` (directory, trust, records, prune), ``hashing``, ``keys`` (the parts and explanations) and
``lookup`` (what the front ends call).
"""
# The package's names, as the front ends, the CLI and the tests use them.
from .hashing import _bytes_hash, _file_hash, _h, _mapped_hash  # noqa: F401
from .keys import (PART_MEANING, PART_ORDER, NotCacheable, _build_parts, differing,  # noqa: F401
                   explain_parts, graph_parts, key_of, onnx_parts, torch_parts)
from .lookup import Lookup, explain_key, explain_torch, onnx_lookup, torch_lookup  # noqa: F401
from .store import (DEFAULT_MAX_MB, RECORD_FORMAT, RECORD_VERSION, CacheWarning, _read_record,  # noqa: F401
                    _records, _refused, _remove, _trusted, _usable_dir, enabled, entries, log, max_bytes,
                    models_dir, prune, root_dir, verify_entry)
