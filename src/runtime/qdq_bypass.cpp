// A QDQ model's activation pairs in front of int8 layers, left out (see qdq_bypass.h).
#include "runtime/qdq_bypass.h"

#include <algorithm>
#include <map>
#include <set>

#include "runtime/int8_links.h"
#include "runtime/region_uses.h"

namespace cuvil {

namespace {

using Uses = std::map<const Value*, std::vector<std::pair<Node*, size_t>>>;

// A constant scalar f32 scale > 0.
bool scalar_scale(const Value* v, float* out) {
  if (!v || !v->is_constant() || v->dtype() != DType::f32 || v->constant().numel() != 1) return false;
  *out = v->constant().data<float>()[0];
  return *out > 0 && *out < 1e30f;
}

// The zero point on the u8 grid (absent: 0), or false.
bool u8_zero_point(const Node& n, int64_t* out) {
  const Value* z = n.num_inputs() > 2 ? n.input(2) : nullptr;
  if (!z) return *out = 0, true;
  if (!z->is_constant() || z->constant().numel() != 1) return false;
  if (z->dtype() == DType::u8) return *out = z->constant().data<uint8_t>()[0], true;
  if (z->dtype() == DType::i8) return *out = int64_t(z->constant().data<int8_t>()[0]) + 128, true;
  return false;
}

// Body output k of a FusedKernel: DequantizeLinear(QuantizeLinear(t, s, z), s, z), the pair used nowhere else.
struct Pair {
  Node *q = nullptr, *d = nullptr;
  double scale = 0;
  int64_t zp = 0;
  int t_input = -1;  // t is the body's input t_input (-1: computed in the body)
};

bool pair_at(const Graph& body, size_t k, Pair* p) {
  Value* o = body.outputs()[k];
  Node* d = o->producer();
  if (!d || d->op() != OpKind::DequantizeLinear || !d->input(0)) return false;
  Node* q = d->input(0)->producer();
  if (!q || q->op() != OpKind::QuantizeLinear || !q->input(0) || q->input(0)->dtype() != DType::f32) return false;
  if (o->dtype() != DType::f32) return false;
  float qs, ds;
  int64_t qz, dz;
  if (!scalar_scale(q->input(1), &qs) || !scalar_scale(d->input(1), &ds) || qs != ds) return false;
  if (!u8_zero_point(*q, &qz) || !u8_zero_point(*d, &dz) || qz != dz) return false;
  if (q->output(0)->dtype() != DType::u8 && q->output(0)->dtype() != DType::i8) return false;
  int uses_q = 0, uses_o = 0;
  for (const auto& n : body.nodes())
    for (const Value* v : n->inputs()) uses_q += v == q->output(0), uses_o += v == o;
  for (const Value* v : body.outputs()) uses_o += v == o;
  if (uses_q != 1 || uses_o != 1) return false;
  p->q = q, p->d = d, p->scale = double(qs), p->zp = qz, p->t_input = -1;
  for (size_t i = 0; i < body.inputs().size(); ++i)
    if (body.inputs()[i] == q->input(0)) p->t_input = int(i);
  return true;
}

// Whether every reader of v takes it as X of a static int8 layer on the grid (scale, zp), and it has some.
bool int8_readers_on_grid(const Uses& uses, const Value* v, double scale, int64_t zp, bool model_only) {
  auto it = uses.find(v);
  if (it == uses.end() || it->second.empty()) return false;
  for (auto [c, k] : it->second) {
    if (k != 0 || !static_int8_layer(*c, model_only)) return false;
    for (size_t j = 1; j < c->num_inputs(); ++j)
      if (c->input(j) == v) return false;
    if (c->attr("quant_x_scale").f() != scale || c->attr("quant_x_zero_point").i() != zp) return false;
  }
  return true;
}

class Bypass {
 public:
  Bypass(Graph& g, bool model_only) : g_(g), model_only_(model_only) {
    for (const auto& n : g.nodes()) {
      for (size_t k = 0; k < n->num_inputs(); ++k)
        if (n->input(k)) uses_[n->input(k)].push_back({n.get(), k});
      for (const Graph* r : n->regions()) note_region_uses(*r, g, blocked_);
    }
    for (const Value* o : g.outputs()) blocked_[o] = 1;
  }

  int run() {
    std::vector<Node*> kernels;
    for (const auto& n : g_.nodes())
      if (n->op() == OpKind::FusedKernel) kernels.push_back(n.get());
    int left_out = 0;
    for (Node* n : kernels) {
      if (erased_.count(n)) continue;
      for (size_t k = 0; k < n->num_outputs(); ++k) left_out += bypass(*n, k);
    }
    std::vector<Node*> dead;
    for (Node* n : kernels) {
      bool used = false;
      for (Value* v : n->outputs()) used = used || blocked_.count(v) || !uses_[v].empty();
      if (!used) dead.push_back(n);
    }
    g_.erase_nodes(dead);
    return left_out;
  }

 private:
  // Leaves out the pair at output k of n where its readers allow; how many pairs that left out.
  int bypass(Node& n, size_t k) {
    Value* out = n.output(k);
    const Graph& body = *n.attr("body").g();
    Pair p;
    if (blocked_.count(out) || !pair_at(body, k, &p)) return 0;
    if (int8_readers_on_grid(uses_, out, p.scale, p.zp, model_only_)) {
      Value* t = source(n, k, p);
      move_readers(out, t);
      return 1;
    }
    // pair -> MaxPool -> pairs on the same grid, each alone in its kernel: the first pair goes (the pool reads its
    // input: max commutes with the monotone quantization, and the later pair, on the same grid, is idempotent
    // after it), and a later pair read only by int8 layers on the grid goes too
    auto it = uses_.find(out);
    if (it == uses_.end() || it->second.size() != 1) return 0;
    auto [m, mk] = it->second[0];
    // pair -> Transpose (a layout's reorder) -> int8 layers on the grid: the transpose moves the pair's input
    // (the pair works element by element)
    if (m->op() == OpKind::Transpose && mk == 0 && m->num_outputs() == 1 && !blocked_.count(m->output(0)) &&
        int8_readers_on_grid(uses_, m->output(0), p.scale, p.zp, model_only_)) {
      Value* t = source(n, k, p);
      m->set_input(0, t);
      uses_[out].clear();
      uses_[t].push_back({m, 0});
      return 1;
    }
    if (m->op() != OpKind::MaxPool || mk != 0 || m->num_outputs() != 1 || blocked_.count(m->output(0))) return 0;
    std::vector<Node*> after, gone;
    for (auto [c, ck] : uses_[m->output(0)]) {
      Pair p2;
      bool ok = c->op() == OpKind::FusedKernel && c->num_outputs() == 1 && c->num_inputs() == 1 &&
                !blocked_.count(c->output(0)) && pair_at(*c->attr("body").g(), 0, &p2) && p2.t_input == 0 &&
                p2.scale == p.scale && p2.zp == p.zp;
      if (!ok) return 0;
      after.push_back(c);
      if (int8_readers_on_grid(uses_, c->output(0), p.scale, p.zp, model_only_)) gone.push_back(c);
    }
    if (after.empty()) return 0;
    Value* t = source(n, k, p);
    m->set_input(0, t);
    uses_[out].clear();
    uses_[t].push_back({m, 0});
    for (Node* c : gone) {
      move_readers(c->output(0), m->output(0));
      erased_.insert(c);
    }
    auto& pooled = uses_[m->output(0)];
    pooled.erase(std::remove_if(pooled.begin(), pooled.end(), [&](const auto& u) { return erased_.count(u.first) > 0; }),
                 pooled.end());
    return 1 + int(gone.size());
  }

  // The value the pair at output k of n quantizes, as an outer value: n's input, or output k itself once the
  // body yields it in place of the pair.
  Value* source(Node& n, size_t k, const Pair& p) {
    if (p.t_input >= 0) return n.input(size_t(p.t_input));
    Graph& body = *n.attrs().at("body").g();  // (the executor's own copy: no other graph shares it)
    std::vector<Value*> outs = body.outputs();
    outs[k] = p.q->input(0);
    body.set_outputs(outs);
    body.erase_nodes({p.d, p.q});
    return n.output(k);
  }

  void move_readers(Value* from, Value* to) {
    if (from == to) return;
    for (auto [c, ck] : uses_[from]) {
      c->set_input(ck, to);
      uses_[to].push_back({c, ck});
    }
    uses_[from].clear();
  }

  Graph& g_;
  bool model_only_;
  Uses uses_;
  std::map<const Value*, int> blocked_;
  std::set<Node*> erased_;
};

}  // namespace

int bypass_qdq_pairs(Graph& g, bool model_only) { return Bypass(g, model_only).run(); }

}  // namespace cuvil
