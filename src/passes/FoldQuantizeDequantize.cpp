// fold-quantize-dequantize: an ONNX QDQ model's (onnxruntime's quantize_static, NNCF) quantization becomes int8
// hints on the convolutions and products it feeds:
//   Conv(DQ(Q(x, s, zp), s, zp), DQ(Wq, ws, 0), ...)  =>  the same Conv with quant_x_scale = s,
//                                                         quant_x_zero_point = zp (u8), quant_w_scales = ws
// and the node's own precision "int8" (reason kQdqReason): the model asks for int8 there, so it runs int8 at the
// default precision too (runtime/kernel_selection.cpp; docs/decisions/0004-qdq-models-run-int8.md). The graph is
// otherwise unchanged, so with precision "fp32" asked explicitly (which marks these nodes "fp32") a QDQ model
// computes exactly what its QDQ graph says (the pairs fuse into generated kernels, the weights' DequantizeLinear
// is constant-folded into qw * ws). Running int8, a hinted node's kernel quantizes its input, already on the grid, back to exactly q(x) and
// the folded weights back to exactly qw, and multiplies u8 x s8 (kernels/onednn/int8.cpp): ONNX Runtime's
// arithmetic up to f32 summation order. An s8 activation grid is the u8 one shifted by 128 (same scale, zero
// point + 128). Only per-tensor activation grids whose pair agrees (the same scale and zero point) hint; weight
// scales must be per tensor or per output channel, with zero points 0.
#include <cmath>

#include "kernels/qdq_precision.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool is_product(OpKind k) {
  return k == OpKind::Conv || k == OpKind::MatMul || k == OpKind::Gemm;
}

// A constant scalar (or one-element) f32 scale.
bool scalar_scale(const Value* v, float* out) {
  if (!v || !v->is_constant() || v->dtype() != DType::f32 || v->constant().numel() != 1) return false;
  *out = v->constant().data<float>()[0];
  return std::isfinite(*out) && *out > 0;
}

// The zero point on the u8 grid (absent: 0, u8), or false.
bool u8_zero_point(const Node& n, int32_t* out) {
  const Value* z = n.num_inputs() > 2 ? n.input(2) : nullptr;
  if (!z) return *out = 0, true;
  if (!z->is_constant() || z->constant().numel() != 1) return false;
  if (z->dtype() == DType::u8) return *out = z->constant().data<uint8_t>()[0], true;
  if (z->dtype() == DType::i8) return *out = int32_t(z->constant().data<int8_t>()[0]) + 128, true;
  return false;
}

// The output-channel axis of a product's weights (input 1).
int64_t channel_axis(const Node& n, size_t rank) {
  if (n.op() == OpKind::Conv) return 0;
  if (n.op() == OpKind::Gemm) return n.has_attr("transB") && n.attr("transB").i() ? 0 : 1;
  return int64_t(rank) - 1;
}

// Sets `name` on u to `a`; whether that changed it.
bool set_attr(Node& u, const char* name, Attribute a) {
  auto& attrs = u.attrs();
  auto it = attrs.find(name);
  if (it != attrs.end() && it->second.kind() == a.kind()) {
    const Attribute& b = it->second;
    bool same = a.kind() == AttrKind::Float   ? a.f() == b.f()
                : a.kind() == AttrKind::Int   ? a.i() == b.i()
                : a.kind() == AttrKind::Floats ? a.floats() == b.floats()
                                               : false;
    if (same) return false;
  }
  attrs[name] = std::move(a);
  return true;
}

// Weight hints for the products that read DequantizeLinear `d` (constant s8 weights) as their input 1.
bool hint_weights(Node& d, const rewrite::UseMap& uses) {
  const Value *q = d.input(0), *s = d.input(1);
  if (!q->is_constant() || q->dtype() != DType::i8 || !s || !s->is_constant() || s->dtype() != DType::f32) return false;
  if (d.num_inputs() > 2 && d.input(2)) {
    const Tensor& z = d.input(2)->constant();
    if (!d.input(2)->is_constant()) return false;
    for (int64_t i = 0; i < z.numel(); ++i)
      if (z.data<int8_t>()[i] != 0) return false;
  }
  const Tensor& st = s->constant();
  std::vector<double> scales(st.data<float>(), st.data<float>() + st.numel());
  int64_t rank = int64_t(q->constant().shape().size());
  int64_t axis = d.attr("axis").i();
  if (axis < 0) axis += rank;
  bool changed = false;
  for (Node* u : uses.users(d.output(0))) {
    if (!is_product(u->op()) || u->num_inputs() < 2 || u->input(1) != d.output(0) || u->input(0) == d.output(0)) continue;
    if (scales.size() != 1 && (axis != channel_axis(*u, size_t(rank)) || q->constant().dim(axis) != int64_t(scales.size())))
      continue;
    changed |= set_attr(*u, "quant_w_scales", Attribute(scales));
  }
  return changed;
}

bool fold(Graph& g) {
  rewrite::UseMap uses(g);
  bool changed = false;
  for (const auto& np : g.nodes()) {
    Node& d = *np;
    if (d.op() != OpKind::DequantizeLinear || !d.input(0)) continue;
    Node* q = d.input(0)->producer();
    if (!q) {
      changed |= hint_weights(d, uses);
      continue;
    }
    if (q->op() != OpKind::QuantizeLinear || !q->input(0) || q->input(0)->dtype() != DType::f32) continue;
    float qs, ds;
    int32_t qz, dz;
    if (!scalar_scale(q->input(1), &qs) || !scalar_scale(d.input(1), &ds) || qs != ds) continue;
    if (!u8_zero_point(*q, &qz) || !u8_zero_point(d, &dz) || qz != dz) continue;
    for (Node* u : uses.users(d.output(0))) {
      if (!is_product(u->op()) || u->input(0) != d.output(0)) continue;
      changed |= set_attr(*u, "quant_x_scale", Attribute(double(qs)));
      changed |= set_attr(*u, "quant_x_zero_point", Attribute(int64_t(qz)));
      // The model's own int8 layer (a precision set before, e.g. by the user, stays)
      if (!u->has_attr("precision") || u->attr("precision").s().empty()) {
        u->attrs()["precision"] = Attribute(std::string("int8"));
        u->attrs()["precision_reason"] = Attribute(std::string(kQdqReason));
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace

bool FoldQuantizeDequantizePass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fold); }

}  // namespace cuvil
