#!/usr/bin/env python3
"""Writes the ONNX backend node test suite of the running onnx package (1.23 in the project's environment: 1884
cases) into OUT/node/<case>/{model.onnx, test_data_set_0/{input,output}_N.pb}, the layout of onnx 1.12's
`backend-test-tools generate-data` that cuvil_onnx_conformance reads. onnx 1.23's wheel ships the generators,
not the data, and its generate-data command writes only the model (not the node) cases, hence this script.

    $(scripts/python_env.sh)/bin/python scripts/gen_onnx_node_tests.py build/onnx123-node-tests
"""
import os
import shutil
import sys
import warnings


def write_value(path, value, type_proto, name):
    from onnx import TensorProto, numpy_helper

    if type_proto.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif type_proto.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif type_proto.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    elif isinstance(value, TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/onnx123-node-tests"
    import onnx
    import onnx.backend.test.case.node as node_test

    node_dir = os.path.join(out, "node")
    stamp = os.path.join(out, "onnx-version")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__ and os.path.isdir(node_dir):
        return
    shutil.rmtree(out, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_test.collect_testcases()
    for case in cases:
        case_dir = os.path.join(node_dir, case.name)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(ds)
            for j, value in enumerate(inputs):
                write_value(os.path.join(ds, f"input_{j}.pb"), value, graph.input[j].type, graph.input[j].name)
            for j, value in enumerate(outputs):
                write_value(os.path.join(ds, f"output_{j}.pb"), value, graph.output[j].type, graph.output[j].name)
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print(f"generated {len(cases)} node test cases of onnx {onnx.__version__} in {node_dir}")


if __name__ == "__main__":
    main()
