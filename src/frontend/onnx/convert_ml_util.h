// Small helpers the ai.onnx.ml converters share (convert_ml.cpp, convert_trees.cpp): an intermediate node's
// output, typed attribute reads that fail naming the attribute, and ONNX-ML's float computation.
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/converter.h"

namespace cuvil::onnx_ml {

inline Value* temp(ConvertContext& c, OpKind op, std::vector<Value*> inputs, AttrMap attrs = {}) {
  return c.emit_temp(op, std::move(inputs), std::move(attrs))->output(0);
}

inline std::string string_attr(ConvertContext& c, const char* name, const std::string& def) {
  auto a = c.take_attr(name);
  if (!a) return def;
  if (a->kind() != AttrKind::String) c.error("attribute '", name, "' must be a string");
  return a->s();
}

// Fails naming the first attribute no converter step took.
inline void no_more_attrs(ConvertContext& c) {
  if (!c.attrs().empty()) c.error("attribute '", c.attrs().begin()->first, "' is not supported");
}

// ONNX-ML computes in float: numeric inputs are cast to f32 first.
inline Value* as_f32(ConvertContext& c, Value* x) {
  return temp(c, OpKind::Cast, {x}, {{"to", Attribute(int64_t(dtype_onnx_id(DType::f32)))}});
}

}  // namespace cuvil::onnx_ml
