// A QDQ model's activation pairs in front of int8 layers, left out where the layers run int8 (issue 23, 28).
//
// In a QDQ model every int8 layer reads DequantizeLinear(QuantizeLinear(v, s, z), s, z): fuse-elementwise makes the
// pair a FusedKernel (alone, or at the end of the element-wise work producing v). A layer running int8 on that grid
// (quant_x_scale = s, quant_x_zero_point = z on the u8 grid) quantizes its input itself, and q(dq(q(v))) = q(v),
// so where every reader of the pair's result is such a layer, they can read v: the pair's pass over memory goes,
// and int8_links.h may then link v's producer to them in u8 (ResNet-18 QDQ: 17 of its 25 pair kernels).
// The only difference: ONNX's QuantizeLinear divides by s, the int8 kernels multiply by 1/s (a rounding tie may
// fall one grid step apart, as between ONNX Runtime's int8 kernels and its reference).
// Also through a Transpose (a layout's reorder) whose readers are such layers: the first layer's input pair.
// Also around a MaxPool: in pair -> MaxPool -> pair(s) on the same grid the first pair goes (max commutes with
// the monotone quantization, and the later pair is idempotent after it: exact), and a later pair read only by int8
// layers on the grid too (the int8 link pass then runs that MaxPool on u8). ResNet-18 QDQ: the stem's pair over
// 112x112x64 values (5 ms of 20 on one thread) runs on the pooled 56x56x64 instead.
#pragma once

#include "ir/graph.h"

namespace cuvil {

// Leaves out, in g (an executor's own copy), the pairs whose every reader is a static int8 layer on the pair's
// grid (`model_only`: the model's own int8 layers only, an fp32 executor's). Returns how many it left out.
int bypass_qdq_pairs(Graph& g, bool model_only);

}  // namespace cuvil
