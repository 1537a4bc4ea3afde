"""PyTorch's LSTM/GRU/RNN exported to ONNX run on Cuvil's CPU recurrent kernel (src/kernels/cpu/recurrent.cpp),
checked against ONNX Runtime and PyTorch on random inputs with odd sizes: several layers, both directions,
batch-first, initial states, weights the kernel packs (constants) — the exporters' real graphs (Slice/Concat of
the state, Squeeze of Y), not only the op-harness's single nodes."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import cuvil  # noqa: E402

# (the exporter warns about batch sizes other than 1 for every recurrent node)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Net(torch.nn.Module):
    def __init__(self, kind, inp, hidden, layers, bidirectional, batch_first):
        super().__init__()
        cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
        self.kind = kind
        self.rnn = cls(inp, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)

    def forward(self, x, h0, c0=None):
        if self.kind == "lstm":
            y, (h, c) = self.rnn(x, (h0, c0))
            return y, h, c
        y, h = self.rnn(x, h0)
        return y, h


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("bidirectional,batch_first", [(False, False), (True, True)])
def test_exported_recurrent_matches_ort_and_torch(tmp_path, kind, bidirectional, batch_first):
    torch.manual_seed(0)
    inp, hidden, layers, seq, batch = 23, 37, 2, 5, 3
    net = Net(kind, inp, hidden, layers, bidirectional, batch_first).eval()
    nd = 2 if bidirectional else 1
    x = torch.randn((batch, seq, inp) if batch_first else (seq, batch, inp))
    h0 = torch.randn(layers * nd, batch, hidden) * 0.5
    args = (x, h0) + ((torch.randn(layers * nd, batch, hidden) * 0.5,) if kind == "lstm" else ())
    names = ["x", "h0", "c0"][:len(args)]
    path = tmp_path / f"{kind}.onnx"
    with torch.no_grad():
        torch.onnx.export(net, args, str(path), input_names=names, opset_version=17, dynamo=False)
        want_torch = [t.numpy() for t in net(*args)]
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    model = cuvil.load_onnx(str(path))
    got = model(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w, t in zip(got, want, want_torch):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-5)
    # The fast kernel ran, not the reference one.
    kernels = {row[3] for row in model._model.profile([feeds[n] for n in names])}
    assert any(k.startswith(f"cpu:{kind}") for k in kernels), kernels
