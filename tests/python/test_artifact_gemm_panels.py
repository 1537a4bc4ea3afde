"""The .cuv artifact's stored CPU GEMM panels (section gemm_panels): an ONNX MLP (a batch-1 classifier and a
17-row product) compiled by `cuvil compile` with them, with oneDNN's images only (CUVIL_NO_PREPACK=gemm) and with
no prepacked weights at all (=1) gives the same output bits, each loaded in a fresh process; `cuvil inspect`
names the section; CUVIL_LOG=time says where the load went."""
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(ROOT, "build", "bin", "cuvil")

CHILD = r"""
import sys, numpy as np, cuvil
m = cuvil.load(sys.argv[1])
for i, rows in enumerate((1, 17)):
    x = np.random.default_rng(i).standard_normal((rows, 70)).astype(np.float32)
    np.save(sys.argv[2] + f".{rows}.npy", np.asarray(m(x)))
"""


def _has_avx512():
    try:
        return " avx512f" in open("/proc/cpuinfo").read()
    except OSError:
        return False


def _mlp(path):
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((70, 100)).astype(np.float32)
    b1 = rng.standard_normal(100).astype(np.float32)
    w2 = rng.standard_normal((37, 100)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Gemm", ["r", "w2"], ["y"], transB=1, alpha=0.5)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 70])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 37])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.skipif(not os.path.exists(CLI), reason="the cuvil CLI is not built")
def test_stored_panels_give_the_same_bits_as_packing(tmp_path):
    model = str(tmp_path / "mlp.onnx")
    _mlp(model)
    env = {**os.environ, "CUVIL_CACHE_DIR": "off", "PYTHONPATH": os.path.join(ROOT, "python")}
    outs = {}
    for variant, no_prepack in (("panels", "0"), ("onednn_only", "gemm"), ("none", "1")):
        cuv = str(tmp_path / f"{variant}.cuv")
        subprocess.run([CLI, "compile", model, "-o", cuv], check=True, capture_output=True,
                       env={**env, "CUVIL_NO_PREPACK": no_prepack})
        inspect = subprocess.run([CLI, "inspect", cuv], check=True, capture_output=True, text=True,
                                 env=env).stdout
        stored = variant == "panels" and _has_avx512()
        assert ("gemm_panels:" in inspect) == stored, inspect
        assert ("GEMM panels: in the artifact" in inspect) == stored, inspect
        r = subprocess.run([sys.executable, "-c", CHILD, cuv, str(tmp_path / variant)], capture_output=True,
                           text=True, env={**env, "CUVIL_LOG": "time,prepack"})
        assert r.returncode == 0, r.stderr
        assert "header, table and section checksums" in r.stderr and "kernels ahead" in r.stderr, r.stderr
        assert "packed at load" not in r.stderr, r.stderr  # (nothing stored went unused)
        outs[variant] = [np.load(str(tmp_path / f"{variant}.{rows}.npy")) for rows in (1, 17)]
    for variant in ("onednn_only", "none"):
        for a, b in zip(outs["panels"], outs[variant]):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), variant
