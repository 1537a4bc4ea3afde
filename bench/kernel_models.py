"""Writes the single-op (and small fused-chain) ONNX models of the generated-kernel benchmark.

    /usr/bin/python3 bench/kernel_models.py OUT_DIR

Large models move >= 64 MB per input so the caches do not matter (what the bandwidth targets are about); the
"bert" ones have the shapes those ops have in a BERT-base layer at sequence 128, where per-call overheads show.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def models():
    big = [4096, 4096]  # 64 MB of f32
    rows = [16384, 1024]  # 64 MB, rows of 1024
    rng = np.random.default_rng(0)
    yield model("add_64mb", [helper.make_node("Add", ["x", "y"], ["z"])], [f32("x", big), f32("y", big)], [f32("z", big)])
    # bias, scale and ReLU: one generated kernel, one pass
    yield model(
        "chain_64mb",
        [helper.make_node("Add", ["x", "b"], ["t1"]), helper.make_node("Mul", ["t1", "s"], ["t2"]),
         helper.make_node("Relu", ["t2"], ["z"])],
        [f32("x", big)], [f32("z", big)], [const("b", rng.standard_normal(4096)), const("s", 0.5)])
    # GELU as PyTorch exports nn.GELU at opset 17: x * 0.5 * (1 + erf(x / sqrt(2)))
    yield model(
        "gelu_64mb",
        [helper.make_node("Div", ["x", "r2"], ["u"]), helper.make_node("Erf", ["u"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
         helper.make_node("Mul", ["m", "half"], ["z"])],
        [f32("x", big)], [f32("z", big)], [const("r2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5)])
    yield model("softmax_64mb", [helper.make_node("Softmax", ["x"], ["z"], axis=-1)], [f32("x", rows)], [f32("z", rows)])
    yield model(
        "layernorm_64mb",
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["z"], axis=-1, epsilon=1e-5)],
        [f32("x", rows)], [f32("z", rows)],
        [const("g", rng.standard_normal(1024)), const("b", rng.standard_normal(1024))])
    # Reductions over the channels of NCHW (not the innermost axis): generated as columns kernels.
    nchw = [1, 64, 512, 512]  # 64 MB
    yield model("softmax_channels_64mb", [helper.make_node("Softmax", ["x"], ["z"], axis=1)], [f32("x", nchw)],
                [f32("z", nchw)])
    # ConvNeXt's channels-first LayerNorm as PyTorch exports it, op by op
    yield model(
        "layernorm_channels_64mb",
        [helper.make_node("ReduceMean", ["x"], ["u"], axes=[1]), helper.make_node("Sub", ["x", "u"], ["d"]),
         helper.make_node("Pow", ["d", "two"], ["d2"]), helper.make_node("ReduceMean", ["d2"], ["v"], axes=[1]),
         helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
         helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["w", "n"], ["s"]),
         helper.make_node("Add", ["s", "b"], ["z"])],
        [f32("x", nchw)], [f32("z", nchw)],
        [const("two", 2.0), const("eps", 1e-6), const("w", rng.standard_normal((64, 1, 1))),
         const("b", rng.standard_normal((64, 1, 1)))])
    # A Transpose feeding an element-wise op (the permuted copy is never written): NCHW -> NHWC before a residual
    # Add, and a head split that keeps the innermost dim.
    yield model(
        "transpose_add_64mb",
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), helper.make_node("Add", ["t", "y"], ["z"])],
        [f32("x", nchw), f32("y", [1, 512, 512, 64])], [f32("z", [1, 512, 512, 64])])
    yield model(
        "transpose_inner_add_64mb",
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]), helper.make_node("Add", ["t", "y"], ["z"])],
        [f32("x", nchw), f32("y", [1, 512, 64, 512])], [f32("z", [1, 512, 64, 512])])
    # The layout changes alone: NHWC -> NCHW and a 2-D transpose (the CPU transpose's register blocks).
    yield model("transpose_nchw_64mb", [helper.make_node("Transpose", ["x"], ["z"], perm=[0, 3, 1, 2])],
                [f32("x", [1, 512, 512, 64])], [f32("z", nchw)])
    yield model("transpose_2d_64mb", [helper.make_node("Transpose", ["x"], ["z"], perm=[1, 0])], [f32("x", big)],
                [f32("z", big)])
    yield model("sin_64mb", [helper.make_node("Sin", ["x"], ["z"])], [f32("x", big)], [f32("z", big)])
    # Scans, windows and selections: CumSum along rows and down the middle axis, AlexNet's first LRN, TopK over
    # rows and over one long row of logits.
    yield model("cumsum_64mb", [helper.make_node("CumSum", ["x", "axis"], ["z"])], [f32("x", big)], [f32("z", big)],
                [numpy_helper.from_array(np.array(1, dtype=np.int64), "axis")])
    yield model("cumsum_middle_64mb", [helper.make_node("CumSum", ["x", "axis"], ["z"])], [f32("x", [16, 1024, 1024])],
                [f32("z", [16, 1024, 1024])], [numpy_helper.from_array(np.array(1, dtype=np.int64), "axis")])
    yield model("lrn_alexnet", [helper.make_node("LRN", ["x"], ["z"], size=5, alpha=1e-4, beta=0.75, bias=1.0)],
                [f32("x", [1, 96, 55, 55])], [f32("z", [1, 96, 55, 55])])
    k5 = numpy_helper.from_array(np.array([5], dtype=np.int64), "k")
    for name, shape in (("topk_rows", [256, 1000]), ("topk_logits", [1, 50000])):
        out = [shape[0], 5]
        yield model(name, [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)], [f32("x", shape)],
                    [f32("v", out), helper.make_tensor_value_info("i", TensorProto.INT64, out)], [k5])
    # Classification losses: SoftmaxCrossEntropyLoss (mean) over a batch of ImageNet logits, and per pixel over
    # a segmentation map of 21 classes with an ignored label (the targets are random classes in [0, 4)).
    for name, shape, attrs in (("sce_logits", [256, 1000], {}),
                               ("sce_segmentation", [8, 21, 128, 128], {"ignore_index": 255})):
        labels = helper.make_tensor_value_info("t", TensorProto.INT64, [shape[0]] + shape[2:])
        yield model(name, [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["z"], **attrs)],
                    [f32("x", shape), labels], [f32("z", [])])
    yield model(
        "layernorm_bert",
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["z"], axis=-1, epsilon=1e-5)],
        [f32("x", [1, 128, 768])], [f32("z", [1, 128, 768])],
        [const("g", rng.standard_normal(768)), const("b", rng.standard_normal(768))])
    yield model(
        "softmax_bert",
        [helper.make_node("Add", ["x", "mask"], ["t"]), helper.make_node("Softmax", ["t"], ["z"], axis=-1)],
        [f32("x", [1, 12, 128, 128]), f32("mask", [1, 1, 1, 128])], [f32("z", [1, 12, 128, 128])])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for m in models():
        path = os.path.join(out, m.graph.name + ".onnx")
        if not os.path.exists(path):
            onnx.save(m, path)
        print(path)


if __name__ == "__main__":
    main()
