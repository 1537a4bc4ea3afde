"""Small ONNX models built in tests: a graph of the given nodes at one opset, its value infos and initializers."""
import numpy as np
import onnx
from onnx import helper


def model(nodes, inputs, outputs, opset, initializers=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9 if opset <= 21 else 10 if opset <= 24 else 11  # the oldest IR that has the opset
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, arr):
    return onnx.numpy_helper.from_array(np.asarray(arr), name)
