// FusedKernel(inputs...) -> outputs...: a group of element-wise ops and row reductions that the fuse-elementwise
// pass outlined into its `body` region, computed as one generated kernel (src/codegen). The body is self-contained:
// its inputs are the node's inputs, in order, its outputs the node's outputs, and it captures nothing from
// enclosing graphs, so its types follow from the input types alone (at compile time and for each call's shapes).
#include "ir/ops/infer_util.h"
#include "ir/shape_inference.h"

namespace cuvil {

CUVIL_DEFINE_OP(FusedKernel) {
  s.inputs(0, -1).outputs(1, -1).required_attr("body", AttrKind::Graph);
  s.infer_with([](InferContext& c) {
    const Graph& body = *c.g("body");
    if (body.inputs().size() != c.num_inputs())
      c.error("body takes ", body.inputs().size(), " inputs, the node has ", c.num_inputs());
    if (body.outputs().size() != c.num_outputs())
      c.error("body yields ", body.outputs().size(), " values, the node has ", c.num_outputs(), " outputs");
    std::vector<TensorType> in;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      const TensorType& t = c.input_type(i);
      if (t.dtype != body.inputs()[i]->dtype())
        c.error("input ", i, " is ", dtype_name(t.dtype), " but the body takes ", dtype_name(body.inputs()[i]->dtype()));
      in.push_back(t);
    }
    std::vector<TensorType> types = infer_region_types(body, in);
    for (size_t k = 0; k < c.num_outputs(); ++k) {
      const TensorType& t = types[size_t(body.outputs()[k]->id())];
      c.set_output(k, t.dtype, t.shape);
    }
  });
}

}  // namespace cuvil
