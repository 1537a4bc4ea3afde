#include "ir/shape_inference.h"

#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "ir/op_schema.h"
#include "ir/verifier.h"

namespace cuvil {

struct IncrementalShapeInference::Impl {
  void run(Graph& g) {
    for (Value* c : g.constants()) add_constant(c);
    for (auto& node : g.nodes()) infer_node(*node);
  }

  void add_constant(const Value* c) {
    const Tensor& t = c->constant();
    if (!is_float(t.dtype()) && t.dtype() != DType::str && t.rank() <= 1 && t.numel() <= kMaxDimsValueElements) {
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
    ctx.region_inferrer = [this, &n](Graph& region, const std::vector<TensorType>& in) {
      CUVIL_CHECK(in.size() == region.inputs().size(), "region '", region.name(), "' takes ",
                  region.inputs().size(), " inputs, given ", in.size());
      // Each level of regions is one level of recursion here: bounded (verifier.h).
      check_region_depth(n, depth_ + 1);
      for (size_t i = 0; i < in.size(); ++i) region.inputs()[i]->set_type(in[i]);
      struct Level {
        int& depth;
        explicit Level(int& d) : depth(d) { ++depth; }
        ~Level() { --depth; }
      } level(depth_);
      run(region);
      std::vector<TensorType> out;
      for (Value* v : region.outputs()) out.push_back(v->type());
      return out;
    };
    CUVIL_ASSERT(schema.infer);
    check_arity(n);
    try {
      schema.infer(ctx);
    } catch (const UnknownRankError&) {
      return type_with_unknown_ranks(n, ctx);
    } catch (const std::out_of_range&) {
      // An inference that indexes dims without asking for the rank: the same case when an input's rank is unknown.
      if (!has_unknown_rank_input(n)) throw;
      return type_with_unknown_ranks(n, ctx);
    }
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      if (!ctx.output_set(i)) ctx.error("inference did not type output ", i);
      n.output(i)->set_type(ctx.output_types()[i]);
      auto& dv = ctx.output_dims_values()[i];
      if (dv) dims_values_[n.output(i)] = std::move(*dv);
    }
  }

  static bool has_unknown_rank_input(const Node& n) {
    for (const Value* v : n.inputs())
      if (v && !v->shape().rank_known()) return true;
    return false;
  }

  // A node whose inference needs ranks that are unknown at compile time: its outputs get unknown ranks, and their
  // element types come from the node's inference run with those inputs given a probe rank (the first of 0..8 the
  // op accepts; element types do not depend on ranks), else input 0's. The runtime infers the real shapes.
  void type_with_unknown_ranks(Node& n, const InferContext& failed) {
    CUVIL_CHECK(has_unknown_rank_input(n), failed.node().describe(), ": inference needs a rank that is unknown");
    std::vector<std::optional<DType>> dtypes(n.num_outputs());
    for (size_t rank = 0; rank <= 8 && !dtypes.empty() && !dtypes[0]; ++rank) {
      std::vector<TensorType> probe(n.num_inputs());
      std::vector<const TensorType*> types;
      std::vector<const Tensor*> values;
      for (size_t i = 0; i < n.num_inputs(); ++i) {
        Value* v = n.input(i);
        if (v) {
          probe[i] = v->type();
          if (!v->shape().rank_known()) {
            std::vector<Dim> dims;
            for (size_t d = 0; d < rank; ++d) dims.push_back(Dim::symbol("_probe" + std::to_string(d)));
            probe[i].shape = Shape(dims);
          }
        }
        types.push_back(v ? &probe[i] : nullptr);
        values.push_back(v && v->is_constant() ? &v->constant() : nullptr);
      }
      int64_t scratch = 0;
      InferContext ctx(n, types, values, {}, &scratch);
      ctx.region_inferrer = [](Graph&, const std::vector<TensorType>&) -> std::vector<TensorType> {
        fail("probe");
      };
      try {
        op_schema(n.op()).infer(ctx);
      } catch (const std::exception&) {
        continue;
      }
      for (size_t i = 0; i < n.num_outputs(); ++i)
        if (ctx.output_set(i)) dtypes[i] = ctx.output_types()[i].dtype;
    }
    DType fallback = DType::f32;
    for (const Value* v : n.inputs())
      if (v) {
        fallback = v->dtype();
        break;
      }
    for (size_t i = 0; i < n.num_outputs(); ++i)
      n.output(i)->set_type({dtypes[i].value_or(fallback), Shape::unknown_rank()});
  }

  std::unordered_map<const Value*, std::vector<Dim>> dims_values_;
  int64_t fresh_ = 0;
  int depth_ = 0;  // nesting level of the region being inferred (0: the graph infer_shapes was given)
};

IncrementalShapeInference::IncrementalShapeInference() : impl_(std::make_unique<Impl>()) {}
IncrementalShapeInference::~IncrementalShapeInference() = default;
void IncrementalShapeInference::add_constant(const Value* c) { impl_->add_constant(c); }
void IncrementalShapeInference::infer_node(Node& n) { impl_->infer_node(n); }
const std::vector<Dim>* IncrementalShapeInference::dims_value(const Value* v) const {
  auto it = impl_->dims_values_.find(v);
  return it == impl_->dims_values_.end() ? nullptr : &it->second;
}

void infer_shapes(Graph& g) { IncrementalShapeInference::Impl().run(g); }

std::vector<TensorType> infer_region_types(const Graph& region, const std::vector<TensorType>& input_types) {
  CUVIL_CHECK(input_types.size() == region.inputs().size(), "region '", region.name(), "' takes ",
              region.inputs().size(), " inputs, given ", input_types.size());
  std::vector<TensorType> types(region.num_values());
  std::vector<bool> known(region.num_values(), false);
  for (size_t i = 0; i < input_types.size(); ++i) {
    types[size_t(region.inputs()[i]->id())] = input_types[i];
    known[size_t(region.inputs()[i]->id())] = true;
  }
  for (const Value* c : region.constants()) {
    types[size_t(c->id())] = c->type();
    known[size_t(c->id())] = true;
  }
  int64_t fresh = 0;
  for (const auto& n : region.nodes()) {
    CUVIL_CHECK(n->regions().empty(), n->describe(), ": a self-contained region may not hold regions");
    check_arity(*n);
    std::vector<const TensorType*> in_types;
    std::vector<const Tensor*> in_values;
    for (const Value* v : n->inputs()) {
      if (!v) {
        in_types.push_back(nullptr);
        in_values.push_back(nullptr);
        continue;
      }
      CUVIL_CHECK(v->graph() == &region && known[size_t(v->id())], n->describe(), ": input '", v->name(),
                  "' is not a value of the self-contained region '", region.name(), "'");
      in_types.push_back(&types[size_t(v->id())]);
      in_values.push_back(v->is_constant() ? &v->constant() : nullptr);
    }
    InferContext ctx(*n, in_types, in_values, {}, &fresh);
    op_schema(n->op()).infer(ctx);
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      CUVIL_CHECK(ctx.output_set(k), n->describe(), ": inference left output ", k, " untyped");
      types[size_t(n->output(k)->id())] = ctx.output_types()[k];
      known[size_t(n->output(k)->id())] = true;
    }
  }
  return types;
}

}  // namespace cuvil
