"""Hot weight swap of modules compiled from PyTorch, without compiling them again (cuvil/weights.py,
frontend/state.py): the state_dict entries are constants of their own in the graph the engine keeps before the
passes; an update replaces them and runs the passes again in C++ with the GIL released.

For torchvision's ResNet-18 and MobileNetV2 with trained-like BatchNorm statistics, a small transformer encoder
(TorchScript) and a small BERT (torch.export), update_weights with a perturbed state_dict gives outputs bit for
bit those of a fresh cuvil.compile of the updated module, through the in-place path (not a recompile). Errors:
strict with a missing entry, unknown names, wrong shapes and dtypes, all reported at once, nothing changed.
8 threads calling during 100 in-place swaps each get, bit for bit, the output of exactly the version they report;
another Python thread runs during the native part of a swap. Values a converter reads make updates recompile.
"""
import threading
import time

import numpy as np
import pytest

import cuvil

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")


def _trained_like(m, seed):
    """Non-trivial BatchNorm statistics and affine parameters, as a trained network has."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                c = mod.num_features
                mod.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
                mod.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.25)
                mod.weight.copy_(torch.rand(c, generator=g) + 0.5)
                mod.bias.copy_(torch.rand(c, generator=g) * 0.4 - 0.2)
    return m.eval()


def _perturbed(state, seed):
    """Every floating-point entry moved a little (variances kept positive); integer entries as they are."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in state.items():
        if v.is_floating_point():
            v = v + 0.05 * torch.randn(v.shape, generator=g, dtype=v.dtype)
            if k.endswith("running_var"):
                v = v.abs() + 0.1
        out[k] = v.clone()
    return out


def _resnet18():
    torch.manual_seed(0)
    return _trained_like(torchvision.models.resnet18(num_classes=10), 1)


def _mobilenet_v2():
    torch.manual_seed(0)
    return _trained_like(torchvision.models.mobilenet_v2(num_classes=10), 2)


def _encoder():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def _in_place(compiled):
    """Whether updates replace constants (not compile again)."""
    r = compiled._weights_recipe
    return r is not None and r.constants is not None


def _equal(a, b):
    a, b = a.detach().numpy(), b.detach().numpy()
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("make, shape", [(_resnet18, (1, 3, 64, 64)), (_mobilenet_v2, (1, 3, 64, 64)),
                                         (_encoder, (2, 7, 32))], ids=["resnet18", "mobilenet_v2", "encoder"])
def test_update_equals_fresh_compile(make, shape):
    x = torch.randn(*shape)
    m = make()
    compiled = cuvil.compile(m, (x,), cache=False)
    assert _in_place(compiled), compiled._weights_recipe.why
    before = compiled(x)
    new = _perturbed(m.state_dict(), 3)
    assert compiled.update_weights(new) == 2
    m2 = make()
    m2.load_state_dict(new)
    fresh = cuvil.compile(m2, (x,), cache=False)
    after = compiled(x)
    assert _equal(after, fresh(x))
    assert not _equal(after, before)
    with torch.no_grad():
        torch.testing.assert_close(after, m2(x), rtol=1e-3, atol=1e-3)
    # A subset: one BatchNorm's statistics (folded into its convolution again) and nothing else.
    if make is _encoder:
        sub = {"layers.0.linear1.bias": new["layers.0.linear1.bias"] + 1}
    else:
        var = next(k for k in new if k.endswith("running_var"))
        mean = var.replace("running_var", "running_mean")
        sub = {var: new[var] * 2, mean: new[mean] + 1}
    assert compiled.update_weights(sub, strict=False) == 3
    m2.load_state_dict(sub, strict=False)
    assert _equal(compiled(x), cuvil.compile(m2, (x,), cache=False)(x))


def test_export_capture_bert_updates_in_place():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=16)
    torch.manual_seed(0)
    m = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    compiled = cuvil.compile(m, kwargs={"input_ids": ids, "attention_mask": mask}, cache=False)
    assert _in_place(compiled), compiled._weights_recipe.why
    new = _perturbed(m.state_dict(), 4)
    compiled.update_weights(new)
    m2 = transformers.BertModel(cfg).eval()
    m2.load_state_dict(new)
    fresh = cuvil.compile(m2, kwargs={"input_ids": ids, "attention_mask": mask}, cache=False)
    a = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
    b = fresh(input_ids=ids, attention_mask=mask).last_hidden_state
    assert _equal(a, b)
    with torch.no_grad():
        torch.testing.assert_close(a, m2(input_ids=ids, attention_mask=mask).last_hidden_state, rtol=1e-3,
                                   atol=1e-3)


class _Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def _small():
    torch.manual_seed(0)
    return _trained_like(_Small(), 5)


def test_bad_updates_change_nothing():
    x = torch.randn(2, 3, 8, 8)
    m = _small()
    compiled = cuvil.compile(m, (x,), cache=False)
    assert _in_place(compiled)
    before = compiled(x)
    sd = m.state_dict()
    bad = [
        ({k: v for k, v in sd.items() if k != "bn.running_var"}, True, "missing 'bn.running_var'"),
        ({"conv.weight": sd["conv.weight"], "nope": sd["fc.bias"]}, False, "'nope' is not in the module's state_dict"),
        ({"fc.weight": torch.zeros(4, 7)}, False, "'fc.weight' has shape [4, 6], given [4, 7]"),
        ({"fc.bias": torch.zeros(4, dtype=torch.float64)}, False, "'fc.bias' is float32, given float64"),
    ]
    for weights, strict, message in bad:
        with pytest.raises(cuvil.InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
            compiled.update_weights(weights, strict=strict)
        assert compiled.weights_version == 1
        assert _equal(compiled(x), before)
    # Every problem of one call in one message.
    with pytest.raises(cuvil.InputError) as e:
        compiled.update_weights({"nope": sd["fc.bias"], "fc.weight": torch.zeros(1)}, strict=False)
    assert "nope" in str(e.value) and "fc.weight" in str(e.value)
    with pytest.raises(TypeError):
        compiled.update_weights([("fc.bias", sd["fc.bias"])])


def test_tied_entries_update_together():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(5, 5)
            self.b = torch.nn.Linear(5, 5)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    torch.manual_seed(0)
    m = Tied().eval()
    x = torch.randn(3, 5)
    compiled = cuvil.compile(m, (x,), cache=False)
    assert _in_place(compiled)
    w = torch.randn(5, 5)
    compiled.update_weights({"a.weight": w}, strict=False)
    m.a.weight.data.copy_(w)  # (b's too: one tensor)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x))


def test_calls_during_swaps_match_one_version():
    """8 threads call the module while its weights are swapped in place 100 times: every output is, bit for bit,
    the output of a fresh compile of exactly the weights set its reported version was built from."""
    x = torch.randn(4, 3, 8, 8)
    m = _small()
    sets = [m.state_dict()] + [_perturbed(m.state_dict(), s) for s in range(1, 4)]
    refs = []
    for s in sets:
        ref = _small()
        ref.load_state_dict(s)
        refs.append(cuvil.compile(ref, (x,), cache=False, threads=1)(x))
    compiled = cuvil.compile(m, (x,), cache=False, threads=1)
    assert _in_place(compiled)
    set_of, lock, stop = {1: 0}, threading.Lock(), threading.Event()
    failures, seen = [], set()

    def call():
        while not stop.is_set():
            out, v = compiled.call_with_version(x)
            with lock:
                k = set_of[v]
                seen.add(v)
            matches = [i for i, r in enumerate(refs) if _equal(out, r)]
            if matches != [k]:
                failures.append(f"version {v}: output matches sets {matches}, expected [{k}]")
                return

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        for n in range(100):
            k = (n + 1) % len(sets)
            with lock:  # (registered before any call can see the version)
                version = compiled.weights_version + 1
                set_of[version] = k
            assert compiled.update_weights(sets[k]) == version
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:3]
    assert compiled.weights_version == 101 and len(seen) >= 2


class _Timed:
    """The engine with its update_weights call timed (the native part of a swap)."""

    def __init__(self, model):
        self.model, self.span = model, None

    def update_weights(self, *args):
        start = time.perf_counter()
        try:
            return self.model.update_weights(*args)
        finally:
            self.span = (start, time.perf_counter())

    def __getattr__(self, name):
        return getattr(self.model, name)


def test_swap_releases_the_gil():
    x = torch.randn(1, 3, 64, 64)
    m = _resnet18()
    compiled = cuvil.compile(m, (x,), cache=False)
    assert _in_place(compiled)
    compiled._model = timed = _Timed(compiled._model)
    new = _perturbed(m.state_dict(), 7)
    ticks, stop = [], threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.05)
        compiled.update_weights(new)
    finally:
        stop.set()
        t.join()
    start, end = timed.span
    during = [s for s in ticks if start <= s <= end]
    gaps = np.diff([start] + during + [end])
    # Were the GIL held through the native work (folding, packing), the counting thread would not run in it.
    assert len(during) > 0 and gaps.max() < 0.5 * (end - start), (len(during), gaps.max(), end - start)


def test_loaded_artifact_recompiles_once_then_updates_in_place(tmp_path, monkeypatch, capfd):
    """A model-cache hit is a loaded artifact, which keeps no graph before the passes: its first update compiles
    the module again (logged), and the engine takes that compile's graph, so the next ones are in place."""
    from cuvil.frontend.capture import _recompilable
    monkeypatch.setenv("CUVIL_LOG", "weights")
    x = torch.randn(2, 3, 8, 8)
    m = _small()
    cuvil.compile(m, (x,), cache=False).save(str(tmp_path / "m.cuv"))
    hit = _recompilable(cuvil.load(str(tmp_path / "m.cuv")), m, (x,), {},  # (as capture.compile does for hits)
                        dict(dynamic_shapes=None, capture="auto", precision="fp32", device="cpu", threads=None))
    assert not _in_place(hit)
    for seed, expect_log in ((1, True), (2, False)):
        new = _perturbed(m.state_dict(), seed)
        hit.update_weights(new)
        logged = "compiles the module again" in capfd.readouterr().err
        assert logged == expect_log
        ref = _small()
        ref.load_state_dict(new)
        assert _equal(hit(x), cuvil.compile(ref, (x,), cache=False)(x))
    assert _in_place(hit)


def test_values_read_while_converting_mean_recompiling(monkeypatch, capfd):
    """repeat_interleave's converter reads its repeats (a buffer here) at compile time: those values are baked
    into the graph, so updates compile again, say why under CUVIL_LOG=weights, and still give the right result."""

    class Repeat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.register_buffer("reps", torch.tensor([1, 2]))

        def forward(self, x):
            return torch.repeat_interleave(self.fc(x), self.reps, dim=0)

    monkeypatch.setenv("CUVIL_LOG", "weights")
    torch.manual_seed(0)
    m = Repeat().eval()
    x = torch.randn(2, 4)
    compiled = cuvil.compile(m, (x,), cache=False)
    assert not _in_place(compiled)
    assert "'reps'" in compiled._weights_recipe.why
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    sd["reps"] = torch.tensor([2, 1])
    sd["fc.bias"] += 1
    compiled.update_weights(sd)
    assert "compiles the module again: the conversion read the values of 'reps'" in capfd.readouterr().err
    m.load_state_dict(sd)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x))


def test_exported_program_updates_by_state_dict_names():
    x = torch.randn(2, 3, 8, 8)
    m = _small()
    compiled = cuvil.compile(torch.export.export(m, (x,)))
    assert _in_place(compiled)
    assert set(compiled.weight_names()) == set(m.state_dict())
    new = _perturbed(m.state_dict(), 11)
    assert compiled.update_weights(new) == 2
    ref = _small()
    ref.load_state_dict(new)
    assert _equal(compiled(x), cuvil.compile(torch.export.export(ref, (x,)))(x))
    with pytest.raises(cuvil.InputError, match="missing"):
        compiled.update_weights({"fc.bias": new["fc.bias"]})
