"""Where does the time go? compiled.profile(...) times every kernel and names the Python line it came from.

    PYTHONPATH=python /usr/bin/python3 examples/profiling.py
"""
import torch

import cuvil


class GatedMLP(torch.nn.Module):
    def __init__(self, width: int = 256):
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width)
        self.gate = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        h = torch.tanh(self.up(x)) * torch.sigmoid(self.gate(x))
        return x + self.down(h)


torch.manual_seed(0)
model = GatedMLP().eval()
x = torch.randn(8, 256)
compiled = cuvil.compile(model, (x,))
compiled(x)  # the first call plans memory for this shape; profile a warm run

profile = compiled.profile(x)
print(profile)  # per node: ms, share, op, file:line; then totals per op
slowest = max(profile.nodes, key=lambda r: r.ms)
print(f"\nslowest kernel: {slowest.op} at {slowest.location} ({slowest.ms:.3f} ms of {profile.total_ms:.3f} ms)")
