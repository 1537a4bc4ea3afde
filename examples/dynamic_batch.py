"""Dynamic shapes: compile once with a symbolic batch dim, then call with any batch size.

    PYTHONPATH=python /usr/bin/python3 examples/dynamic_batch.py
"""
import torch

import cuvil

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()

# forward(input): the key is forward()'s argument name; dim 0 becomes the symbol "batch".
compiled = cuvil.compile(model, (torch.randn(1, 784),), dynamic_shapes={"input": {0: "batch"}})
print(compiled)
print(compiled.ir().splitlines()[0])

for batch in (1, 4, 33):
    x = torch.randn(batch, 784)
    y = compiled(x)
    with torch.no_grad():
        err = float((y - model(x)).abs().max())
    print(f"batch {batch:3d}: output {tuple(y.shape)}, max |cuvil - torch| = {err:.1e}")
    assert y.shape == (batch, 10) and err < 1e-4

# Only the symbolic dim may change: other dims are checked, and the error names the input.
try:
    compiled(torch.randn(4, 100))
except ValueError as e:
    print(f"as expected, a wrong feature size is rejected: {e}")
