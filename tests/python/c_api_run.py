"""Runs a .cuv artifact through the C API (ctypes over libcuvil_runtime.so) in a process that loads neither
Cuvil's Python package nor LLVM, and saves the outputs: `python c_api_run.py LIB MODEL.cuv OUT.npz IN.npy ...`.
Exits 3 if LLVM got mapped into the process."""
import ctypes as C
import sys

import numpy as np

lib_path, model, out_path, *inputs = sys.argv[1:]
lib = C.CDLL(lib_path)
DTYPES = {np.dtype("float32"): 0, np.dtype("float64"): 1, np.dtype("int64"): 7, np.dtype("int32"): 6,
          np.dtype("bool"): 12, np.dtype("uint8"): 8}
NUMPY = {v: k for k, v in DTYPES.items()}


class Tensor(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("dtype", C.c_int), ("rank", C.c_int32),
                ("dims", C.POINTER(C.c_int64)), ("data", C.c_void_p), ("bytes", C.c_size_t)]


lib.cuvil_session_create_from_file.restype = C.c_void_p
lib.cuvil_session_create_from_file.argtypes = [C.c_char_p, C.c_void_p, C.POINTER(C.c_void_p)]
lib.cuvil_status_message.restype = C.c_char_p
lib.cuvil_status_message.argtypes = [C.c_void_p]
lib.cuvil_session_output_count.argtypes = [C.c_void_p]
lib.cuvil_session_output_dtype.argtypes = [C.c_void_p, C.c_size_t]
lib.cuvil_session_output_shape.argtypes = [C.c_void_p, C.POINTER(Tensor), C.c_size_t, C.c_size_t,
                                           C.POINTER(C.c_int64), C.c_size_t, C.POINTER(C.c_void_p)]
lib.cuvil_session_run.argtypes = [C.c_void_p, C.POINTER(Tensor), C.c_size_t, C.POINTER(Tensor), C.c_size_t,
                                  C.POINTER(C.c_void_p)]
st = C.c_void_p()
s = lib.cuvil_session_create_from_file(model.encode(), None, C.byref(st))
if not s:
    sys.exit(lib.cuvil_status_message(st).decode())


def tensor(a):
    dims = (C.c_int64 * max(a.ndim, 1))(*a.shape)
    return Tensor(C.sizeof(Tensor), DTYPES[a.dtype], a.ndim, dims, a.ctypes.data, a.nbytes), dims


arrays = [np.ascontiguousarray(np.load(p)) for p in inputs]
ins = [tensor(a) for a in arrays]
tin = (Tensor * len(ins))(*[t for t, _ in ins])
outs = []
for i in range(lib.cuvil_session_output_count(s)):
    dims = (C.c_int64 * 16)()
    r = lib.cuvil_session_output_shape(s, tin, len(ins), i, dims, 16, C.byref(st))
    if r < 0:
        sys.exit(lib.cuvil_status_message(st).decode())
    outs.append(np.empty(tuple(dims[:r]), NUMPY[lib.cuvil_session_output_dtype(s, i)]))
touts = [tensor(o) for o in outs]
tout = (Tensor * len(outs))(*[t for t, _ in touts])
if lib.cuvil_session_run(s, tin, len(ins), tout, len(outs), C.byref(st)) != 0:
    sys.exit(lib.cuvil_status_message(st).decode())
np.savez(out_path, *outs)
with open("/proc/self/maps") as f:
    if "libLLVM" in f.read():
        sys.exit(3)
