#include "runtime/weights.h"

#include <set>
#include <unordered_map>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "support/error.h"

namespace cuvil {

std::vector<WeightInfo> list_weights(const Graph& g) {
  std::vector<WeightInfo> r;
  for (const Value* v : g.constants()) r.push_back({v->name(), v->type(), is_float(v->dtype())});
  return r;
}

std::shared_ptr<Graph> clone_graph(const Graph& g) {
  // Through the text form, which round-trips exactly (the artifact relies on it); tensors that do not print
  // inline travel by index, so their storage is shared, not copied.
  std::vector<Tensor> held;
  PrintOptions po;
  po.external = [&](const Tensor& t) {
    held.push_back(t);
    return int64_t(held.size() - 1);
  };
  std::string text = print_graph(g, po);
  ParseOptions pa;
  pa.external = [&](int64_t i, DType dtype, const std::vector<int64_t>& dims) {
    CUVIL_ASSERT(i >= 0 && size_t(i) < held.size() && held[size_t(i)].dtype() == dtype &&
                     held[size_t(i)].shape() == dims,
                 "clone_graph: external constant ", i, " does not round-trip");
    return held[size_t(i)];
  };
  std::shared_ptr<Graph> c = parse_graph(text, pa);
  infer_shapes(*c);
  verify(*c);
  return c;
}

void check_weights(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& updates, bool strict) {
  std::unordered_map<std::string, const Value*> by_name;
  for (const Value* v : g.constants()) by_name.emplace(v->name(), v);
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const auto& [name, t] : updates) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      problems.push_back("'" + name + "' is not a weight of this model");
      continue;
    }
    if (!seen.insert(name).second) {
      problems.push_back("'" + name + "' is given twice");
      continue;
    }
    const Value* v = it->second;
    if (!t.defined()) {
      problems.push_back("'" + name + "' has no data");
    } else if (t.dtype() != v->dtype()) {
      problems.push_back("'" + name + "' is " + std::string(dtype_name(v->dtype())) + ", given " +
                         std::string(dtype_name(t.dtype())));
    } else if (!v->shape().is_static() || v->shape().static_dims() != t.shape()) {
      problems.push_back("'" + name + "' has shape " + v->type().str() + ", given " + t.type_str());
    }
  }
  if (strict) {
    std::vector<std::string> missing;
    for (const Value* v : g.constants())
      if (is_float(v->dtype()) && !seen.count(v->name())) missing.push_back("'" + v->name() + "'");
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
      if (missing.size() > 8) list += ", ... (" + std::to_string(missing.size()) + " in all)";
      problems.push_back("strict update: missing " + list + " (update a subset with strict=False)");
    }
  }
  if (problems.empty()) return;
  std::string msg = "weights not updated: ";
  for (size_t i = 0; i < problems.size() && i < 8; ++i) msg += (i ? "; " : "") + problems[i];
  if (problems.size() > 8) msg += "; and " + std::to_string(problems.size() - 8) + " more";
  throw InputError(msg);
}

std::shared_ptr<Graph> with_weights(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& updates,
                                    bool strict) {
  check_weights(g, updates, strict);
  std::shared_ptr<Graph> c = clone_graph(g);
  std::vector<Value*> old;
  std::vector<std::pair<Value*, std::string>> fresh;
  for (const auto& [name, t] : updates) {
    Value* v = c->lookup(name);
    CUVIL_ASSERT(v && v->is_constant() && v->graph() == c.get(), "with_weights: '", name, "' lost in the copy");
    // A new constant takes the old one's uses (graph outputs included), then, once the old one is gone, its name.
    Value* n = c->add_constant(c->unique_name(name + "_new"), t);
    c->replace_all_uses(v, n);
    old.push_back(v);
    fresh.emplace_back(n, name);
  }
  c->erase_constants(old);
  for (const auto& [n, name] : fresh) c->rename_value(n, name);
  infer_shapes(*c);
  verify(*c);
  return c;
}

}  // namespace cuvil
