"""NumPy in, NumPy out: no torch tensors at call time, and no copies of inputs or outputs.

    PYTHONPATH=python /usr/bin/python3 examples/numpy_in_out.py
"""
import numpy as np
import torch

import cuvil


class Normalize(torch.nn.Module):
    """Scales each row to unit L2 norm and returns the norms too (two outputs)."""

    def forward(self, x):
        norm = torch.sqrt((x * x).sum(dim=1, keepdim=True))
        return x / norm, norm


compiled = cuvil.compile(Normalize(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "rows"}})

x = np.array([[3.0, 4.0, 0.0], [1.0, 2.0, 2.0], [0.0, 0.0, 5.0]], np.float32)
unit, norm = compiled(x)  # NumPy arrays in -> NumPy arrays out
print(f"input:\n{x}\nunit rows:\n{unit}\nnorms: {norm.ravel()}")
assert isinstance(unit, np.ndarray) and np.allclose(norm.ravel(), [5, 3, 5])
assert np.allclose(np.linalg.norm(unit, axis=1), 1)
# The output wraps Cuvil's own buffer (no copy); the array keeps it alive and the caller owns it.
print(f"output owns a copy: {unit.flags.owndata}; base: {type(unit.base).__name__}; writeable: "
      f"{unit.flags.writeable}")
# Keyword arguments work too, by forward()'s parameter names.
print(f"compiled(x=x)[1].ravel() = {compiled(x=x)[1].ravel()}")
