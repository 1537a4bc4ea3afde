// MatMul, Gemm and FusedMatMul on oneDNN's matmul primitive. Transposed operands are described by strides, never
// copied; a 2-D constant B (a Linear layer's weights) is packed once into the primitive's preferred layout, and a
// batched A times such a B runs as one tall matrix product. Bias, the residual Sum, alpha and the activation ride
// along as bias / post-ops.
#include <cstring>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_ops.h"

namespace cuvil::onednn {

namespace {

// The operation in a form shared by the three ops: Y = act(alpha * A' B' + bias + sum_scale * Sum).
struct Spec {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f;
  int bias_input = -1;    // 1-D [N] (or [1, N]) added to every row
  float bias_scale = 1.f;  // Gemm's beta when C is a bias
  int sum_input = -1;     // same shape as Y
  float sum_scale = 1.f;
  nn::Activation act;
};

bool read_spec(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y, Spec& s) {
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

class MatMulKernel final : public PrimitiveKernel {
 public:
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y) {
    memory::data_type dt;
    if (!to_onednn_type(in[0].dtype, &dt)) return false;
    const auto &as = in[0].shape, &bs = in[1].shape;
    if (as.size() < 2 || bs.size() < 2 || as.size() > 8 || bs.size() > 8) return false;
    Spec s;
    if (!read_spec(n, in, y, s)) return false;
    if (s.alpha != 1.f && s.bias_input >= 0 && !in[1].value) {
      // alpha becomes a linear post-op, applied after the bias: a constant bias is pre-divided by alpha.
      if (s.alpha == 0.f || !in[size_t(s.bias_input)].value) return false;
      s.bias_scale /= s.alpha;
    }
    spec_ = s;

    // Logical dims: A [.., M, K], B [.., K, N], Y [.., M, N], all of Y's rank.
    Dims ad(as.begin(), as.end()), bd(bs.begin(), bs.end()), yd(y.begin(), y.end());
    if (s.trans_a) std::swap(ad[ad.size() - 1], ad[ad.size() - 2]);
    if (s.trans_b) std::swap(bd[bd.size() - 1], bd[bd.size() - 2]);
    bool b_batched = false;
    for (size_t d = 0; d + 2 < bd.size(); ++d) b_batched |= bd[d] != 1;
    if (!b_batched && !s.trans_a && ad.size() > 2) {
      // [.., M, K] x [K, N]: one [rows, K] x [K, N] product over the contiguous rows of A and Y.
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < ad.size(); ++d) rows *= ad[d];
      ad = {rows, ad.back()};
      yd = {rows, yd.back()};
    }
    if (!b_batched) bd = Dims(bd.end() - 2, bd.end());
    while (ad.size() < yd.size()) ad.insert(ad.begin(), 1);
    while (bd.size() < yd.size()) bd.insert(bd.begin(), 1);

    memory::desc a_md = s.trans_a ? swapped_last2_md(ad, dt) : dense_md(ad, dt);
    memory::desc b_user = s.trans_b ? swapped_last2_md(bd, dt) : dense_md(bd, dt);
    memory::desc y_md = dense_md(yd, dt);
    bool pack_b = in[1].value && !b_batched;
    memory::desc b_md = pack_b ? memory::desc(bd, dt, memory::format_tag::any) : b_user;
    memory::desc bias_md;
    if (s.bias_input >= 0) {
      Dims bias_dims(yd.size(), 1);
      bias_dims.back() = yd.back();
      bias_md = dense_md(bias_dims, dt);
    }

    double flops = 2.0 * double(shape_numel(std::vector<int64_t>(yd.begin(), yd.end()))) * double(ad.back());
    if (flops < kSingleThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);  // oneDNN plans its parallel split when the primitive is created
    dnnl::post_ops po;
    if (s.alpha != 1.f && !in[1].value) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, s.alpha, 0.f);
    if (s.sum_input >= 0) po.append_sum(s.sum_scale);
    if (!append_activation(po, s.act)) return false;
    dnnl::primitive_attr pattr;
    pattr.set_post_ops(po);
    dnnl::matmul::desc d = s.bias_input >= 0 ? dnnl::matmul::desc(a_md, b_md, bias_md, y_md)
                                             : dnnl::matmul::desc(a_md, b_md, y_md);
    dnnl::matmul::primitive_desc pd(d, pattr, cpu_engine());
    prim_ = dnnl::matmul(pd);
    set_name(pd);
    args_[DNNL_ARG_SRC] = memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    if (in[1].value) {
      // Constant B: alpha is folded into it (exact up to rounding), then it is packed or copied once.
      Tensor b = *in[1].value;
      if (s.alpha != 1.f) b = scaled(b, s.alpha);
      args_[DNNL_ARG_WEIGHTS] = pack(b, b_user, pd.weights_desc());
    } else {
      args_[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), cpu_engine(), DNNL_MEMORY_NONE);
      bind_b_ = true;
    }
    if (s.bias_input >= 0) {
      const PrepareInput& bias = in[size_t(s.bias_input)];
      if (bias.value) {
        Tensor bt = s.bias_scale != 1.f ? scaled(*bias.value, s.bias_scale) : *bias.value;
        args_[DNNL_ARG_BIAS] = pack(bt, bias_md, bias_md);
      } else if (s.bias_scale == 1.f) {
        args_[DNNL_ARG_BIAS] = memory(bias_md, cpu_engine(), DNNL_MEMORY_NONE);
        bind_bias_ = true;
      } else {
        return false;
      }
    }
    return true;
  }

  void run(KernelContext& ctx) override {
    Tensor& y = ctx.output(0);
    if (spec_.sum_input >= 0) {
      const Tensor& sum = ctx.input(size_t(spec_.sum_input));
      if (sum.raw() != y.raw()) std::memcpy(y.raw(), sum.raw(), y.nbytes());
    }
    bind(DNNL_ARG_SRC, ctx.input(0).raw());
    bind(DNNL_ARG_DST, y.raw());
    if (bind_b_) bind(DNNL_ARG_WEIGHTS, ctx.input(1).raw());
    if (bind_bias_) bind(DNNL_ARG_BIAS, ctx.input(size_t(spec_.bias_input)).raw());
    execute();
  }

 private:
  static Tensor scaled(const Tensor& t, float k) {
    Tensor r = t.clone();
    float* p = r.data<float>();
    for (int64_t i = 0; i < r.numel(); ++i) p[i] *= k;
    return r;
  }
  Spec spec_;
  bool bind_b_ = false, bind_bias_ = false;
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_matmul(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y) {
  auto k = std::make_unique<MatMulKernel>();
  if (!k->prepare(n, inputs, y)) return nullptr;
  return k;
}

}  // namespace cuvil::onednn
