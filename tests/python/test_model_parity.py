"""Whole torchvision models exported to ONNX and run by `cuvil run` match PyTorch (float64 reference)."""
import os
import subprocess

import numpy as np
import pytest

import models


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_matches_pytorch(name, cuvil_bin, model_dir):
    paths = models.export(name, model_dir)
    out = os.path.join(model_dir, name + "_out")
    r = subprocess.run([cuvil_bin, "run", paths["onnx"], "--input", f"input={paths['input.npy']}",
                        "--output-dir", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = np.load(os.path.join(out, "logits.npy"))
    ref = np.load(paths["torch.npy"])
    assert got.shape == ref.shape == (1, 1000)
    rel_l2 = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert rel_l2 < 1e-4, f"{name}: relative L2 error {rel_l2:.3e}"


def test_symbolic_batch_runs_other_sizes(cuvil_bin, model_dir):
    """The export marks the batch dim dynamic; the same model runs at batch 3 and matches PyTorch."""
    import torch
    paths = models.export("resnet18", model_dir)
    x = np.random.default_rng(5).standard_normal((3, 3, 224, 224)).astype(np.float32)
    xin = os.path.join(model_dir, "batch3.npy")
    np.save(xin, x)
    out = os.path.join(model_dir, "batch3_out")
    r = subprocess.run([cuvil_bin, "run", paths["onnx"], "--input", f"input={xin}", "--output-dir", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = np.load(os.path.join(out, "logits.npy"))
    with torch.no_grad():
        ref = models.build("resnet18").double()(torch.from_numpy(x).double()).numpy()
    assert got.shape == (3, 1000)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-4
