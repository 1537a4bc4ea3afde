"""Compile a torchvision ResNet-18 and check it against PyTorch.

Random weights (nothing is downloaded) and a small 64x64 image keep it quick.
    PYTHONPATH=python /usr/bin/python3 examples/torchvision_resnet.py
"""
import time

import numpy as np
import torch
import torchvision

import cuvil

torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=1000).eval()
x = torch.randn(1, 3, 64, 64)

t0 = time.perf_counter()
compiled = cuvil.compile(model, (x,))
print(f"compiled resnet18 in {time.perf_counter() - t0:.2f} s: {compiled}")

y = compiled(x)
with torch.no_grad():
    ref = model.double()(x.double())
err = float(torch.linalg.norm(y.double() - ref) / torch.linalg.norm(ref))
print(f"output {tuple(y.shape)}, relative L2 error vs PyTorch (float64): {err:.2e}")
print(f"top-5 classes  cuvil: {y[0].topk(5).indices.tolist()}  torch: {ref[0].topk(5).indices.tolist()}")
ops = sorted({line.split("= ")[1].split("(")[0] for line in compiled.ir().splitlines()
              if " = " in line and "constant" not in line})
print(f"Cuvil ops used: {', '.join(ops)}")
assert err < 1e-4 and np.isfinite(y.numpy()).all()
