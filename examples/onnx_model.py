"""Load an ONNX model with cuvil.load_onnx: the same CompiledModule type as cuvil.compile returns.

The model is exported here from a small PyTorch CNN (no files needed).
    PYTHONPATH=python /usr/bin/python3 examples/onnx_model.py
"""
import os
import tempfile

import numpy as np
import torch

import cuvil

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10)).eval()

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "cnn.onnx")
    torch.onnx.export(model, torch.randn(1, 1, 28, 28), path, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13, dynamo=False)
    compiled = cuvil.load_onnx(path)
print(compiled)

images = np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32)
logits = compiled(images)
with torch.no_grad():
    ref = model(torch.from_numpy(images)).numpy()
err = float(np.linalg.norm(logits - ref) / np.linalg.norm(ref))
print(f"logits {logits.shape}, predicted classes {logits.argmax(1).tolist()}, relative L2 error {err:.1e}")
assert err < 1e-4
print(compiled.profile(image=images).table(top=5))
