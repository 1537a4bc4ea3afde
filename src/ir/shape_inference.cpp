#include "ir/shape_inference.h"

#include <unordered_map>

#include "ir/op_schema.h"

namespace cuvil {

struct IncrementalShapeInference::Impl {
  void run(Graph& g) {
    for (Value* c : g.constants()) add_constant(c);
    for (auto& node : g.nodes()) infer_node(*node);
  }

  void add_constant(const Value* c) {
    const Tensor& t = c->constant();
    if (!is_float(t.dtype()) && t.rank() <= 1 && t.numel() <= kMaxDimsValueElements) {
      std::vector<Dim> v;
      for (int64_t k = 0; k < t.numel(); ++k) v.push_back(Dim(t.get_i64(k)));
      dims_values_[c] = std::move(v);
    }
  }

  void infer_node(Node& n) {
    const OpSchema& schema = op_schema(n.op());
    std::vector<const TensorType*> types;
    std::vector<const Tensor*> values;
    std::vector<const std::vector<Dim>*> dims_values;
    for (Value* v : n.inputs()) {
      types.push_back(v ? &v->type() : nullptr);
      values.push_back(v && v->is_constant() ? &v->constant() : nullptr);
      auto it = v ? dims_values_.find(v) : dims_values_.end();
      dims_values.push_back(it != dims_values_.end() ? &it->second : nullptr);
    }
    InferContext ctx(n, std::move(types), std::move(values), std::move(dims_values), &fresh_);
    ctx.region_inferrer = [this](Graph& region, const std::vector<TensorType>& in) {
      CUVIL_CHECK(in.size() == region.inputs().size(), "region '", region.name(), "' takes ",
                  region.inputs().size(), " inputs, given ", in.size());
      for (size_t i = 0; i < in.size(); ++i) region.inputs()[i]->set_type(in[i]);
      run(region);
      std::vector<TensorType> out;
      for (Value* v : region.outputs()) out.push_back(v->type());
      return out;
    };
    CUVIL_ASSERT(schema.infer);
    check_arity(n);
    schema.infer(ctx);
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      if (!ctx.output_set(i)) ctx.error("inference did not type output ", i);
      n.output(i)->set_type(ctx.output_types()[i]);
      auto& dv = ctx.output_dims_values()[i];
      if (dv) dims_values_[n.output(i)] = std::move(*dv);
    }
  }

  std::unordered_map<const Value*, std::vector<Dim>> dims_values_;
  int64_t fresh_ = 0;
};

IncrementalShapeInference::IncrementalShapeInference() : impl_(std::make_unique<Impl>()) {}
IncrementalShapeInference::~IncrementalShapeInference() = default;
void IncrementalShapeInference::add_constant(const Value* c) { impl_->add_constant(c); }
void IncrementalShapeInference::infer_node(Node& n) { impl_->infer_node(n); }

void infer_shapes(Graph& g) { IncrementalShapeInference::Impl().run(g); }

}  // namespace cuvil
