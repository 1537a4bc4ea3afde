// ONNX converters for the tensor family: version differences and lowerings (see converter.h).
//
// Opsets 18-28: Split's num_outputs (18), Pad's axes input (18) and wrap mode (19), and ScatterElements/ScatterND's
// max/min reductions (18) and SpaceToDepth's mode (28) are the op table's own; Range's stash_type (27) is handled
// below.
//
// The op table holds each op in its opset-13+ form, where lists that used to be attributes (Reshape's shape,
// Squeeze's axes, Split's split, Slice's starts/ends/axes, Pad's pads and value) are inputs. Older models get
// those attributes moved into constant inputs here.
#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

std::vector<int64_t> ints_attr(const ConvertContext& c, const Attribute& a, const char* name) {
  if (a.kind() != AttrKind::Ints) c.error("attribute '", name, "' must be a list of ints");
  return a.ints();
}

// Moves list attribute `name` into input `index` as an int64 constant (inputs before it must exist).
bool attr_to_input(ConvertContext& c, const char* name, size_t index) {
  auto a = c.take_attr(name);
  if (!a) return false;
  Value* v = c.const_i64(ints_attr(c, *a, name), name);
  auto& in = c.inputs();
  if (in.size() <= index) in.resize(index + 1, nullptr);
  if (in[index]) c.error("'", name, "' is given both as an attribute and as an input");
  in[index] = v;
  return true;
}

Value* temp(ConvertContext& c, OpKind op, std::vector<Value*> inputs, AttrMap attrs = {}) {
  return c.emit_temp(op, std::move(inputs), std::move(attrs))->output(0);
}

Value* require_input(const ConvertContext& c, size_t i) {
  Value* v = c.input(i);
  if (!v) c.error("input ", i, " is required");
  return v;
}

}  // namespace

void register_onnx_tensor(OnnxConverterTable& t) {
  // Reshape-1: `shape` attribute; `consumed_inputs` was a memory-planning hint with no semantics.
  t["Reshape"] = [](ConvertContext& c) {
    c.take_attr("consumed_inputs");
    if (c.opset() < 5) {
      c.inputs().resize(1);
      if (!attr_to_input(c, "shape", 1)) c.error("the 'shape' attribute is required");
    }
    c.emit(OpKind::Reshape);
  };

  // Squeeze/Unsqueeze before 13: `axes` attribute (optional for Squeeze, required for Unsqueeze).
  t["Squeeze"] = [](ConvertContext& c) {
    if (c.opset() < 13) attr_to_input(c, "axes", 1);
    c.emit(OpKind::Squeeze);
  };
  t["Unsqueeze"] = [](ConvertContext& c) {
    if (c.opset() < 13 && !attr_to_input(c, "axes", 1)) c.error("the 'axes' attribute is required");
    c.emit(OpKind::Unsqueeze);
  };

  // Split before 13: `split` attribute (opset 1 also took it as an optional input).
  t["Split"] = [](ConvertContext& c) {
    if (c.opset() < 13) attr_to_input(c, "split", 1);
    c.emit(OpKind::Split);
  };

  // Slice-1: `starts`, `ends`, `axes` attributes; steps were always 1.
  t["Slice"] = [](ConvertContext& c) {
    if (c.opset() < 10) {
      c.inputs().resize(1);
      if (!attr_to_input(c, "starts", 1) || !attr_to_input(c, "ends", 2))
        c.error("the 'starts' and 'ends' attributes are required");
      attr_to_input(c, "axes", 3);
    }
    c.emit(OpKind::Slice);
  };

  // Pad before 11: `pads` (opset 1: `paddings`) and `value` attributes.
  t["Pad"] = [](ConvertContext& c) {
    if (c.opset() < 11) {
      c.inputs().resize(1);
      bool ok = attr_to_input(c, "pads", 1) || attr_to_input(c, "paddings", 1);
      if (!ok) c.error("the 'pads' attribute is required");
      auto value = c.take_attr("value");
      if (value) {
        double v = value->kind() == AttrKind::Int ? double(value->i()) : value->f();
        // The value input must have data's dtype, which is only known after inference: CastLike converts it.
        if (v != 0) {
          Value* f = c.const_tensor(Tensor::scalar<float>(float(v)), "value");
          c.inputs().push_back(temp(c, OpKind::CastLike, {f, require_input(c, 0)}));
        }
      }
    }
    c.emit(OpKind::Pad);
  };

  // Concat before 4: `axis` was optional, defaulting to 1.
  t["Concat"] = [](ConvertContext& c) {
    if (c.opset() < 4 && !c.has_attr("axis")) c.attrs()["axis"] = Attribute(int64_t(1));
    c.emit(OpKind::Concat);
  };

  // Tile-1: Tile(input, tiles, axis) repeats along one axis. Lowered to the repeats vector of Tile-6:
  // repeats = Where(Range(0, rank) == axis, tiles, 1).
  t["Tile"] = [](ConvertContext& c) {
    if (c.opset() >= 6) {
      c.emit(OpKind::Tile);
      return;
    }
    Value* x = require_input(c, 0);
    Value* tiles = require_input(c, 1);
    Value* axis = require_input(c, 2);
    Value* rank = temp(c, OpKind::Size, {temp(c, OpKind::Shape, {x})});
    Value* zero = c.const_tensor(Tensor::scalar<int64_t>(0), "zero");
    Value* one = c.const_tensor(Tensor::scalar<int64_t>(1), "one");
    Value* axes = temp(c, OpKind::Range, {zero, rank, one});
    Value* hit = temp(c, OpKind::Equal, {axes, axis});
    Value* repeats = temp(c, OpKind::Where, {hit, tiles, one});
    c.emit_final(OpKind::Tile, {x, repeats}, {});
  };

  // OneHot-9 gave negative indices all off_value; from 11 they count from the back. Map negatives to `depth`,
  // which is out of range either way: indices' = Where(int64(indices) < 0, int64(depth), int64(indices)).
  t["OneHot"] = [](ConvertContext& c) {
    if (c.opset() >= 11) {
      c.emit(OpKind::OneHot);
      return;
    }
    Value* idx = require_input(c, 0);
    Value* depth = require_input(c, 1);
    AttrMap to_i64{{"to", Attribute(int64_t(dtype_onnx_id(DType::i64)))}};
    Value* idx64 = temp(c, OpKind::Cast, {idx}, to_i64);
    // depth may be [1]; as a scalar it cannot change the indices' rank when broadcast.
    Value* depth64 = temp(c, OpKind::Reshape, {temp(c, OpKind::Cast, {depth}, to_i64), c.const_i64({}, "scalar")});
    Value* zero = c.const_tensor(Tensor::scalar<int64_t>(0), "zero");
    Value* neg = temp(c, OpKind::Less, {idx64, zero});
    Value* fixed = temp(c, OpKind::Where, {neg, depth64, idx64});
    c.inputs()[0] = fixed;
    c.emit(OpKind::OneHot);
  };

  // Range-27's stash_type is the precision of float16 ranges' arithmetic; Cuvil's Range computes start + i * delta
  // in the element type (exact for every type of earlier opsets).
  t["Range"] = [](ConvertContext& c) {
    c.take_attr("stash_type");
    c.emit(OpKind::Range);
  };

  // Scatter (deprecated in opset 11) is ScatterElements without a reduction.
  t["Scatter"] = [](ConvertContext& c) { c.emit(OpKind::ScatterElements); };
}

}  // namespace cuvil
