// ONNX converters for the control family: version differences and lowerings (see converter.h).
//
// If and Loop have one form at every opset. Scan-9 and later match the op table; Scan-8 is rewritten here.
#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

// Scan-8 runs its body over a batch: every input has a leading batch axis, scan inputs scan axis 1, and each batch
// entry is an independent scan. That is a Scan-16 over the batch axis (all inputs scanned, no states) whose body
// is a Scan-16 running the original body on one batch entry:
//
//   outer Scan(num_scan_inputs = N + M) over (init..., x...)          -> stacks (final states..., scan outputs...)
//     body(init_b..., x_b...): inner Scan(num_scan_inputs = M, scan_input_directions = directions)
//                                (init_b..., x_b...) -> (final states..., scan outputs...)
void convert_scan8(ConvertContext& ctx) {
  if (ctx.input(0))
    ctx.error("sequence_lens (variable sequence lengths in Scan-8) is not supported; omit it or export with "
              "opset >= 9");
  std::optional<Attribute> body_attr = ctx.take_attr("body");
  std::optional<Attribute> num_attr = ctx.take_attr("num_scan_inputs");
  std::optional<Attribute> dirs_attr = ctx.take_attr("directions");
  if (!body_attr || body_attr->kind() != AttrKind::Graph) ctx.error("attribute 'body' (a graph) is required");
  if (!num_attr || num_attr->kind() != AttrKind::Int) ctx.error("attribute 'num_scan_inputs' (an int) is required");
  if (dirs_attr && dirs_attr->kind() != AttrKind::Ints) ctx.error("attribute 'directions' must be ints");
  if (!ctx.attrs().empty()) ctx.error("attribute '", ctx.attrs().begin()->first, "' is not supported");

  std::vector<Value*> inputs(ctx.inputs().begin() + (ctx.inputs().empty() ? 0 : 1), ctx.inputs().end());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i]) ctx.error("input ", i + 1, " is missing (only sequence_lens is optional)");
  int64_t m = num_attr->i();
  if (m < 1 || m > int64_t(inputs.size()))
    ctx.error("num_scan_inputs is ", m, " but the node has ", inputs.size(), " states and scan inputs");
  GraphPtr inner_body = body_attr->g();

  auto outer_body = std::make_shared<Graph>(inner_body->name() + "_batch");
  outer_body->set_parent(&ctx.graph());
  inner_body->set_parent(outer_body.get());
  std::vector<Value*> entry;  // one batch entry of every input; types come from shape inference
  for (Value* v : inputs)
    entry.push_back(outer_body->add_input(outer_body->unique_name(v->name() + "_b"),
                                          {v->dtype(), Shape::unknown_rank()}));
  std::vector<std::string> results;
  // Numbered: a body may yield one value twice, and names are only taken once the node exists.
  for (size_t i = 0; i < inner_body->outputs().size(); ++i)
    results.push_back(outer_body->unique_name(inner_body->outputs()[i]->name() + "_b" + std::to_string(i)));
  AttrMap inner_attrs{{"body", Attribute(inner_body)}, {"num_scan_inputs", Attribute(m)}};
  if (dirs_attr) inner_attrs["scan_input_directions"] = *dirs_attr;
  Node* inner = outer_body->add_node(OpKind::Scan, entry, results, std::move(inner_attrs), ctx.loc());
  outer_body->set_outputs(inner->outputs());

  AttrMap outer_attrs{{"body", Attribute(GraphPtr(outer_body))},
                      {"num_scan_inputs", Attribute(int64_t(inputs.size()))}};
  ctx.emit_final(OpKind::Scan, inputs, std::move(outer_attrs));
}

}  // namespace

void register_onnx_control(OnnxConverterTable& t) {
  t["Scan"] = [](ConvertContext& ctx) {
    if (ctx.opset() < 9) return convert_scan8(ctx);
    ctx.emit(OpKind::Scan);
  };
  // Sequence and optional ops are converted before this table (static_sequences.h).
}

}  // namespace cuvil
