"""Builds the models Cuvil's main job, tests and benchmarks use: torchvision architectures with fixed-seed random
weights (no weights can be downloaded here), exported to ONNX with Debian's /usr/bin/python3.

    /usr/bin/python3 scripts/models.py resnet18 OUT_DIR [--batch N]

writes OUT_DIR/resnet18.onnx, OUT_DIR/resnet18.input.npy (a fixed-seed input) and OUT_DIR/resnet18.torch.npy
(PyTorch's output on it, computed in float64 for a tight reference).
"""
import argparse
import os
import sys

import numpy as np
import torch
import torchvision

MODELS = {
    "resnet18": lambda: torchvision.models.resnet18(),
    "resnet50": lambda: torchvision.models.resnet50(),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(),
}


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = MODELS[name]()
    # Random BatchNorm statistics, so that folding/normalization bugs cannot hide behind identity stats.
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
    return model.eval()


def export(name: str, out_dir: str, batch: int = 1, opset: int = 13) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    model = build(name)
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    paths = {k: os.path.join(out_dir, f"{name}.{k}") for k in ("onnx", "input.npy", "torch.npy")}
    with torch.no_grad():
        torch.onnx.export(model, x, paths["onnx"], input_names=["input"], output_names=["logits"],
                          opset_version=opset, dynamo=False, dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
        ref = model.double()(x.double()).float()
    np.save(paths["input.npy"], x.numpy())
    np.save(paths["torch.npy"], ref.numpy())
    return paths


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("out_dir")
    p.add_argument("--batch", type=int, default=1)
    a = p.parse_args()
    for k, v in export(a.model, a.out_dir, a.batch).items():
        print(f"{k}: {v}")
    sys.exit(0)
