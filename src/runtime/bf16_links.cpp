// bf16 activations between bf16 convolutions: which values link, and the graph copy that says so (bf16_links.h).
#include "runtime/bf16_links.h"

#include <cstdlib>
#include <map>
#include <string>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/onednn/onednn_kernels.h"
#include "runtime/region_uses.h"
#include "runtime/weights.h"

namespace cuvil {

namespace {

int64_t attr_i(const Node& n, const char* name) { return n.has_attr(name) ? n.attr(name).i() : 0; }

// CUVIL_GROUPED_LINKS=0: grouped convolutions neither link nor run bf16 (as before they did; comparisons).
bool grouped_links() {
  const char* env = std::getenv("CUVIL_GROUPED_LINKS");
  return !(env && std::string(env) == "0");
}

// A convolution a bf16 executor runs in bf16: f32 constant weights (and bias), not raised to fp32 by its own
// precision. Grouped ones too: the bf16 kernel takes them where an end is linked (kernels/onednn/conv.cpp).
bool bf16_conv(const Node& n) {
  if (n.op() != OpKind::FusedConv) return false;
  if (attr_i(n, "group") > 1 && !grouped_links()) return false;
  if (n.has_attr("precision") && n.attr("precision").s() == "fp32") return false;
  const Value* w = n.input(1);
  if (!w || !w->is_constant() || w->dtype() != DType::f32) return false;
  if (n.input(2) && !n.input(2)->is_constant()) return false;
  size_t rank = w->shape().rank_known() ? w->shape().rank() : 0;
  return rank >= 3 && rank <= 5;
}

// A product a bf16 executor runs in bf16: FusedMatMul with a constant f32 B of one matrix (leading dims 1), bias
// constant or absent, not raised to fp32 by its own precision. A product's output links only without a residual
// sum (the sum post-op would read it in the output's type).
bool bf16_product(const Node& n) {
  if (n.op() != OpKind::FusedMatMul) return false;
  if (n.has_attr("precision") && n.attr("precision").s() == "fp32") return false;
  const Value* b = n.input(1);
  if (!b || !b->is_constant() || b->dtype() != DType::f32 || !b->shape().rank_known()) return false;
  const auto& dims = b->shape().dims();
  for (size_t d = 0; d + 2 < dims.size(); ++d)
    if (!dims[d].is_const() || dims[d].value() != 1) return false;
  return !n.input(2) || n.input(2)->is_constant();
}

bool writes_graph_output(const Node& n, const Graph& g) {
  for (const Value* o : g.outputs())
    if (o->producer() == &n) return true;
  return false;
}

// The indices (in g.nodes()) of the producers whose output links.
std::vector<size_t> find_links(const Graph& g) {
  std::map<const Value*, std::vector<std::pair<const Node*, size_t>>> uses;
  std::map<const Value*, int> blocked;
  for (const auto& n : g.nodes()) {
    for (size_t k = 0; k < n->num_inputs(); ++k)
      if (n->input(k)) uses[n->input(k)].push_back({n.get(), k});
    for (const Graph* r : n->regions()) note_region_uses(*r, g, blocked);
  }
  for (const Value* o : g.outputs()) blocked[o] = 1;
  std::vector<size_t> links;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& p = *nodes[i];
    bool conv = bf16_conv(p), product = bf16_product(p) && !(p.num_inputs() > 3 && p.input(3));
    if (!(conv || product) || p.num_outputs() != 1) continue;
    const Value* v = p.output(0);
    if (blocked.count(v) || v->dtype() != DType::f32) continue;
    auto it = uses.find(v);
    if (it == uses.end() || it->second.empty()) continue;
    bool ok = true;
    // A MaxPool reading a convolution's output passes it on: its readers count as v's (max commutes with
    // rounding to bf16, so pooling the bf16 values gives the rounded pooled values; oneDNN pools bf16).
    std::vector<std::pair<const Node*, size_t>> readers;
    for (auto [c, k] : it->second) {
      if (!conv || c->op() != OpKind::MaxPool) {
        readers.push_back({c, k});
        continue;
      }
      const Value* pooled = c->num_outputs() == 1 ? c->output(0) : nullptr;
      auto pu = pooled ? uses.find(pooled) : uses.end();
      ok = ok && pooled && !blocked.count(pooled) && pu != uses.end() && !pu->second.empty();
      if (!ok) break;
      for (auto [r, rk] : pu->second) {
        ok = ok && rk == 0 && r->op() != OpKind::MaxPool;
        readers.push_back({r, rk});
      }
    }
    for (auto [c, k] : readers) {
      // convolutions to convolutions (X or residual), products to products' A; a product writing a graph output
      // stays f32 at bf16 (kernel selection's final-output rule), so it takes no link
      if (conv) ok = ok && (k == 0 || k == 3) && bf16_conv(*c);
      else ok = ok && k == 0 && bf16_product(*c) && !writes_graph_output(*c, g);
      for (size_t j = 0; ok && j < c->num_inputs(); ++j) ok = j == k || c->input(j) != c->input(k);  // one use
    }
    if (ok) links.push_back(i);
  }
  return links;
}

// f32 values (not linked) that several bf16 products read as A (BERT's Q, K and V read one LayerNorm output):
// each would convert it again, so one Cast to bf16 (rounding as their conversions do) feeds them all.
std::vector<const Value*> shared_sources(const Graph& g) {
  std::map<const Value*, int> readers, others;
  for (const auto& n : g.nodes())
    for (size_t k = 0; k < n->num_inputs(); ++k)
      if (const Value* v = n->input(k)) {
        bool a = k == 0 && bf16_product(*n) && !writes_graph_output(*n, g) && v->dtype() == DType::f32;
        (a ? readers : others)[v] += 1;
      }
  std::vector<const Value*> out;
  for (auto [v, count] : readers)
    if (count >= 2 && v->graph() == &g && v->shape().is_static()) out.push_back(v);
  return out;
}

}  // namespace

std::shared_ptr<const Graph> link_bf16_activations(const std::shared_ptr<const Graph>& g) {
  const char* env = std::getenv("CUVIL_BF16_LINKS");
  if (env && std::string(env) == "0") return g;
  std::vector<size_t> links = find_links(*g);
  // Without bf16 dot products the bf16 kernels are not taken: links would only add conversions.
  bool fast = onednn::bf16_convolutions_are_fast();
  if ((links.empty() && shared_sources(*g).empty()) || !fast) return g;
  std::shared_ptr<Graph> copy = clone_graph(*g);
  for (size_t i : links) copy->nodes()[i]->attrs()["bf16_y"] = Attribute(int64_t(1));
  for (const Value* v : shared_sources(*copy)) {
    std::vector<std::pair<Node*, size_t>> readers;
    size_t pos = 0;  // just before the first reader (inputs and constants come first)
    for (size_t i = 0; i < copy->nodes().size(); ++i) {
      Node* n = copy->nodes()[i].get();
      if (n->input(0) == v && bf16_product(*n) && !writes_graph_output(*n, *copy)) {
        if (readers.empty()) pos = i;
        readers.push_back({n, i});
      }
    }
    AttrMap cast{{"to", Attribute(int64_t(dtype_onnx_id(DType::bf16)))}, {"round_bf16", Attribute(int64_t(1))}};
    Node* c = copy->insert_node(pos, OpKind::Cast, {const_cast<Value*>(v)}, {v->name() + ".bf16"}, cast);
    for (auto [n, i] : readers) n->set_input(0, c->output(0));
  }
  infer_shapes(*copy);
  verify(*copy);
  return copy;
}

int count_bf16_links(const Graph& g) {
  int links = 0;
  for (const auto& n : g.nodes()) links += attr_i(*n, "bf16_y") != 0 || (n->op() == OpKind::Cast && attr_i(*n, "round_bf16"));
  return links;
}

}  // namespace cuvil
