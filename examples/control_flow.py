"""Data-dependent control flow: torch.jit.script keeps Python if/while on tensor values as Cuvil If/Loop regions,
so each call takes the branch its own input asks for. A model scripting cannot handle is traced instead, with a
warning: its branches are then frozen to the example's path.

    PYTHONPATH=python /usr/bin/python3 examples/control_flow.py
"""
import warnings

import torch

import cuvil


class Gate(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):                 # branch on data
            y = x * 2.0
        else:
            y = -x
        while bool(y.sum() < 20.0):            # a loop whose trip count depends on data
            y = y + 1.0
        return y


x = torch.tensor([1.0, 2.0, 3.0])
compiled = cuvil.compile(Gate(), (x,))
regions = [line.strip().split("= ")[1].split("(")[0] for line in compiled.ir().splitlines()
           if "= If(" in line or "= Loop(" in line]
print(f"scripted: the IR keeps {regions}")
for inp in (x, -x):
    got, want = compiled(inp), Gate()(inp)
    print(f"  input {inp.tolist()} -> cuvil {got.tolist()}, torch {want.tolist()}")
    assert torch.allclose(got, want)


class GateWithLambda(Gate):
    def forward(self, x):
        twice = lambda t: t * 2.0  # noqa: E731 - TorchScript has no lambdas: scripting fails
        return twice(x) if bool(x.sum() > 0) else -x


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", cuvil.CaptureWarning)
    traced = cuvil.compile(GateWithLambda(), (x,))
print(f"traced, with a warning:\n  {caught[0].message}")
print(f"  input {(-x).tolist()} -> cuvil {traced(-x).tolist()} (frozen to the example's branch), "
      f"torch {GateWithLambda()(-x).tolist()}")
