#include "ir/graph_stats.h"

#include "ir/ops/attention.h"

namespace cuvil {

namespace {

Dim numel_or_zero(const Value* v) {
  if (!v || !v->shape().rank_known()) return Dim(0);
  return v->shape().numel();
}

}  // namespace

bool flops_exact(const Node& n) {
  switch (n.op()) {
    case OpKind::Conv: case OpKind::FusedConv: case OpKind::ConvInteger: case OpKind::QLinearConv:
    case OpKind::ConvTranspose: case OpKind::MatMul: case OpKind::FusedMatMul: case OpKind::MatMulInteger:
    case OpKind::QLinearMatMul: case OpKind::Gemm: case OpKind::Attention:
      return true;
    default:
      return false;
  }
}

Dim node_flops(const Node& n) {
  const Value* y = n.num_outputs() ? n.output(0) : nullptr;
  auto known = [](const Value* v) { return v && v->shape().rank_known(); };
  switch (n.op()) {
    case OpKind::Conv:
    case OpKind::FusedConv:
    case OpKind::ConvInteger:
    case OpKind::QLinearConv: {
      const Value* w = n.input(n.op() == OpKind::QLinearConv ? 3 : 1);
      if (!known(w) || w->shape().rank() < 1) return Dim(0);
      // per output element: (Cin / group) * prod(kernel) multiply-adds = numel(W) / Cout
      Dim per = Dim::floordiv(w->shape().numel(), w->shape()[0]);
      return Dim(2) * numel_or_zero(y) * per;
    }
    case OpKind::ConvTranspose: {
      const Value *x = n.input(0), *w = n.input(1);
      if (!known(w) || w->shape().rank() < 1) return Dim(0);
      return Dim(2) * numel_or_zero(x) * Dim::floordiv(w->shape().numel(), w->shape()[0]);
    }
    case OpKind::MatMul:
    case OpKind::FusedMatMul:
    case OpKind::MatMulInteger:
    case OpKind::QLinearMatMul:
    case OpKind::Gemm: {
      const Value* a = n.input(0);
      if (!known(a) || a->shape().rank() < 1) return Dim(0);
      size_t r = a->shape().rank();
      // K: the contracted dim; Gemm with transA contracts dim 0.
      Dim k = a->shape()[r - 1];
      if (n.op() == OpKind::Gemm && r == 2 && n.has_attr("transA") && n.attrs().at("transA").i()) k = a->shape()[0];
      return Dim(2) * numel_or_zero(y) * k;
    }
    case OpKind::Attention: {
      // Two products: scores [.., Sq, Sk] over D, then y [.., Sq, Dv] over Sk.
      const Value *q = n.input(0), *k = n.input(1), *v = n.input(2);
      if (!known(q) || !known(k) || !known(v) || !known(y) || q->shape().rank() < 2) return Dim(0);
      size_t r = q->shape().rank();
      auto logical = [&](const Value* x, const char* perm, size_t d) {
        return x->shape()[size_t(attention_perm(AttrReader(n), perm, r).at(d))];
      };
      Dim d = logical(q, "perm_q", r - 1), sk = logical(k, "perm_k", r - 2), dv = logical(v, "perm_v", r - 1);
      Dim rows = Dim::floordiv(numel_or_zero(y), dv);
      return Dim(2) * rows * sk * (d + dv);
    }
    default: break;
  }
  std::string_view fam = op_family(n.op());
  if (fam == "reduction") return numel_or_zero(n.input(0));
  if (fam == "tensor") return Dim(0);  // data movement
  return numel_or_zero(y);
}

namespace {

void accumulate(const Graph& g, GraphStats& s) {
  for (Value* c : g.constants()) {
    s.parameters += c->constant().numel();
    s.parameter_bytes += int64_t(c->constant().nbytes());
  }
  for (auto& n : g.nodes()) {
    ++s.op_counts[std::string(n->op_name())];
    ++s.nodes;
    s.flops = s.flops + node_flops(*n);
    for (Graph* r : n->regions()) accumulate(*r, s);
  }
}

}  // namespace

GraphStats graph_stats(const Graph& g) {
  GraphStats s;
  accumulate(g, s);
  return s;
}

std::string node_label(const Node& n) {
  if (n.op() != OpKind::FusedKernel || !n.has_attr("body")) return std::string(n.op_name());
  std::string ops;
  for (const auto& m : n.attr("body").g()->nodes()) {
    std::string name(m->op_name());
    if (ops.size() >= name.size() && ops.compare(ops.size() - name.size(), name.size(), name) == 0) continue;
    ops += (ops.empty() ? "" : "+") + name;
  }
  return "Fused(" + ops + ")";
}

}  // namespace cuvil
