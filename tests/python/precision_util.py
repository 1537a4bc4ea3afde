"""What the reduced-precision tests share: which low-precision ISAs this machine runs (as oneDNN sees them, so
ONEDNN_MAX_CPU_ISA caps count) and the relative L2 error they compare outputs by."""
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
