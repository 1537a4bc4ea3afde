"""What the reduced-precision tests share: which low-precision ISAs this machine runs (as oneDNN sees them, so
ONEDNN_MAX_CPU_ISA caps count), the relative L2 error they compare outputs by, and a PyTorch module exported to
ONNX and quantized to QDQ form by ONNX Runtime."""
import os

import numpy as np


def _cpu_has(flag: str) -> bool:
    with open("/proc/cpuinfo") as f:
        return flag in f.read() and os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ("", "ALL")


def machine_has_vnni() -> bool:
    return _cpu_has("avx512_vnni")


def runs_on_int8_dot_products(kernel: str) -> bool:
    """Whether a kernel name says it multiplies u8 x s8 natively: VNNI dot products, or AMX tiles (oneDNN picks
    those on CPUs that have them)."""
    return "vnni" in kernel or "amx" in kernel


def machine_has_bf16() -> bool:
    return _cpu_has("avx512_bf16")


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def ort_qdq_model(tmp_path, net, shape, activation_type, per_channel, name="net"):
    """`net` exported to ONNX (opset 17) and quantized by onnxruntime's quantize_static (QDQ, s8 weights,
    activations of `activation_type`, "QUInt8" or "QInt8") on 8 random samples of `shape`:
    (fp32 path, QDQ path, the samples)."""
    import pytest
    import torch

    ort_q = pytest.importorskip("onnxruntime.quantization")
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    calib = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
    f32 = str(tmp_path / f"{name}.onnx")
    torch.onnx.export(net.eval(), (torch.from_numpy(calib[0]),), f32, input_names=["x"], output_names=["y"],
                      opset_version=17, dynamo=False)

    class Reader(ort_q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": c} for c in calib])

        def get_next(self):
            return next(self.it, None)

    qdq = str(tmp_path / f"{name}_{activation_type}_{'pc' if per_channel else 'pt'}_qdq.onnx")
    ort_q.quantize_static(f32, qdq, Reader(), quant_format=ort_q.QuantFormat.QDQ, per_channel=per_channel,
                          activation_type=getattr(ort_q.QuantType, activation_type),
                          weight_type=ort_q.QuantType.QInt8)
    return f32, qdq, calib
