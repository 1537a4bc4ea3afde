"""One compiled module, many threads: calls run concurrently (each on its own executor, GIL released).

    PYTHONPATH=python /usr/bin/python3 examples/threads.py
"""
from concurrent.futures import ThreadPoolExecutor

import torch

import cuvil

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4)).eval()
compiled = cuvil.compile(model, (torch.randn(1, 64),), dynamic_shapes={"input": {0: "batch"}})

requests = [torch.randn(1 + i % 4, 64) for i in range(64)]
with ThreadPoolExecutor(max_workers=8) as pool:
    answers = list(pool.map(compiled, requests))
with torch.no_grad():
    worst = max(float((a - model(r)).abs().max()) for a, r in zip(answers, requests))
print(f"{len(requests)} requests on 8 threads, worst max |cuvil - torch| = {worst:.1e}")
assert worst < 1e-4
