// Sliding-window attributes (Conv, ConvTranspose, ConvInteger, QLinearConv, MaxPool, AveragePool, MaxUnpool):
// parsing with ONNX defaults and validation, the output-size formulas (symbolic, for inference) and the concrete
// padding (for kernels). Shared by src/ir/ops/nn.cpp and src/kernels/ref/nn.cpp so both read attributes alike.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ir/op_schema.h"

namespace cuvil::nn {

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

// The reference kernels loop over at most three spatial dims.
inline constexpr size_t kMaxSpatialDims = 3;

struct Window {
  AutoPad auto_pad = AutoPad::NotSet;
  std::vector<int64_t> kernel;  // kernel_shape; empty when the op allows it to be omitted and it is
  std::vector<int64_t> strides, dilations;
  std::vector<int64_t> pads;  // the spatial begins, then the spatial ends; all zero unless auto_pad is NOTSET
  bool ceil_mode = false;

  size_t rank() const { return strides.size(); }
  bool same() const { return auto_pad == AutoPad::SameUpper || auto_pad == AutoPad::SameLower; }
};

struct WindowAttrs {
  bool has_auto_pad = true;
  bool has_dilations = true;
  bool has_ceil_mode = false;
  bool kernel_required = false;
};

// Reads and validates the window attributes for `spatial` dims. Ctx is an InferContext or a KernelContext.
template <class Ctx>
Window read_window(const Ctx& c, size_t spatial, WindowAttrs which) {
  Window w;
  if (which.has_auto_pad) {
    const std::string& ap = c.s("auto_pad");
    if (ap == "NOTSET") w.auto_pad = AutoPad::NotSet;
    else if (ap == "SAME_UPPER") w.auto_pad = AutoPad::SameUpper;
    else if (ap == "SAME_LOWER") w.auto_pad = AutoPad::SameLower;
    else if (ap == "VALID") w.auto_pad = AutoPad::Valid;
    else c.error("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '", ap, "'");
  }
  auto list = [&](const char* name, size_t n, int64_t def, int64_t min) {
    std::vector<int64_t> v = c.ints(name);
    if (v.empty()) return std::vector<int64_t>(n, def);
    if (v.size() != n) c.error(name, " has ", v.size(), " values; expected ", n, " for ", spatial, " spatial dims");
    for (int64_t x : v)
      if (x < min) c.error(name, " must be >= ", min, ", got ", x);
    return v;
  };
  if (which.kernel_required && c.ints("kernel_shape").empty()) c.error("kernel_shape is required");
  if (!c.ints("kernel_shape").empty()) w.kernel = list("kernel_shape", spatial, 1, 1);
  w.strides = list("strides", spatial, 1, 1);
  w.dilations = which.has_dilations ? list("dilations", spatial, 1, 1) : std::vector<int64_t>(spatial, 1);
  w.pads = list("pads", 2 * spatial, 0, 0);
  if (w.auto_pad != AutoPad::NotSet) w.pads.assign(2 * spatial, 0);  // explicit pads only apply with NOTSET
  if (which.has_ceil_mode) {
    int64_t cm = c.i("ceil_mode");
    if (cm != 0 && cm != 1) c.error("ceil_mode must be 0 or 1, got ", cm);
    w.ceil_mode = cm == 1;
  }
  return w;
}

// Output size of a forward window (conv or pool) along spatial dim i, kept symbolic where `in` or `k` is.
inline Dim window_out_dim(const InferContext& c, const Window& w, size_t i, const Dim& in, const Dim& k) {
  Dim s = w.strides[i];
  Dim ek = (k - 1) * w.dilations[i] + 1;  // the kernel's extent with dilation
  if (w.same()) return Dim::ceildiv(in, s);
  int64_t pb = w.pads[i], pe = w.pads[w.rank() + i];
  Dim span = in + pb + pe - ek;
  if (span.is_const() && span.value() < 0)
    c.error("spatial dim ", i, ": the window (extent ", ek.str(), ") is larger than the padded input (",
            (in + pb + pe).str(), ")");
  if (!w.ceil_mode || w.auto_pad == AutoPad::Valid) return Dim::floordiv(span, s) + 1;
  Dim out = Dim::ceildiv(span, s) + 1;
  // A last window that would start inside the end padding is dropped (as PyTorch does). Provably never the case
  // when the extent covers the end padding plus a stride, which keeps the common symbolic dims simple.
  if (ek.is_const() && ek.value() >= pe + w.strides[i]) return out;
  return Dim::min(out, Dim::floordiv(in + pb - 1, s) + 1);
}

// The concrete (begin, end) padding of a forward window along dim i, given the input and output sizes.
inline std::pair<int64_t, int64_t> window_pads(const Window& w, size_t i, int64_t in, int64_t out, int64_t k) {
  int64_t ek = (k - 1) * w.dilations[i] + 1;
  if (w.same()) {
    int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + ek - in);
    int64_t begin = w.auto_pad == AutoPad::SameUpper ? total / 2 : total - total / 2;
    return {begin, total - begin};
  }
  return {w.pads[i], w.pads[w.rank() + i]};
}

// The begin padding of ConvTranspose along dim i. With an explicit output size (output_shape or SAME), the total
// padding is what makes the full transposed output fit; when the output is larger than the full result, the
// extra goes at the end.
inline int64_t transpose_pad_begin(const Window& w, size_t i, int64_t in, int64_t out, int64_t k,
                                   int64_t output_padding, bool explicit_out) {
  if (!explicit_out && !w.same()) return w.pads[i];
  int64_t full = w.strides[i] * (in - 1) + output_padding + (k - 1) * w.dilations[i] + 1;
  int64_t total = full - out;
  if (total <= 0) return 0;
  return w.auto_pad == AutoPad::SameUpper ? total / 2 : total - total / 2;
}

}  // namespace cuvil::nn
