"""The KServe v2 / Open Inference Protocol JSON tensors, in NumPy: request bodies to named arrays and arrays to
response bodies, plus batching v2 requests along dim 0. Shared by the Ray Serve deployment; what ``cuvil serve``
does in C++ (src/serving/protocol.cpp), for Python servers. Errors are :class:`V2Error` with an HTTP status."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

# v2 datatype <-> NumPy dtype (BYTES and BF16 have no JSON form a Cuvil model takes).
DATATYPES = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}
_BY_DTYPE = {np.dtype(t): name for name, t in DATATYPES.items()}


class V2Error(ValueError):
    """A request the protocol refuses; `status` is the HTTP status to answer with (400 or 404)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def datatype_of(a: np.ndarray) -> str:
    try:
        return _BY_DTYPE[a.dtype]
    except KeyError:
        raise V2Error(f"no v2 datatype for NumPy dtype {a.dtype}") from None


def decode_request(body: Any, input_names: Sequence[str]) -> tuple[dict, list[str], Optional[str]]:
    """A parsed v2 infer request (JSON object) -> ({input name: array}, requested output names ([] for all), id).
    Every input of `input_names` must be given once, with a known datatype and as many elements as its shape."""
    if not isinstance(body, dict):
        raise V2Error("the request must be a JSON object")
    inputs = body.get("inputs")
    if not isinstance(inputs, list):
        raise V2Error("the request needs an 'inputs' array")
    arrays: dict = {}
    for t in inputs:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise V2Error("each input must be an object with a 'name'")
        name = t["name"]
        if name in arrays:
            raise V2Error(f"input '{name}' is given twice")
        if name not in input_names:
            raise V2Error(f"unexpected input '{name}' (the model's inputs: {', '.join(input_names)})")
        dt = t.get("datatype")
        if dt not in DATATYPES:
            raise V2Error(f"input '{name}': unsupported datatype {dt!r} (one of {', '.join(DATATYPES)})")
        shape = t.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise V2Error(f"input '{name}': 'shape' must be a list of non-negative integers")
        if "data" not in t:
            raise V2Error(f"input '{name}' has no 'data'")
        try:
            a = np.asarray(t["data"], dtype=DATATYPES[dt])
        except (TypeError, ValueError, OverflowError) as e:
            raise V2Error(f"input '{name}': data is not {dt} ({e})") from None
        if a.size != int(np.prod(shape, dtype=np.int64)):
            raise V2Error(f"input '{name}': {a.size} data elements for shape {shape}")
        arrays[name] = a.reshape(shape)
    missing = [n for n in input_names if n not in arrays]
    if missing:
        raise V2Error(f"missing input(s): {', '.join(missing)}")
    outputs = body.get("outputs") or []
    if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                for o in outputs):
        raise V2Error("'outputs' must be a list of objects with a 'name'")
    rid = body.get("id")
    if rid is not None and not isinstance(rid, str):
        raise V2Error("'id' must be a string")
    return arrays, [o["name"] for o in outputs], rid


def encode_response(model_name: str, model_version: str, outputs: dict, wanted: Sequence[str] = (),
                    request_id: Optional[str] = None) -> dict:
    """{output name: array} -> a v2 infer response (JSON object); `wanted` picks outputs (all when empty)."""
    names = list(wanted) or list(outputs)
    for n in names:
        if n not in outputs:
            raise V2Error(f"unknown output '{n}' requested (the model's outputs: {', '.join(outputs)})")
    r = {"model_name": model_name, "model_version": model_version,
         "outputs": [{"name": n, "datatype": datatype_of(np.asarray(outputs[n])),
                      "shape": list(np.shape(outputs[n])), "data": np.asarray(outputs[n]).ravel().tolist()}
                     for n in names]}
    if request_id is not None:
        r["id"] = request_id
    return r


def signature(arrays: dict) -> tuple:
    """What requests must share to run as one batch: each input's dtype and every dim but dim 0."""
    return tuple((n, a.dtype.str, a.shape[1:]) for n, a in sorted(arrays.items()))


def rows(arrays: dict) -> int:
    """The batch size of one request (dim 0, equal for every input)."""
    sizes = {a.shape[0] if a.ndim else -1 for a in arrays.values()}
    if len(sizes) != 1 or -1 in sizes:
        raise V2Error("every input needs the same batch size (dim 0) to be batched")
    return sizes.pop()


async def run_batched(run, requests: Sequence[dict], output_names: Sequence[str]) -> list:
    """Runs `requests` (each {input name: array}) through the coroutine function `run` ({name: array} -> arrays
    in `output_names` order) as one concatenated batch per signature, and splits the outputs back per request.
    Returns, per request, {output name: array} or the exception that request (or its group) raised."""
    groups: dict = {}
    results: list = [None] * len(requests)
    for i, r in enumerate(requests):
        try:
            groups.setdefault(signature(r), []).append((i, rows(r)))
        except V2Error as e:
            results[i] = e
    for members in groups.values():
        idx = [i for i, _ in members]
        batch = {n: np.concatenate([requests[i][n] for i in idx]) if len(idx) > 1 else requests[idx[0]][n]
                 for n in requests[idx[0]]}
        try:
            outs = await run(batch)
            total = sum(n for _, n in members)
            for name, o in zip(output_names, outs):
                if np.ndim(o) == 0 or np.shape(o)[0] != total:
                    raise V2Error(f"output '{name}' has shape {list(np.shape(o))}, not a batch of {total} rows: "
                                  "serve this model without batching", 500)
            bounds = np.cumsum([0] + [n for _, n in members])
            for k, i in enumerate(idx):
                results[i] = {name: np.asarray(o)[bounds[k]:bounds[k + 1]] for name, o in zip(output_names, outs)}
        except Exception as e:  # noqa: BLE001 - each request of the group gets it
            for i in idx:
                results[i] = e
    return results


_V2_OF_CUVIL = {"bool": "BOOL", "u8": "UINT8", "u16": "UINT16", "u32": "UINT32", "u64": "UINT64", "i8": "INT8",
                "i16": "INT16", "i32": "INT32", "i64": "INT64", "f16": "FP16", "bf16": "BF16", "f32": "FP32",
                "f64": "FP64"}


def tensor_metadata(name: str, cuvil_type: str) -> dict:
    """A v2 metadata entry from a CompiledModule type such as "f32[batch, 784]" (symbolic dims as -1)."""
    dt, _, dims = cuvil_type.partition("[")
    shape = [int(d) if d.strip().isdigit() else -1 for d in dims.rstrip("]").split(",") if d.strip()]
    return {"name": name, "datatype": _V2_OF_CUVIL.get(dt.strip(), dt.strip().upper()), "shape": shape}


def flatten_outputs(result) -> list:
    """A CompiledModule's result (one array, or nested tuples/lists/dicts of them) as a flat list."""
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in flatten_outputs(r)]
    if isinstance(result, dict):
        return [x for r in result.values() for x in flatten_outputs(r)]
    return [result]
