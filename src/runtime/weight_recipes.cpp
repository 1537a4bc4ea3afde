#include "runtime/weight_recipes.h"

#include <cctype>
#include <cmath>
#include <set>
#include <unordered_map>

#include "ir/op_schema.h"
#include "ir/ops/batchnorm_fold.h"
#include "support/error.h"

namespace cuvil {

const Tensor* WeightRecipes::original(const std::string& name) const {
  for (const auto& [n, t] : originals)
    if (n == name) return &t;
  return nullptr;
}

bool WeightRecipes::derived(const std::string& name) const {
  for (const FoldRecipe& f : folds)
    if (f.out_w == name || f.out_b == name) return true;
  return false;
}

namespace {

const Tensor& need(const WeightRecipes& r, const std::string& name) {
  const Tensor* t = r.original(name);
  CUVIL_CHECK(t, "weight recipes: no original weight '", name, "'");
  return *t;
}

std::vector<std::string> inputs_of(const FoldRecipe& f) {
  std::vector<std::string> v = {f.w, f.scale, f.bias, f.mean, f.var};
  if (!f.b.empty()) v.push_back(f.b);
  return v;
}

}  // namespace

std::pair<Tensor, Tensor> evaluate(const FoldRecipe& f, const WeightRecipes& r) {
  const Tensor& w = need(r, f.w);
  const Tensor* b = f.b.empty() ? nullptr : &need(r, f.b);
  if (w.dtype() == DType::f64)
    return bn_fold::folded_params<double>(w, b, need(r, f.scale), need(r, f.bias), need(r, f.mean), need(r, f.var),
                                          f.eps, f.by_column);
  return bn_fold::folded_params<float>(w, b, need(r, f.scale), need(r, f.bias), need(r, f.mean), need(r, f.var),
                                       f.eps, f.by_column);
}

namespace {

// Checks the fold's inputs (all originals, of one float dtype, each parameter one value per output channel) and
// returns the output channels.
int64_t check_inputs(const FoldRecipe& f, const WeightRecipes& r) {
  const Tensor& w = need(r, f.w);
  CUVIL_CHECK(w.dtype() == DType::f32 || w.dtype() == DType::f64, "weight recipes: '", f.w, "' is not f32 or f64");
  CUVIL_CHECK(w.rank() >= (f.by_column ? 2u : 1u), "weight recipes: '", f.w, "' has too few dims");
  int64_t m = f.by_column ? w.dim(1) : w.dim(0);
  CUVIL_CHECK(m > 0, "weight recipes: '", f.w, "' has no output channel");
  for (const std::string& n : inputs_of(f)) {
    if (n == f.w) continue;
    const Tensor& p = need(r, n);
    CUVIL_CHECK(p.dtype() == w.dtype() && p.shape() == std::vector<int64_t>{m}, "weight recipes: '", n,
                "' does not fit '", f.w, "'");
  }
  CUVIL_CHECK(std::isfinite(f.eps), "weight recipes: eps is not finite");
  return m;
}

}  // namespace

void check_recipes(const Graph& g, const WeightRecipes& r) {
  std::set<std::string> names;
  for (const auto& [n, t] : r.originals) {
    CUVIL_CHECK(names.insert(n).second, "weight recipes: original '", n, "' twice");
    CUVIL_CHECK(t.defined(), "weight recipes: original '", n, "' has no data");
  }
  std::set<std::string> outs;
  for (const FoldRecipe& f : r.folds) {
    int64_t m = check_inputs(f, r);
    const Tensor& w = need(r, f.w);
    for (const auto& [name, dims] :
         {std::pair<std::string, std::vector<int64_t>>{f.out_w, w.shape()}, {f.out_b, std::vector<int64_t>{m}}}) {
      Value* v = g.lookup(name);
      CUVIL_CHECK(v && v->is_constant() && v->graph() == &g, "weight recipes: '", name, "' is not a constant of the graph");
      CUVIL_CHECK(v->dtype() == w.dtype() && v->shape().is_static() && v->shape().static_dims() == dims,
                  "weight recipes: '", name, "' does not have the type its fold gives");
      CUVIL_CHECK(outs.insert(name).second, "weight recipes: '", name, "' made by two folds");
    }
  }
}

std::vector<WeightInfo> list_weights(const Graph& g, const WeightRecipes& r) {
  std::vector<WeightInfo> out;
  for (WeightInfo& w : list_weights(g))
    if (!r.derived(w.name)) out.push_back(std::move(w));
  for (const auto& [n, t] : r.originals) {
    bool listed = false;
    for (const WeightInfo& w : out) listed |= w.name == n;
    if (!listed) out.push_back({n, TensorType{t.dtype(), Shape::of(t.shape())}, is_float(t.dtype())});
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> translate_updates(const Graph& g, const WeightRecipes& r,
                                                              const std::vector<std::pair<std::string, Tensor>>& updates,
                                                              bool strict, WeightRecipes* next) {
  std::vector<WeightInfo> known = list_weights(g, r);
  std::unordered_map<std::string, const WeightInfo*> by_name;
  for (const WeightInfo& w : known) by_name.emplace(w.name, &w);
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const auto& [name, t] : updates) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      for (const FoldRecipe& f : r.folds)
        if (f.out_w == name || f.out_b == name) {
          problems.push_back("'" + name + "' is '" + f.w + "' with a BatchNormalization folded in: update '" + f.w +
                             "'" + (f.b.empty() ? "" : ", '" + f.b + "'") + " and the BatchNormalization's '" +
                             f.scale + "', '" + f.bias + "', '" + f.mean + "', '" + f.var + "' instead");
          break;
        }
      if (!r.derived(name)) problems.push_back("'" + name + "' is not a weight of this model");
      continue;
    }
    if (!seen.insert(name).second) {
      problems.push_back("'" + name + "' is given twice");
      continue;
    }
    const TensorType& want = it->second->type;
    if (!t.defined()) problems.push_back("'" + name + "' has no data");
    else if (t.dtype() != want.dtype)
      problems.push_back("'" + name + "' is " + std::string(dtype_name(want.dtype)) + ", given " +
                         std::string(dtype_name(t.dtype())));
    else if (!want.shape.is_static() || want.shape.static_dims() != t.shape())
      problems.push_back("'" + name + "' has shape " + want.str() + ", given " + t.type_str());
  }
  if (strict) {
    std::string missing;
    size_t count = 0;
    for (const WeightInfo& w : known)
      if (w.required && !seen.count(w.name) && count++ < 8) missing += (missing.empty() ? "'" : ", '") + w.name + "'";
    if (count)
      problems.push_back("strict update: missing " + missing + (count > 8 ? ", ... (" + std::to_string(count) + " in all)" : "") +
                         " (update a subset with strict=False)");
  }
  if (!problems.empty()) {
    std::string msg = "weights not updated: ";
    for (size_t i = 0; i < problems.size() && i < 8; ++i) msg += (i ? "; " : "") + problems[i];
    if (problems.size() > 8) msg += "; and " + std::to_string(problems.size() - 8) + " more";
    throw InputError(msg);
  }
  *next = r;
  std::set<std::string> touched;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : updates) {
    for (auto& [n, held] : next->originals)
      if (n == name) held = t, touched.insert(name);
    Value* v = g.lookup(name);
    if (v && v->is_constant() && v->graph() == &g) out.emplace_back(name, t);  // (also a constant of its own)
  }
  for (const FoldRecipe& f : next->folds) {
    bool changed = false;
    for (const std::string& n : inputs_of(f)) changed |= touched.count(n) != 0;
    if (!changed) continue;
    auto [nw, nb] = evaluate(f, *next);
    out.emplace_back(f.out_w, nw);
    out.emplace_back(f.out_b, nb);
  }
  return out;
}

namespace {

// Whether `name` is `base` or `base_<digits>` (Graph::unique_name's names).
bool named_after(const std::string& name, const std::string& base) {
  if (name == base) return true;
  if (name.size() <= base.size() + 1 || name.compare(0, base.size(), base) != 0 || name[base.size()] != '_') return false;
  for (size_t i = base.size() + 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

// The one constant of `g` named after `base` holding exactly `t`'s bytes, or null.
const Value* unique_match(const Graph& g, const std::string& base, const Tensor& t) {
  const Value* found = nullptr;
  for (const Value* v : g.constants()) {
    if (!named_after(v->name(), base) || !v->constant().same_bytes(t)) continue;
    if (found) return nullptr;  // (ambiguous)
    found = v;
  }
  return found;
}

// The constant `v` is, through Identity nodes (exporters pass shared parameters on so), or null.
const Value* constant_behind(const Value* v) {
  for (int depth = 0; v && depth < 64; ++depth) {
    if (v->is_constant()) return v;
    const Node* p = v->producer();
    if (!p || p->op() != OpKind::Identity || p->num_inputs() != 1) return nullptr;
    v = p->input(0);
  }
  return nullptr;
}

}  // namespace

WeightRecipes derive_fold_recipes(const Graph& source, const Graph& optimized) {
  WeightRecipes r;
  for (const auto& node : source.nodes()) {
    const Node* bn = node.get();
    if (bn->op() != OpKind::BatchNormalization || bn->num_inputs() < 5 || bn->num_outputs() != 1) continue;
    const Value* y = bn->input(0);
    const Node* p = y ? y->producer() : nullptr;
    if (!p || p->graph() != &source) continue;
    AttrReader a(*p);
    FoldRecipe f;
    const Value *w0 = p->num_inputs() > 1 ? p->input(1) : nullptr, *b0 = nullptr;
    if (p->op() == OpKind::Conv) b0 = p->num_inputs() > 2 ? p->input(2) : nullptr;
    else if (p->op() == OpKind::Gemm) b0 = p->num_inputs() > 2 ? p->input(2) : nullptr, f.by_column = a.i("transB") == 0;
    else if (p->op() == OpKind::MatMul) f.by_column = true;
    else continue;
    const Value *w = constant_behind(w0), *b = constant_behind(b0);
    bool ok = w && (!b0 || b);
    for (size_t k = 1; k < 5; ++k) ok = ok && constant_behind(bn->input(k));
    if (!ok) continue;
    DType t = w->dtype();
    if (t != DType::f32 && t != DType::f64) continue;
    f.w = w->name();
    f.b = b ? b->name() : "";
    f.scale = constant_behind(bn->input(1))->name();
    f.bias = constant_behind(bn->input(2))->name();
    f.mean = constant_behind(bn->input(3))->name();
    f.var = constant_behind(bn->input(4))->name();
    f.eps = AttrReader(*bn).f("epsilon");
    WeightRecipes local;
    for (const Value* v : std::initializer_list<const Value*>{w, b, constant_behind(bn->input(1)), constant_behind(bn->input(2)),
                                                           constant_behind(bn->input(3)), constant_behind(bn->input(4))})
      if (v) local.originals.emplace_back(v->name(), v->constant());
    std::pair<Tensor, Tensor> folded;
    try {
      check_inputs(f, local);
      folded = evaluate(f, local);
    } catch (const Error&) {
      continue;  // (parameters the pass would not fold either)
    }
    // (named after the constant, or after the value that passed it on when identities were removed)
    const Value* ow = unique_match(optimized, f.w + "_bn", folded.first);
    if (!ow && w0 != w) ow = unique_match(optimized, w0->name() + "_bn", folded.first);
    const Value* ob = unique_match(optimized, (b ? f.b : f.w) + "_bn_bias", folded.second);
    if (!ob && (b ? b0 != b : w0 != w)) ob = unique_match(optimized, (b ? b0 : w0)->name() + "_bn_bias", folded.second);
    if (!ow || !ob) continue;
    f.out_w = ow->name();
    f.out_b = ob->name();
    for (const auto& [n, t] : local.originals)
      if (!r.original(n)) r.originals.emplace_back(n, t);
    r.folds.push_back(f);
  }
  return r;
}

}  // namespace cuvil
