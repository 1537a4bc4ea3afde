"""bf16 and int8 models saved as .cuv and loaded back (issue 28): the precision comes back from the manifest, the
int8 grids with the graph's nodes, and the outputs are bit-identical to the model that was saved; the calibration
record rides along for precision_report. The compile cache still stores only fp32 models (int8 grids depend on
calibration data its key does not hold)."""
import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import cuvil  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.c3 = torch.nn.Conv2d(16, 8, 1)
        self.fc = torch.nn.Linear(8 * 12 * 12, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y)) + y[:, :16]
        y = torch.relu(self.c3(y))
        return self.fc(y.flatten(1))


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_saved_and_loaded_bit_identical(tmp_path, precision):
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 3, 12, 12)
    kw = {"calibration": [(torch.randn(1, 3, 12, 12),) for _ in range(3)]} if precision == "int8" else {}
    m = cuvil.compile(net, (x,), precision=precision, **kw)
    want = np.asarray(m(x))
    lowered = [r for r in m.precision_report(x) if r["precision"] == precision]
    path = tmp_path / "m.cuv"
    m.save(path)
    loaded = cuvil.load(path)
    assert loaded._model.precision == precision
    got = np.asarray(loaded(x))
    assert got.dtype == want.dtype and np.array_equal(got, want)
    rows = [r for r in loaded.precision_report(x) if r["precision"] == precision]
    assert len(rows) == len(lowered) > 0
    if precision == "int8":
        assert all("input_sqnr" in r for r in rows)
    # and the loaded model is not the fp32 one
    fp32 = np.asarray(cuvil.compile(net, (x,))(x))
    assert not np.array_equal(got, fp32)


def test_cache_keeps_only_fp32(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CUVIL_MODEL_CACHE", "on")
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 3, 12, 12)
    cuvil.compile(net, (x,), precision="bf16")
    models = tmp_path / "models"
    assert not models.exists() or not any(p.suffix == ".cuv" for p in models.iterdir())
    cuvil.compile(net, (x,))  # while fp32 is stored
    assert any(p.suffix == ".cuv" for p in models.iterdir())
