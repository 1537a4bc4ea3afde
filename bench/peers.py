"""The peers the Python benchmarks time beside Cuvil from one ONNX export: ONNX Runtime and OpenVINO sessions on
the CPU with a given thread count, batch-1 latency settings."""
from __future__ import annotations

import os

import warnings

import torch


def export_onnx(model, args: tuple, inputs: dict, positional: bool, path: str) -> bool:
    """Writes `model` to `path` (TorchScript-based export for positional inputs; torch.export for keyword ones,
    the only path transformers 5 models take). False, with a line saying so, when the export fails."""
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if positional:
                torch.onnx.export(model, args, path, input_names=list(inputs), opset_version=17, dynamo=False)
            else:
                torch.onnx.export(model, (), path, kwargs=inputs, dynamo=True, external_data=False)
        return True
    except Exception as e:  # noqa: BLE001
        print(f"  ONNX export failed ({type(e).__name__}); ONNX Runtime and OpenVINO left out")
        return False


def ort_runner(path: str, feeds: dict, threads: int):
    """A call running the ONNX file once on ONNX Runtime (its outputs, a list of arrays)."""
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    # Its workers spin between calls by default; alternated with another engine on a small machine they hold the
    # cores during that engine's calls (Cuvil's doubled on 2 cores). Cuvil's spin briefly (GOMP_SPINCOUNT).
    so.add_session_config_entry("session.intra_op.allow_spinning", os.environ.get("CUVIL_BENCH_ORT_SPIN", "0"))
    s = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in s.get_inputs()}
    f = {k: v for k, v in feeds.items() if k in names}
    return lambda: s.run(None, f)


def openvino_runner(path: str, feeds: dict, threads: int, precision_hint: str = "f32"):
    """A call running the ONNX file once on OpenVINO's CPU plugin at `precision_hint` ("f32": its plugin otherwise
    runs bf16 on CPUs that have it); returns the first output as an array."""
    import openvino as ov
    cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": precision_hint,
                                               "INFERENCE_NUM_THREADS": str(threads),
                                               "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"})
    req = cm.create_infer_request()
    f = {k: v for k, v in feeds.items() if k in {i.get_any_name() for i in cm.inputs}}
    return lambda: req.infer(f)[cm.outputs[0]]
