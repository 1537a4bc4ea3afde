"""A Cuvil model in KServe's Python ModelServer: ``CuvilKServeModel`` is a ``kserve.Model`` that loads a ``.cuv``
artifact (or compiles an ``.onnx`` file) and answers v2 (Open Inference Protocol) infer requests over KServe's REST
and gRPC front ends, running with ``CompiledModule.run_async`` so the server's event loop is never blocked.

    python -m cuvil.serving.kserve --model_name mlp --model_path /mnt/models/mlp.cuv [--threads N]
        [--http_port 8080] [--grpc_port 8081]          # plus every kserve.model_server option

For a KServe deployment of Cuvil's own C++ server (``cuvil serve``: dynamic batching, the binary extension,
faster), see deploy/kserve/ (ServingRuntime, InferenceService, Dockerfile). This class is the Python path: custom
pre/post-processing in Python, or a KServe setup that already runs Python predictors.
"""
from __future__ import annotations

import argparse
import os
import uuid
from typing import Dict, Optional, Union

import kserve
from kserve.errors import InvalidInput
from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

from . import v2


class CuvilKServeModel(kserve.Model):
    """`model_path`: a ``.cuv`` (or ``.onnx``) file; `threads`: threads per run (None: all cores)."""

    def __init__(self, name: str, model_path: str, *, version: str = "1", threads: Optional[int] = None):
        super().__init__(name)
        self.model_path = model_path
        self.version = str(version)
        self.threads = threads
        self.compiled = None

    def load(self) -> bool:
        import cuvil
        if self.model_path.endswith(".onnx"):
            self.compiled = cuvil.load_onnx(self.model_path, threads=self.threads)
        else:
            self.compiled = cuvil.load(self.model_path, threads=self.threads)
        self.ready = True
        return self.ready

    def get_input_types(self):
        return [v2.tensor_metadata(n, t) for n, t in zip(self.compiled.input_names, self.compiled.input_types)]

    def get_output_types(self):
        return [v2.tensor_metadata(n, t) for n, t in zip(self.compiled.output_names, self.compiled.output_types)]

    async def predict(self, payload: Union[Dict, InferRequest], headers: Dict[str, str] = None,
                      response_headers: Dict[str, str] = None) -> InferResponse:
        import cuvil
        if not isinstance(payload, InferRequest):
            raise InvalidInput("this model speaks the v2 protocol: POST /v2/models/<name>/infer")
        names = self.compiled.input_names
        arrays = {}
        for t in payload.inputs:
            if t.name not in names:
                raise InvalidInput(f"unexpected input '{t.name}' (the model's inputs: {', '.join(names)})")
            if t.datatype not in v2.DATATYPES:
                raise InvalidInput(f"input '{t.name}': unsupported datatype {t.datatype}")
            try:
                arrays[t.name] = t.as_numpy()
            except Exception as e:  # noqa: BLE001 - data that does not match its shape or datatype
                raise InvalidInput(f"input '{t.name}': {e}") from None
        outputs_wanted = [o.name for o in (payload.request_outputs or [])]
        for n in outputs_wanted:
            if n not in self.compiled.output_names:
                raise InvalidInput(f"unknown output '{n}' requested")
        try:
            result = v2.flatten_outputs(await self.compiled.run_async(**arrays))
        except cuvil.InputError as e:
            raise InvalidInput(str(e)) from None
        by_name = dict(zip(self.compiled.output_names, result))
        outs = []
        for n in outputs_wanted or self.compiled.output_names:
            a = by_name[n]
            o = InferOutput(name=n, shape=list(a.shape), datatype=v2.datatype_of(a))
            o.set_data_from_numpy(a, binary_data=payload.use_binary_outputs)
            outs.append(o)
        # (KServe's REST layer needs an id: the request's, else a fresh one)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, model_version=self.version,
                             infer_outputs=outs, use_binary_outputs=payload.use_binary_outputs)


def main(argv=None) -> None:
    from kserve import model_server
    parser = argparse.ArgumentParser(parents=[model_server.parser], conflict_handler="resolve")
    parser.add_argument("--model_path", required=True, help="the .cuv (or .onnx) file to serve")
    parser.add_argument("--model_version", default="1")
    parser.add_argument("--threads", type=int, default=None, help="threads per run (default: all cores)")
    args, _ = parser.parse_known_args(argv)
    name = args.model_name or os.path.splitext(os.path.basename(args.model_path))[0]
    model = CuvilKServeModel(name, args.model_path, version=args.model_version, threads=args.threads)
    model.load()
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port,
                       enable_grpc=args.enable_grpc).start([model])


if __name__ == "__main__":
    main()
