#include "kernels/matmul_spec.h"

namespace cuvil {

bool read_matmul_spec(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y,
                      MatMulSpec& s) {
  AttrReader attrs(n);
  auto present = [&](size_t i) { return in.size() > i && in[i].present; };
  if (n.op() == OpKind::Gemm) {
    s.trans_a = attrs.i("transA") != 0;
    s.trans_b = attrs.i("transB") != 0;
    s.alpha = attrs.f("alpha");
    if (present(2)) {
      const auto& c = in[2].shape;
      int64_t N = y[1];
      float beta = attrs.f("beta");
      if (c == std::vector<int64_t>{N} || c == std::vector<int64_t>{1, N}) {
        s.bias_input = 2;
        s.bias_scale = beta;
      } else if (c == y) {
        s.sum_input = 2;
        s.sum_scale = beta;
      } else {
        return false;  // a column or scalar C: the reference handles it
      }
    }
    return true;
  }
  if (n.op() == OpKind::FusedMatMul) {
    s.trans_b = attrs.i("transB") != 0;
    s.alpha = attrs.f("alpha");
    if (present(2)) s.bias_input = 2;
    if (present(3)) s.sum_input = 3;
    s.act = nn::read_activation(attrs);
  }
  return true;
}

bool symbolic_inputs(const Node& n, std::vector<PrepareInput>& in, std::vector<int64_t>& y) {
  auto dims_of = [](const Shape& s) {
    std::vector<int64_t> dims;
    for (const Dim& d : s.dims()) dims.push_back(d.is_const() ? d.value() : -1);
    return dims;
  };
  in.assign(n.num_inputs(), PrepareInput{});
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (!v) continue;
    if (!v->shape().rank_known()) return false;
    in[i] = {v->dtype(), dims_of(v->shape()), v->is_constant() ? &v->constant() : nullptr, true};
  }
  if (!n.output(0)->shape().rank_known()) return false;
  y = dims_of(n.output(0)->shape());
  return true;
}

}  // namespace cuvil
