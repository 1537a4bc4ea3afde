#!/usr/bin/env python3
"""Runs ONNX Runtime over an ONNX backend node suite directory with the rules cuvil_onnx_conformance applies
(every data set's outputs within rtol 1e-3, atol 1e-7, bf16 ones rtol 2^-6 as onnx's own runner; integers,
booleans and strings exact; NaN equals NaN; a case that fails to load or run counts as failed) and prints the pass
rate, so that Cuvil's rate on the same cases has a peer to stand beside.

    $(scripts/python_env.sh)/bin/python scripts/ort_node_suite.py build/onnx123-node-tests/node [--filter S] [-v]
"""
import argparse
import glob
import os
import sys
import warnings

import numpy as np


def read_value(path, type_proto):
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    if type_proto.HasField("sequence_type"):
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return numpy_helper.to_list(p)
    if type_proto.HasField("optional_type"):
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return numpy_helper.to_optional(p)
    if type_proto.HasField("map_type"):
        p = onnx.MapProto()
        p.ParseFromString(data)
        return numpy_helper.to_dict(p)
    p = onnx.TensorProto()
    p.ParseFromString(data)
    return numpy_helper.to_array(p)


def close(got, want, rtol=1e-3, atol=1e-7):
    if want is None or got is None:
        return want is None and got is None
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.name == "bfloat16":
        rtol = max(rtol, 2.0 ** -6)
    if want.dtype.kind in "fc" or got.dtype.kind in "fc" or want.dtype.name == "bfloat16":
        try:
            g = got.astype(np.float64)
            w = want.astype(np.float64)
        except (TypeError, ValueError):
            return False
        nan = np.isnan(w)
        if not np.array_equal(nan, np.isnan(g)):
            return False
        g, w = g[~nan], w[~nan]
        inf = np.isinf(w)
        if not np.array_equal(g[inf], w[inf]):
            return False
        return bool(np.all(np.abs(g[~inf] - w[~inf]) <= atol + rtol * np.abs(w[~inf])))
    return np.array_equal(got, want)


# Element types ONNX Runtime's Python binding cannot convert to or from NumPy (ml_dtypes' bfloat16 and float8
# types): fed and read as their bits through OrtValues, so the harness does not fail cases ORT itself runs.
BITS_TYPES = {16: np.uint16, 17: np.uint8, 18: np.uint8, 19: np.uint8, 20: np.uint8}


def as_ort_value(ort, value, type_proto):
    elem = type_proto.tensor_type.elem_type if type_proto.HasField("tensor_type") else 0
    if elem in BITS_TYPES and isinstance(value, np.ndarray):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(value).view(BITS_TYPES[elem]), elem)
    if isinstance(value, np.ndarray):
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value))
    return value


def from_ort_value(value, type_proto):
    import ctypes

    from onnx import helper

    if not hasattr(value, "data_ptr"):
        return value
    try:
        return value.numpy()
    except RuntimeError:
        elem = type_proto.tensor_type.elem_type
        if elem not in BITS_TYPES:
            raise
        shape = value.shape()
        n = int(np.prod(shape)) if shape else 1
        bits = np.dtype(BITS_TYPES[elem])
        raw = (ctypes.c_char * (n * bits.itemsize)).from_address(value.data_ptr())
        arr = np.frombuffer(bytes(raw), dtype=bits).reshape(shape)
        return arr.view(helper.tensor_dtype_to_np_dtype(elem))


def run_case(case_dir, ort):
    import onnx

    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    inputs_by_name = {i.name: i for i in model.graph.input}
    bits = any(vi.type.tensor_type.elem_type in BITS_TYPES for vi in list(model.graph.input) + list(model.graph.output)
               if vi.type.HasField("tensor_type"))
    for ds in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        feeds = {}
        for j, vi in enumerate(model.graph.input):
            path = os.path.join(ds, f"input_{j}.pb")
            if os.path.exists(path):
                feeds[vi.name] = read_value(path, vi.type)
        feeds = {k: v for k, v in feeds.items() if k in inputs_by_name}
        if bits:
            feeds = {k: as_ort_value(ort, v, inputs_by_name[k].type) for k, v in feeds.items()}
            outs = [from_ort_value(o, vi.type) for o, vi in
                    zip(sess.run_with_ort_values(None, feeds), model.graph.output)]
        else:
            outs = sess.run(None, feeds)
        for j, vi in enumerate(model.graph.output):
            want = read_value(os.path.join(ds, f"output_{j}.pb"), vi.type)
            if not close(outs[j], want):
                return f"{os.path.basename(ds)} output {j} ('{vi.name}') differs"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--filter", default="")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    import onnxruntime as ort

    cases = sorted(d for d in glob.glob(os.path.join(args.dir, "*")) if os.path.isdir(d) and args.filter in d)
    passed = failed = 0
    for c in cases:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                why = run_case(c, ort)
        except Exception as e:  # noqa: BLE001 - a case ONNX Runtime refuses counts as failed
            why = (str(e).splitlines() or [type(e).__name__])[0][:200]
        if why is None:
            passed += 1
        else:
            failed += 1
            if args.verbose:
                print(f"FAIL {os.path.basename(c)}: {why}")
    total = len(cases)
    print(f"onnxruntime {ort.__version__}: {passed} of {total} cases pass ({100.0 * passed / max(total, 1):.1f}%)")
    print(f"{passed} passed, {failed} failed")


if __name__ == "__main__":
    sys.exit(main())
