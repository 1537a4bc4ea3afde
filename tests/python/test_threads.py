"""Compiled models called from threads other than the one that compiled them, one at a time and many at once:
the pattern of a server whose request threads share one loaded model. A Winograd convolution prepared on the
loading thread crashed on the first call from another (oneDNN's per-thread scratchpad)."""
import threading

import numpy as np
import pytest
import torch

import cuvil


def _call_from_threads(fn, args_per_thread):
    results, errors = [None] * len(args_per_thread), []

    def work(i):
        try:
            results[i] = fn(*args_per_thread[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(args_per_thread))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def _small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).eval()


@pytest.mark.parametrize("batch", [1, 2])
def test_conv_compiled_here_called_from_other_threads(batch):
    conv = torch.nn.Conv2d(3, 8, 3, padding=1).eval()
    x = torch.randn(batch, 3, 32, 32)
    compiled = cuvil.compile(conv, (x,))
    want = conv(x).detach()
    assert torch.allclose(compiled(x), want, atol=1e-4)  # prepared on this thread
    for got in _call_from_threads(compiled, [(x,)] * 6):
        assert torch.allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("threads", [1, None])
def test_onnx_model_loaded_here_called_from_other_threads(tmp_path, threads):
    model = _small_cnn()
    path = str(tmp_path / "cnn.onnx")
    torch.onnx.export(model, (torch.randn(1, 3, 40, 40),), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, opset_version=17, dynamo=False)
    compiled = cuvil.load_onnx(path, threads=threads)
    inputs = [np.random.default_rng(i).standard_normal((1 + i % 3, 3, 40, 40), dtype=np.float32) for i in range(8)]
    compiled(inputs[0])  # prepared on this thread for batch 1
    with torch.no_grad():
        wants = [model(torch.from_numpy(x)).numpy() for x in inputs]
    for got, want in zip(_call_from_threads(compiled, [(x,) for x in inputs]), wants):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
