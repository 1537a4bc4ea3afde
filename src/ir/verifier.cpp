#include "ir/verifier.h"

#include <stdexcept>

#include <unordered_set>

#include "ir/op_schema.h"

namespace cuvil {

namespace {

// A dim that re-inference made fresh (a data-dependent size) matches anything recorded.
bool dims_match(const Dim& inferred, const Dim& recorded) {
  if (inferred == recorded) return true;
  std::set<std::string> syms;
  inferred.collect_symbols(syms);
  for (auto& s : syms)
    if (!s.empty() && s[0] == '_') return true;
  return false;
}

bool types_match(const TensorType& inferred, const TensorType& recorded) {
  if (inferred.dtype != recorded.dtype) return false;
  if (!inferred.shape.rank_known() || !recorded.shape.rank_known()) return true;
  if (inferred.shape.rank() != recorded.shape.rank()) return false;
  for (size_t i = 0; i < inferred.shape.rank(); ++i)
    if (!dims_match(inferred.shape[i], recorded.shape[i])) return false;
  return true;
}

class Verifier {
 public:
  void graph(const Graph& g) {
    for (Value* v : g.inputs()) define(v);
    for (Value* c : g.constants()) define(c);
    for (auto& n : g.nodes()) node(*n);
    for (Value* v : g.outputs()) {
      CUVIL_CHECK(v, "graph '", g.name(), "' has a null output");
      CUVIL_CHECK(defined_.count(v), "graph '", g.name(), "' output '", v->name(), "' is not defined in scope");
    }
  }

 private:
  void node(const Node& n) {
    const OpSchema& s = op_schema(n.op());
    auto where = n.describe();
    int ni = int(n.num_inputs());
    check_arity(n);
    for (auto& [name, a] : n.attrs()) {
      const AttrSpec* spec = s.find_attr(name);
      CUVIL_CHECK(spec, where, ": unknown attribute '", name, "'");
      CUVIL_CHECK(spec->kind == a.kind(), where, ": attribute '", name, "' must be ", attr_kind_name(spec->kind),
                  ", got ", attr_kind_name(a.kind()));
    }
    for (auto& spec : s.attrs)
      CUVIL_CHECK(!spec.required || n.has_attr(spec.name), where, ": required attribute '", spec.name, "' is missing");
    for (int i = 0; i < ni; ++i) {
      Value* v = n.input(size_t(i));
      if (!v) continue;
      CUVIL_CHECK(defined_.count(v), where, ": input ", i, " '", v->name(),
                  "' is used before it is defined (or outside its scope)");
    }
    // Regions see everything defined so far; their own values go out of scope after them (undone through the
    // trail, so a graph of many small regions costs no copy of everything defined before each).
    std::vector<Graph*> regions = n.regions();
    if (!regions.empty()) check_region_depth(n, depth_ + 1);
    for (Graph* r : regions) {
      size_t mark = trail_.size();
      ++depth_;
      graph(*r);
      --depth_;
      for (size_t k = trail_.size(); k-- > mark;) defined_.erase(trail_[k]);
      trail_.resize(mark);
    }
    check_types(n);
    for (Value* v : n.outputs()) {
      CUVIL_CHECK(v && v->producer() == &n, where, ": output bookkeeping is inconsistent");
      define(v);
    }
  }

  void define(const Value* v) {
    if (defined_.insert(v).second) trail_.push_back(v);
  }

  void check_types(const Node& n) {
    std::vector<const TensorType*> types;
    std::vector<const Tensor*> values;
    for (Value* v : n.inputs()) {
      types.push_back(v ? &v->type() : nullptr);
      values.push_back(v && v->is_constant() ? &v->constant() : nullptr);
    }
    InferContext ctx(n, types, values, {}, &fresh_);
    // Regions were verified on their own; here only their signatures matter.
    ctx.region_inferrer = [&n](Graph& region, const std::vector<TensorType>& in) {
      CUVIL_CHECK(in.size() == region.inputs().size(), n.describe(), ": region '", region.name(), "' takes ",
                  region.inputs().size(), " inputs, the op passes ", in.size());
      std::vector<TensorType> out;
      for (Value* v : region.outputs()) out.push_back(v->type());
      return out;
    };
    bool unknown_rank_input = false;
    for (const Value* v : n.inputs()) unknown_rank_input |= v && !v->shape().rank_known();
    try {
      op_schema(n.op()).infer(ctx);
    } catch (const UnknownRankError&) {
      // Shape inference typed such a node's outputs with unknown ranks; only that can be checked here.
      for (const Value* out : n.outputs())
        CUVIL_CHECK(!out->shape().rank_known(), n.describe(), ": output '", out->name(), "' is typed ",
                    out->type().str(), " though the node's inputs leave its rank unknown");
      return;
    } catch (const std::out_of_range&) {
      if (!unknown_rank_input) throw;
      return;
    }
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      const TensorType& rec = n.output(i)->type();
      CUVIL_CHECK(ctx.output_set(i), n.describe(), ": inference leaves output ", i, " untyped");
      const TensorType& inf = ctx.output_types()[i];
      CUVIL_CHECK(types_match(inf, rec), n.describe(), ": output ", i, " '", n.output(i)->name(), "' is typed ",
                  rec.str(), " but its inputs give ", inf.str());
    }
  }

  std::unordered_set<const Value*> defined_;
  std::vector<const Value*> trail_;  // defined_'s values in the order they were defined
  int depth_ = 0;                    // nesting level of the graph being verified (0: the top-level graph)
  int64_t fresh_ = 1000000;
};

}  // namespace

void check_region_depth(const Node& n, int depth) {
  // A FusedKernel's body is a kernel's definition and holds no regions (infer_region_types refuses them): one
  // level more at most, so fusion may wrap the innermost ops of the deepest region allowed.
  if (n.op() == OpKind::FusedKernel) --depth;
  CUVIL_CHECK(depth <= kMaxRegionDepth, n.describe(), ": regions nest ", depth,
              " levels deep here, more than the limit of ", kMaxRegionDepth);
}

void verify(const Graph& g) {
  Verifier().graph(g);
}

}  // namespace cuvil
