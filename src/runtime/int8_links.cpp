// u8 activations between int8 layers: which values link, and the graph copy that says so (see int8_links.h).
#include "runtime/int8_links.h"

#include <cstdlib>
#include <map>
#include <string>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/qdq_precision.h"
#include "runtime/qdq_bypass.h"
#include "runtime/region_uses.h"
#include "runtime/weights.h"

namespace cuvil {

namespace {

double attr_f(const Node& n, const char* name) { return n.has_attr(name) ? n.attr(name).f() : 0.0; }
int64_t attr_i(const Node& n, const char* name) { return n.has_attr(name) ? n.attr(name).i() : 0; }

}  // namespace

// A layer the int8 kernels take with a static grid for X: calibrated (not dynamic), constant weights and bias,
// grouped convolutions too (int8 takes them where an end is linked: kernels/onednn/int8.cpp), B a matrix.
bool static_int8_layer(const Node& n, bool model_only) {
  if (n.op() != OpKind::FusedConv && n.op() != OpKind::FusedMatMul) return false;
  if (!(attr_f(n, "quant_x_scale") > 0)) return false;
  if (n.has_attr("precision") && !n.attr("precision").s().empty() && n.attr("precision").s() != "int8") return false;
  if (model_only && !(n.has_attr("precision") && n.attr("precision").s() == "int8" && n.has_attr("precision_reason") &&
                      n.attr("precision_reason").s() == kQdqReason))
    return false;
  const Value* w = n.input(1);
  if (!w || !w->is_constant()) return false;
  if (n.input(2) && !n.input(2)->is_constant()) return false;
  if (n.op() == OpKind::FusedConv) {
    // CUVIL_GROUPED_LINKS=0: grouped convolutions neither link nor run int8 (as before they did; comparisons).
    const char* env = std::getenv("CUVIL_GROUPED_LINKS");
    return attr_i(n, "group") <= 1 || !(env && std::string(env) == "0");
  }
  const auto& dims = w->shape().dims();
  for (size_t d = 0; d + 2 < dims.size(); ++d)
    if (!dims[d].is_const() || dims[d].value() != 1) return false;
  return true;
}

namespace {

// A value's u8 link: its grid, and the nodes reading it as their residual sum (they get the grid as quant_sum_*).
struct Link {
  double scale = 0;
  int64_t zp = 0;
  std::vector<Node*> sum_readers;
};

// The u8 link of each linkable value, by the index of its producer in g.nodes().
// `x_only`: links between X readers only, as before residuals and pools linked (CUVIL_INT8_LINKS=x).
std::map<size_t, Link> find_links(const Graph& g, bool x_only, bool model_only) {
  std::map<const Value*, std::vector<std::pair<Node*, size_t>>> uses;
  std::map<const Value*, int> blocked;
  for (const auto& n : g.nodes()) {
    for (size_t k = 0; k < n->num_inputs(); ++k)
      if (n->input(k)) uses[n->input(k)].push_back({n.get(), k});
    for (const Graph* r : n->regions()) note_region_uses(*r, g, blocked);
  }
  // A graph output stays f32 (never linked); the layer writing it still reads u8: at int8 a final layer runs its
  // u8 x s8 product into an f32 output (kernel_selection.cpp).
  for (const Value* o : g.outputs()) blocked[o] = 1;
  std::map<size_t, Link> links;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& p = *nodes[i];
    // The producer: an int8 layer; one with a residual sum a convolution (the int8 product kernel has no u8
    // output with a sum).
    if (!static_int8_layer(p, model_only) || p.num_outputs() != 1) continue;
    if (p.input(3) && (p.op() != OpKind::FusedConv || x_only)) continue;
    const Value* v = p.output(0);
    if (blocked.count(v) || v->dtype() != DType::f32) continue;
    auto it = uses.find(v);
    if (it == uses.end() || it->second.empty()) continue;
    // Every reader takes v as X on one and the same grid, or as the residual sum of an int8 convolution (which
    // then reads it on that grid). A value read only as a sum needs the grid calibration gave it (below).
    bool ok = true;
    Link l;
    // A MaxPool reading v passes it on: its readers count as v's (max commutes with quantization, so pooling
    // the u8 values gives the quantized pooled values; the pool runs u8, kernels/onednn/pool.cpp).
    std::vector<std::pair<Node*, size_t>> readers;
    for (auto [c, k] : it->second) {
      if (c->op() != OpKind::MaxPool || x_only) {
        readers.push_back({c, k});
        continue;
      }
      const Value* pooled = c->num_outputs() == 1 ? c->output(0) : nullptr;
      auto pu = pooled ? uses.find(pooled) : uses.end();
      ok = pooled && !blocked.count(pooled) && pu != uses.end() && !pu->second.empty();
      if (!ok) break;
      for (auto [r, rk] : pu->second) {
        ok = ok && rk == 0 && r->op() != OpKind::MaxPool;  // (X readers only, checked below)
        readers.push_back({r, rk});
      }
    }
    for (auto [c, k] : readers) {
      if (!ok) break;
      bool as_x = k == 0, as_sum = k == 3 && c->op() == OpKind::FusedConv && !x_only;
      ok = (as_x || as_sum) && static_int8_layer(*c, model_only);
      for (size_t j = 0; ok && j < c->num_inputs(); ++j) ok = j == k || c->input(j) != v;
      if (!ok) break;
      if (as_sum) {
        l.sum_readers.push_back(c);
        continue;
      }
      double sc = attr_f(*c, "quant_x_scale");
      int64_t z = attr_i(*c, "quant_x_zero_point");
      if (l.scale == 0) l.scale = sc, l.zp = z;
      ok = sc == l.scale && z == l.zp;
      if (!ok) break;
    }
    // Read only as residuals: linked where calibration gave those readers one grid for it (quant_sum_scale).
    if (ok && l.scale == 0 && !l.sum_readers.empty()) {
      for (Node* c : l.sum_readers) {
        double sc = attr_f(*c, "quant_sum_scale");
        int64_t z = attr_i(*c, "quant_sum_zero_point");
        if (l.scale == 0) l.scale = sc, l.zp = z;
        ok = ok && sc > 0 && sc == l.scale && z == l.zp;
      }
    }
    if (ok && l.scale > 0) links[i] = l;
  }
  return links;
}

}  // namespace

std::shared_ptr<const Graph> link_int8_activations(const std::shared_ptr<const Graph>& g, bool model_int8_only) {
  // CUVIL_INT8_LINKS=0: every int8 layer quantizes its f32 input again; =x: no residual or MaxPool links (for
  // comparisons and debugging)
  const char* env = std::getenv("CUVIL_INT8_LINKS");
  std::string mode = env ? env : "";
  bool x_only = mode == "x";
  // Without VNNI every int8 layer keeps f32 (kernels/onednn/int8.cpp): links would only wrap each in conversions
  // (ResNet-50 capped to AVX512_CORE, one thread: 131 ms of CPU with them, 82 at fp32).
  if (mode == "0") return g;
  bool any = false;
  for (const auto& n : g->nodes()) any = any || static_int8_layer(*n, model_int8_only);
  // (the probe last: an fp32 model without QDQ layers never creates it)
  if (!any || !onednn::int8_convolutions_are_fast()) return g;
  std::shared_ptr<Graph> copy = clone_graph(*g);
  // A QDQ model's pairs in front of int8 layers go first (runtime/qdq_bypass.h), so that their producers link.
  // CUVIL_QDQ_BYPASS=0 keeps them (comparisons).
  const char* bypass_env = std::getenv("CUVIL_QDQ_BYPASS");
  int bypassed = bypass_env && std::string(bypass_env) == "0" ? 0 : bypass_qdq_pairs(*copy, model_int8_only);
  std::map<size_t, Link> links = find_links(*copy, x_only, model_int8_only);
  if (links.empty() && bypassed == 0) return g;
  for (auto& [i, l] : links) {
    Node& p = *copy->nodes()[i];
    p.attrs()["quant_y_scale"] = Attribute(l.scale);
    p.attrs()["quant_y_zero_point"] = Attribute(l.zp);
    for (Node* c : l.sum_readers) {
      c->attrs()["quant_sum_scale"] = Attribute(l.scale);
      c->attrs()["quant_sum_zero_point"] = Attribute(l.zp);
    }
  }
  infer_shapes(*copy);
  verify(*copy);
  return copy;
}

int count_int8_links(const Graph& g) {
  int links = 0;
  for (const auto& n : g.nodes()) links += attr_f(*n, "quant_y_scale") > 0;
  return links;
}

}  // namespace cuvil
