"""A Ray Serve deployment of a Cuvil model: each replica loads a ``.cuv`` artifact (or compiles an ONNX file, or
calls a factory that compiles a PyTorch model) once, and answers KServe v2 JSON requests, batched across requests
with ``@serve.batch`` (rows counted, not requests; one concatenated run per input signature, outputs split back).
The model runs with ``CompiledModule.run_async``, so a replica's event loop is never blocked.

    serve run deploy/ray/serve_config.yaml                     # replicas and autoscaling from the file, or
    serve run cuvil.serving.ray:app_builder model=/models/mlp.cuv

    from cuvil.serving.ray import CuvilDeployment
    app = CuvilDeployment.options(num_replicas=2).bind("/models/mlp.cuv", name="mlp", max_batch_size=32)
    serve.run(app)                      # POST /v2/models/mlp/infer {"inputs": [{"name": ..., "data": ...}]}

HTTP routes under the application's route prefix: ``GET /v2/health/live``, ``GET /v2/health/ready``,
``GET /v2/models/<name>`` (metadata), ``POST /v2/models/<name>/infer``. A deployment handle can call
``infer(body)`` with the same JSON object. Errors answer ``{"error": message}`` with status 400 (bad request),
404 (unknown model or route) or 500 (the model failed).
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Optional

from ray import serve

from . import v2


def _load(model: Optional[str], factory: Optional[str], threads: Optional[int]):
    import cuvil
    if factory:  # "package.module:function" returning a CompiledModule (e.g. one that calls cuvil.compile)
        mod, _, fn = factory.partition(":")
        compiled = getattr(importlib.import_module(mod), fn)()
        if not isinstance(compiled, cuvil.CompiledModule):
            raise TypeError(f"factory {factory} returned {type(compiled).__name__}, not a cuvil.CompiledModule")
        return compiled
    if not model:
        raise ValueError("give the model file (.cuv or .onnx) or a factory 'module:function'")
    if model.endswith(".onnx"):
        return cuvil.load_onnx(model, threads=threads)
    return cuvil.load(model, threads=threads)


def _replica_cpus() -> Optional[int]:
    """The CPUs Ray gave this replica (its ray_actor_options num_cpus): the threads each run uses."""
    try:
        import ray
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
        return max(1, int(round(cpus))) if cpus else None
    except Exception:  # noqa: BLE001 - outside a Ray actor
        return None


@serve.deployment(name="CuvilDeployment", ray_actor_options={"num_cpus": 1}, max_ongoing_requests=128)
class CuvilDeployment:
    """One replica of a Cuvil model. `model`: a ``.cuv`` (or ``.onnx``) path readable by every replica;
    `factory`: instead, "module:function" returning a ``cuvil.CompiledModule``. `name` (default: the file's stem)
    and `version` are what the v2 routes and responses use. `threads`: threads per run (default: the replica's
    num_cpus). `max_batch_size` rows per run across requests (1: no batching), `batch_wait_timeout_s`: how long a
    batch waits to fill."""

    def __init__(self, model: Optional[str] = None, *, factory: Optional[str] = None, name: Optional[str] = None,
                 version: str = "1", threads: Optional[int] = None, max_batch_size: int = 32,
                 batch_wait_timeout_s: float = 0.002):
        self.compiled = _load(model, factory, threads if threads is not None else _replica_cpus())
        self.name = name or (os.path.splitext(os.path.basename(model))[0] if model else factory.rpartition(":")[2])
        self.version = str(version)
        self.input_names = self.compiled.input_names
        self.output_names = self.compiled.output_names
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, not {max_batch_size}")
        self._infer_batch.set_max_batch_size(int(max_batch_size))
        self._infer_batch.set_batch_wait_timeout_s(float(batch_wait_timeout_s))
        self._runs = self._rows = 0

    def stats(self) -> dict:
        """Runs of the model and rows they carried since the replica started (batching makes runs < requests)."""
        return {"runs": self._runs, "rows": self._rows}

    def metadata(self) -> dict:
        return {"name": self.name, "versions": [self.version], "platform": "cuvil",
                "inputs": [v2.tensor_metadata(n, t) for n, t in zip(self.input_names, self.compiled.input_types)],
                "outputs": [v2.tensor_metadata(n, t) for n, t in zip(self.output_names, self.compiled.output_types)]}

    async def _run(self, arrays: dict) -> list:
        self._runs += 1
        self._rows += v2.rows(arrays)
        return v2.flatten_outputs(await self.compiled.run_async(**arrays))

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002,
                 batch_size_fn=lambda requests: sum(v2.rows(r) for r in requests))
    async def _infer_batch(self, requests: list) -> list:
        return await v2.run_batched(self._run, requests, self.output_names)

    async def infer(self, body: Any) -> dict:
        """One v2 infer request (a JSON object) -> its response object; raises v2.V2Error for a bad request."""
        arrays, wanted, rid = v2.decode_request(body, self.input_names)
        for n in wanted:  # before the run, not after
            if n not in self.output_names:
                raise v2.V2Error(f"unknown output '{n}' requested (the model's outputs: {', '.join(self.output_names)})")
        v2.rows(arrays)  # (a request that cannot be batched fails here, alone)
        out = await self._infer_batch(arrays)
        if isinstance(out, Exception):
            raise out
        return v2.encode_response(self.name, self.version, out, wanted, rid)

    async def __call__(self, request) -> Any:
        from starlette.responses import JSONResponse
        path, method = request.url.path.rstrip("/"), request.method
        try:
            if path.endswith("/v2/health/live") or path.endswith("/v2/health/ready"):
                return JSONResponse({"live": True} if path.endswith("live") else {"ready": True})
            marker = "/v2/models/"
            if marker not in path:
                raise v2.V2Error(f"no such endpoint: {method} {path}", 404)
            rest = path.split(marker, 1)[1].split("/")
            if rest[0] != self.name:
                raise v2.V2Error(f"unknown model '{rest[0]}' (this deployment serves '{self.name}')", 404)
            tail = rest[1:]
            if len(tail) >= 2 and tail[0] == "versions":
                if tail[1] != self.version:
                    raise v2.V2Error(f"unknown version '{tail[1]}' of model '{self.name}'", 404)
                tail = tail[2:]
            if method == "POST" and tail == ["infer"]:
                try:
                    body = await request.json()
                except ValueError:
                    raise v2.V2Error("the request body is not valid JSON") from None
                return JSONResponse(await self.infer(body))
            if method == "GET" and not tail:
                return JSONResponse(self.metadata())
            if method == "GET" and tail == ["ready"]:
                return JSONResponse({"name": self.name, "ready": True})
            raise v2.V2Error(f"no such endpoint: {method} {path}", 404)
        except v2.V2Error as e:
            return JSONResponse({"error": str(e)}, status_code=e.status)
        except Exception as e:  # noqa: BLE001 - the model's own errors (bad dims, ...) are the client's
            import cuvil
            status = 400 if isinstance(e, (cuvil.InputError, ValueError)) else 500
            return JSONResponse({"error": f"{type(e).__name__}: {e}"}, status_code=status)


def app_builder(args: dict):
    """The application ``serve run`` builds: ``serve run cuvil.serving.ray:app_builder model=PATH [name=...]
    [max_batch_size=N] [batch_wait_timeout_s=S] [threads=N]``, or ``args:`` in a config file."""
    args = dict(args)
    kwargs = {k: args.pop(k) for k in ("model", "factory", "name", "version") if k in args}
    for k, conv in (("threads", int), ("max_batch_size", int), ("batch_wait_timeout_s", float)):
        if k in args:
            kwargs[k] = conv(args.pop(k))
    if args:
        raise ValueError(f"unknown argument(s): {', '.join(sorted(args))}")
    return CuvilDeployment.bind(**kwargs)
