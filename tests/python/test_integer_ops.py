"""ONNX models in integer / QOperator form (issue 23) against ONNX Runtime: quantize_static(QOperator) ResNet-18
(QLinearConv, QLinearAdd, QGemm, ...) with u8 and s8 activations, quantize_dynamic of a small transformer block
(DynamicQuantizeLinear + MatMulInteger, fused with its scales and bias into MatMulIntegerToFloat) and of convolutional networks (ConvInteger, depthwise included). The
integer ops must run on oneDNN's u8 x s8 kernels (kernels/onednn/integer_ops.cpp) where this CPU has VNNI, and
give ORT's results: the dynamic models to float rounding (their integer sums are exact), the QOperator models
(requantized as ONNX specifies) with at least 95 % of the logits equal to ORT's (all, on this machine) and top-1
equal. The kernels' exact arithmetic
against the reference kernels is tested in tests/unit/integer_ops_test.cpp."""

import numpy as np
import onnx
import pytest
import torch

import cuvil
from precision_util import machine_has_vnni, rel_l2  # noqa: E402

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
torchvision = pytest.importorskip("torchvision")

INTEGER_OPS = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat"}


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def export(model, x, path, names=("input",)):
    torch.onnx.export(model, x, str(path), opset_version=13, input_names=list(names), dynamo=False)
    return path


def check_fast_kernels(compiled, feeds):
    """Every integer op ran on oneDNN (VNNI machines); returns how many there were."""
    rows = [r for r in compiled.profile(**feeds).nodes if r.op in INTEGER_OPS]
    assert rows, "no integer op in the model"
    if machine_has_vnni():
        slow = [(r.op, r.impl, r.fallback) for r in rows if not r.impl.startswith("onednn:")]
        assert not slow, slow
    return len(rows)


class Reader:
    """quantize_static's calibration data."""

    def __init__(self, samples):
        self.items = iter(samples)

    def get_next(self):
        return next(self.items, None)


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("r18")
    model = torchvision.models.resnet18().eval()
    rng = np.random.default_rng(0)
    images = [rng.standard_normal((1, 3, 96, 96)).astype(np.float32) for _ in range(6)]
    src = export(model, torch.from_numpy(images[0]), d / "fp32.onnx")
    from onnxruntime.quantization.shape_inference import quant_pre_process
    pre = d / "pre.onnx"
    quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    return d, pre, images


@pytest.mark.parametrize("activation", ["QUInt8", "QInt8"])
def test_resnet18_qoperator_matches_ort(resnet18, activation):
    d, pre, images = resnet18
    q = quantization
    dst = d / f"qop_{activation}.onnx"
    q.quantize_static(str(pre), str(dst), Reader([{"input": x} for x in images[:3]]), quant_format=q.QuantFormat.QOperator,
                      activation_type=getattr(q.QuantType, activation), weight_type=q.QuantType.QInt8)
    fp32 = [ort_run(d / "fp32.onnx", {"input": x})[0] for x in images]
    want = [ort_run(dst, {"input": x})[0] for x in images]
    compiled = cuvil.load_onnx(str(dst))
    got = [np.asarray(compiled(x)) for x in images]
    assert check_fast_kernels(compiled, {"input": images[0]}) >= 20
    for g, w, f in zip(got, want, fp32):
        # ORT's own error to the float model bounds Cuvil's (one step per layer where rounding order differs).
        assert rel_l2(g, f) <= 2 * rel_l2(w, f) + 1e-3, (rel_l2(g, f), rel_l2(w, f))
        assert rel_l2(g, w) <= 0.05, rel_l2(g, w)
    exact = np.mean([np.mean(g == w) for g, w in zip(got, want)])
    print(f"{activation}: fraction of logits equal to ORT's {exact:.3f}, rel L2 to ORT "
          f"{max(rel_l2(g, w) for g, w in zip(got, want)):.2e}")
    # The integer ops requantize as ONNX specifies (all equal to ORT's on this machine; oneDNN's own
    # requantization, one step off at ties, left 84-90 % equal).
    assert exact >= 0.95, exact
    assert [int(g.argmax()) for g in got] == [int(w.argmax()) for w in want]
    # assign-layouts keeps the QLinearConvs, MaxPool and QLinearAdds channels-last: only the input's reorder stays.
    transposes = [r for r in compiled.profile(images[0]).nodes if r.op == "Transpose"]
    assert len(transposes) <= 2, len(transposes)


class Block(torch.nn.Module):
    """A transformer block's products: attention projections, scores, FFN with GELU, LayerNorm."""

    def __init__(self, dim=72, heads=4, ffn=200):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.ff1, self.ff2 = torch.nn.Linear(dim, ffn), torch.nn.Linear(ffn, dim)

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(x).split(dim, -1)
        split = lambda t: t.reshape(b, s, self.heads, -1).transpose(1, 2)  # noqa: E731
        att = torch.softmax(split(q) @ split(k).transpose(-1, -2) / 4.0, -1) @ split(v)
        x = self.ln1(x + self.out(att.transpose(1, 2).reshape(b, s, dim)))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


@pytest.mark.parametrize("weights", ["QInt8", "QUInt8"])
def test_transformer_dynamic_matches_ort(tmp_path, weights):
    torch.manual_seed(1)
    x = torch.randn(2, 13, 72)
    src = export(Block().eval(), x, tmp_path / "block.onnx")
    dst = tmp_path / "block_dyn.onnx"
    quantization.quantize_dynamic(str(src), str(dst), weight_type=getattr(quantization.QuantType, weights))
    feeds = {"input": x.numpy()}
    want = ort_run(dst, feeds)[0]
    compiled = cuvil.load_onnx(str(dst))
    assert check_fast_kernels(compiled, feeds) >= 4
    # fuse-matmul took every product's Cast, scale Mul and bias Add into it (QUInt8: B's zero point too): no Cast
    # is left (the block's only Casts were those of the int32 sums) and the products run on oneDNN (above).
    products = sum(n.op_type == "MatMulInteger" for n in onnx.load(str(dst)).graph.node)
    ops = [r.op for r in compiled.profile(**feeds).nodes]
    assert ops.count("MatMulInteger") == products and not [op for op in ops if "Cast" in op], ops
    got = np.asarray(compiled(**feeds))
    # The integer sums are exact and the grid is ORT's: only float rounding after them differs.
    assert rel_l2(got, want) < 1e-5, rel_l2(got, want)


@pytest.mark.parametrize("name,weights", [("resnet18", "QInt8"), ("mobilenet_v3_small", "QInt8"),
                                          ("mobilenet_v3_small", "QUInt8")])
def test_conv_dynamic_matches_ort(tmp_path, name, weights):
    # QUInt8: asymmetric u8 weights with zero points (older ORT's default), which oneDNN's convolutions take as a
    # second primitive's window sums.
    torch.manual_seed(2)
    model = getattr(torchvision.models, name)().eval()
    x = torch.randn(1, 3, 80, 80)
    src = export(model, x, tmp_path / "fp32.onnx")
    dst = tmp_path / "dyn.onnx"
    quantization.quantize_dynamic(str(src), str(dst), op_types_to_quantize=["Conv", "MatMul", "Gemm"],
                                  weight_type=getattr(quantization.QuantType, weights))
    feeds = {"input": x.numpy()}
    want = ort_run(dst, feeds)[0]
    compiled = cuvil.load_onnx(str(dst))
    assert check_fast_kernels(compiled, feeds) >= 15
    got = np.asarray(compiled(**feeds))
    assert rel_l2(got, want) < 1e-5, rel_l2(got, want)
    assert int(got.argmax()) == int(want.argmax())


def dequantized_product_model(path, k, n, b, b_zp, b_constant):
    """quantize_dynamic's form by hand: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * b_scale)
    -> Add(bias), twice from one DynamicQuantizeLinear (as Q and K share theirs)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(k * 100 + n)
    inits, nodes = [], [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])]
    outputs = []
    for p in range(2):
        bn, zn, sn, biasn = f"b{p}", f"bz{p}", f"bs{p}", f"bias{p}"
        if b_constant:
            inits.append(numpy_helper.from_array(b[p], bn))
        else:
            inputs.append(helper.make_tensor_value_info(bn, TensorProto.INT8 if b.dtype == np.int8 else TensorProto.UINT8,
                                                        [k, n]))
        inits += [numpy_helper.from_array(np.array(b_zp, b.dtype), zn),
                  numpy_helper.from_array(np.array(0.01 + 0.003 * p, np.float32), sn),
                  numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), biasn)]
        nodes += [helper.make_node("Mul", ["s", sn], [f"sc{p}"]),
                  helper.make_node("MatMulInteger", ["q", bn, "z", zn], [f"acc{p}"]),
                  helper.make_node("Cast", [f"acc{p}"], [f"accf{p}"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"accf{p}", f"sc{p}"], [f"m{p}"]),
                  helper.make_node("Add", [biasn, f"m{p}"], [f"y{p}"])]
        outputs.append(helper.make_tensor_value_info(f"y{p}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "dequantized", inputs, outputs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


@pytest.mark.parametrize("k,n,weights,b_zp,b_constant", [(384, 384, np.int8, 0, True), (33, 17, np.int8, -3, True),
                                                         (64, 9, np.uint8, 131, True), (19, 1, np.int8, 0, True),
                                                         (24, 6, np.int8, 2, False)])
def test_dequantized_product_matches_ort(tmp_path, k, n, weights, b_zp, b_constant):
    # Odd sizes, zero points, u8 weights, B a graph input (its fused node runs the reference); inputs random, with a
    # NaN (skipped by the range, as by ORT; the NaN itself quantizes to the zero point as in ONNX's reference, where
    # ORT's kernel stores another code, so that row is not compared) and all zeros (every output is the bias).
    rng = np.random.default_rng(n)
    info = np.iinfo(weights)
    b = [rng.integers(info.min, info.max + 1, (k, n)).astype(weights) for _ in range(2)]
    path = tmp_path / "dq.onnx"
    dequantized_product_model(path, k, n, np.stack(b), b_zp, b_constant)
    compiled = cuvil.load_onnx(str(path))
    ops = [r.op for r in compiled.profile(x=np.ones((3, k), np.float32),
                                          **({} if b_constant else {"b0": b[0], "b1": b[1]})).nodes]
    assert sorted(ops) == ["DynamicQuantizeLinear", "MatMulInteger", "MatMulInteger"], ops  # Cast/Mul/Add fused
    for fill in ("random", "nan", "zeros"):
        x = rng.uniform(-3, 5, (16 if n == 384 else 5, k)).astype(np.float32)
        if fill == "nan":
            x[2, k // 2] = np.nan
        if fill == "zeros":
            x[:] = 0
        feeds = {"x": x} if b_constant else {"x": x, "b0": b[0], "b1": b[1]}
        want = ort_run(path, feeds)
        got = compiled(**feeds)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.shape == w.shape
            if fill == "nan":
                g, w = np.delete(g, 2, 0), np.delete(w, 2, 0)
            # The integer sums are exact; float rounding after them may differ (ORT may fuse the multiply-add).
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6 * max(1.0, float(np.abs(w).max())))
