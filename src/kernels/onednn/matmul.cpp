// MatMul, Gemm and FusedMatMul on oneDNN's matmul primitive. Transposed operands are described by strides, never
// copied; a 2-D constant B (a Linear layer's weights) is packed once into the primitive's preferred layout, and a
// batched A times such a B runs as one tall matrix product. Bias, the residual Sum, alpha and the activation ride
// along as bias / post-ops.
#include <cstring>

#include "kernels/matmul_spec.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_ops.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil::onednn {

namespace {

class MatMulKernel final : public PrimitiveKernel {
 public:
  // bf16: A and B in bf16 (A converted per call, the constant B once when packed), f32 accumulation, bias and
  // output; false, with `reason` set, where that is not possible or not faster.
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y, bool bf16 = false,
               std::string* reason = nullptr) {
    memory::data_type dt;
    // bf16 links (runtime/bf16_links.h): A and Y may be bf16 beside an f32 B; only the bf16 kernel takes them.
    bool a_bf16 = in[0].dtype == DType::bf16 && in[1].dtype == DType::f32;
    bool y_bf16 = n.op() == OpKind::FusedMatMul && n.output(0)->dtype() == DType::bf16 && in[1].dtype == DType::f32;
    if ((a_bf16 || y_bf16) && !bf16) return false;
    if (!to_onednn_type(in[1].dtype, &dt)) return false;
    if (bf16 && !in[1].value) {
      // Both operands would be converted on every call (attention's products): no weights to pack once.
      *reason = "B not constant";
      return false;
    }
    memory::data_type lp = bf16 ? memory::data_type::bf16 : dt;
    const auto &as = in[0].shape, &bs = in[1].shape;
    if (as.size() < 2 || bs.size() < 2 || as.size() > 8 || bs.size() > 8) return false;
    MatMulSpec s;
    if (!read_matmul_spec(n, in, y, s)) return false;
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
    memory::desc a_lp = dense_md(ad, lp);
    memory::desc b_user = s.trans_b ? swapped_last2_md(bd, dt) : dense_md(bd, dt);
    memory::desc y_md = dense_md(yd, y_bf16 ? memory::data_type::bf16 : dt);
    bool pack_b = in[1].value && !b_batched;
    memory::desc b_md = pack_b ? memory::desc(bd, lp, memory::format_tag::any) : b_user;
    if (bf16 && !pack_b) {
      *reason = "batched constant B";
      return false;
    }
    memory::desc bias_md;
    if (s.bias_input >= 0) {
      Dims bias_dims(yd.size(), 1);
      bias_dims.back() = yd.back();
      bias_md = dense_md(bias_dims, dt);
    }

    double flops = 2.0 * double(shape_numel(std::vector<int64_t>(yd.begin(), yd.end()))) * double(ad.back());
    if (flops < kSingleThreadFlops || single_) threads_ = 1;
    ScopedThreads creating(threads_);  // oneDNN plans its parallel split when the primitive is created
    created_threads_ = omp_get_max_threads();
    dnnl::post_ops po;
    if (s.alpha != 1.f && !in[1].value) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, s.alpha, 0.f);
    if (s.sum_input >= 0) po.append_sum(s.sum_scale);
    if (!append_activation(po, s.act)) return false;
    dnnl::primitive_attr pattr = thread_safe_attr();
    pattr.set_post_ops(po);
    const memory::desc& src_md = bf16 ? a_lp : a_md;
    dnnl::matmul::desc d = s.bias_input >= 0 ? dnnl::matmul::desc(src_md, b_md, bias_md, y_md)
                                             : dnnl::matmul::desc(src_md, b_md, y_md);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(d, pattr, cpu_engine());
    } catch (const dnnl::error&) {
      if (!bf16) throw;
      *reason = "oneDNN has no bf16 kernel for this product";
      return false;
    }
    if (bf16) {
      if (!bf16_dispatch_is_fast(pd.impl_info_str(), reason)) return false;
      if (y_bf16 && s.sum_input >= 0) {  // (the link pass never asks for it: the sum would have to be bf16)
        *reason = "a bf16 output with a residual sum";
        return false;
      }
      if (!a_bf16) src_ = Bf16Source(a_md, a_lp);
      a_bf16_ = a_bf16;
      precision.precision = Precision::bf16;
    }
    prim_ = dnnl::matmul(pd);
    set_name(pd);
    args_[DNNL_ARG_SRC] = bf16 && !a_bf16 ? src_.converted() : memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    if (in[1].value) {
      // Constant B: alpha is folded into it (exact up to rounding), then it is packed or copied once.
      args_[DNNL_ARG_WEIGHTS] = packed(*in[1].value, s.alpha, b_user, pd.weights_desc());
    } else {
      args_[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), cpu_engine(), DNNL_MEMORY_NONE);
      bind_b_ = true;
    }
    if (s.bias_input >= 0) {
      const PrepareInput& bias = in[size_t(s.bias_input)];
      if (bias.value) {
        args_[DNNL_ARG_BIAS] = packed(*bias.value, s.bias_scale, bias_md, bias_md);
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
    if (precision.precision == Precision::bf16 && !a_bf16_) {
      ScopedThreads t(threads_);
      src_.convert(ctx.input(0).raw());
    } else {
      bind(DNNL_ARG_SRC, ctx.input(0).raw());
    }
    bind(DNNL_ARG_DST, y.raw());
    if (bind_b_) bind(DNNL_ARG_WEIGHTS, ctx.input(1).raw());
    if (bind_bias_) bind(DNNL_ARG_BIAS, ctx.input(size_t(spec_.bias_input)).raw());
    execute();
  }

  // Prepare on the calling thread alone whatever the work (the single-threaded half of a SpinAwareKernel).
  void make_single() { single_ = true; }
  // Whether the primitive was made for more than one thread.
  bool threaded() const { return threads_ != 1 && created_threads_ > 1; }

 private:
  MatMulSpec spec_;
  bool bind_b_ = false, bind_bias_ = false;
  bool single_ = false;
  int created_threads_ = 1;
  Bf16Source src_;  // bf16: A's conversion (none where A arrives bf16: a_bf16_)
  bool a_bf16_ = false;
};

// One primitive for every shape the node's IR type allows, with the dims that vary left to run time
// (DNNL_RUNTIME_DIM_VAL): a new batch or sequence length then creates nothing, where a shape-specific primitive
// costs 0.3-1 ms to create (brgemm code generation) per node and shape. oneDNN runs such a primitive on its
// gemm kernels, measured within -15 %..+25 % of the shape-specific brgemm on the encoder's products.
// Two forms: A [.., M, K] times a constant 2-D B (a Linear layer: the rows vary, K and N are fixed, B is packed
// once), and A [.., M, K] times a B of the same batch dims (attention: every dim may vary; no bias).
class ShapeGenericMatMul final : public PrimitiveKernel {
 public:
  bool prepare(const Node& n) {
    const Value* a = n.input(0);
    const Value* b = n.input(1);
    if (!a->shape().rank_known() || !b->shape().rank_known()) return false;
    const Shape &as = a->shape(), &bs = b->shape();
    if (as.rank() < 2 || bs.rank() < 2 || as.rank() > 8 || bs.rank() > 8) return false;
    if (as.is_static() && bs.is_static()) return false;  // one shape only: the specialized kernel is faster
    if (!to_onednn_type(a->dtype(), &dt_)) return false;
    // The spec as read_matmul_spec sees it, with -1 for dims that vary.
    std::vector<PrepareInput> in;
    std::vector<int64_t> y;
    if (!symbolic_inputs(n, in, y)) return false;
    MatMulSpec s;
    if (!read_matmul_spec(n, in, y, s) || s.trans_a) return false;
    if (n.op() == OpKind::Gemm && s.sum_input >= 0) return false;  // C's shape is only known to match at run time
    spec_ = s;
    const memory::dim R = DNNL_RUNTIME_DIM_VAL;
    dnnl::post_ops po;
    if (in[1].value) {
      // Linear: B constant [K, N] (leading dims 1), K and N fixed; alpha folded into B.
      for (size_t d = 0; d + 2 < bs.rank(); ++d)
        if (bs[d] != Dim(1)) return false;
      int64_t k = in[1].shape[bs.rank() - 2], nn = in[1].shape[bs.rank() - 1];
      if (s.trans_b) std::swap(k, nn);
      if (as[as.rank() - 1] != Dim(k)) return false;
      k_ = k;
      n_ = nn;
      linear_ = true;
      memory::desc a_md({R, k_}, dt_, memory::format_tag::ab);
      memory::desc y_md({R, n_}, dt_, memory::format_tag::ab);
      memory::desc b_user = s.trans_b ? swapped_last2_md({k_, n_}, dt_) : dense_md({k_, n_}, dt_);
      memory::desc b_any({k_, n_}, dt_, memory::format_tag::any);
      memory::desc bias_md = dense_md({1, n_}, dt_);
      if (s.sum_input >= 0) po.append_sum(s.sum_scale);
      if (!append_activation(po, s.act)) return false;
      dnnl::primitive_attr attr = thread_safe_attr();
      attr.set_post_ops(po);
      auto d = s.bias_input >= 0 ? dnnl::matmul::desc(a_md, b_any, bias_md, y_md) : dnnl::matmul::desc(a_md, b_any, y_md);
      dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
      if (is_reference(pd)) return false;
      prim_ = dnnl::matmul(pd);
      set_name(pd);
      args_[DNNL_ARG_WEIGHTS] = packed(*in[1].value, s.alpha, b_user, pd.weights_desc());
      if (s.bias_input >= 0) {
        const PrepareInput& bias = in[size_t(s.bias_input)];
        if (bias.value) args_[DNNL_ARG_BIAS] = packed(*bias.value, s.bias_scale, bias_md, bias_md);
        else if (s.bias_scale == 1.f) args_[DNNL_ARG_BIAS] = memory(bias_md, cpu_engine(), DNNL_MEMORY_NONE), bind_bias_ = true;
        else return false;
      }
      warm_up();
      return true;
    }
    // Batched: the same batch dims on both sides (no broadcasting to resolve at run time), no bias.
    if (as.rank() != bs.rank() || s.bias_input >= 0) return false;
    for (size_t d = 0; d + 2 < as.rank(); ++d)
      if (as[d] != bs[d]) return false;
    rank_ = as.rank();
    Dims rt(rank_, R);
    memory::desc a_md = dense_md_any(rt, false), b_md = dense_md_any(rt, s.trans_b), y_md = dense_md_any(rt, false);
    if (s.alpha != 1.f) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, s.alpha, 0.f);
    if (s.sum_input >= 0) po.append_sum(s.sum_scale);
    if (!append_activation(po, s.act)) return false;
    dnnl::primitive_attr attr = thread_safe_attr();
    attr.set_post_ops(po);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, y_md), attr, cpu_engine());
    if (is_reference(pd)) return false;
    prim_ = dnnl::matmul(pd);
    set_name(pd);
    warm_up();
    return true;
  }

  // oneDNN's reference implementation is what some run-time-dim cases get (a residual sum post-op on batched
  // products): far slower than a primitive per shape, so such nodes keep those.
  static bool is_reference(const dnnl::primitive_desc_base& pd) {
    return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
  }

  // Small products on zeros: oneDNN's gemm kernels generate their code on their first execution in the process
  // (~40 ms; a few ms more for each new path: a single row takes gemv, few rows a small-matrix path), which
  // belongs to compilation, not to the first call.
  void warm_up() {
    for (int64_t rows : {int64_t(8), int64_t(64)}) {
      Dims ad, bd, yd;
      if (linear_) {
        ad = {rows, k_};
        yd = {rows, n_};
      } else {
        ad = bd = yd = Dims(rank_, 1);
        for (Dims* d : {&ad, &bd, &yd}) (*d)[rank_ - 1] = (*d)[rank_ - 2] = rows;
      }
      std::vector<float> a(size_t(shape_numel(ad)), 0.f), b(size_t(linear_ ? 1 : shape_numel(bd)), 0.f);
      std::vector<float> y(size_t(shape_numel(yd)), 0.f), bias(size_t(std::max<int64_t>(n_, 1)), 0.f);
      std::unordered_map<int, memory> args = args_;
      args[DNNL_ARG_SRC] = memory(dense_md(ad, dt_), cpu_engine(), a.data());
      args[DNNL_ARG_DST] = memory(dense_md(yd, dt_), cpu_engine(), y.data());
      if (!linear_) args[DNNL_ARG_WEIGHTS] = memory(weights_md(bd), cpu_engine(), b.data());
      if (bind_bias_) args[DNNL_ARG_BIAS] = memory(dense_md({1, n_}, dt_), cpu_engine(), bias.data());
      bind_scratchpad(args);
      prim_.execute(thread_stream(), args);
      thread_stream().wait();
    }
  }

  // B's descriptor for stored dims `bd` (batched form): logical [.., K, N], stored transposed when transB.
  memory::desc weights_md(const Dims& bd) const {
    Dims logical = bd;
    if (spec_.trans_b) std::swap(logical[rank_ - 1], logical[rank_ - 2]);
    return spec_.trans_b ? swapped_last2_md(logical, dt_) : dense_md(logical, dt_);
  }

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0 || a.numel() == 0) {  // oneDNN takes no empty tensors; K = 0 leaves Y = bias + sum
      ref_kernel(ctx.node().op())(ctx);
      return;
    }
    if (spec_.sum_input >= 0) {
      const Tensor& sum = ctx.input(size_t(spec_.sum_input));
      CUVIL_ASSERT(sum.shape() == y.shape(), ctx.node().describe(), ": the residual input is ",
                  sum.type_str(), " but the output ", y.type_str());
      if (sum.raw() != y.raw()) std::memcpy(y.raw(), sum.raw(), y.nbytes());
    }
    if (a.shape() != last_a_ || b.shape() != last_b_) describe(a.shape(), b.shape(), y.shape());
    bind(DNNL_ARG_SRC, a.raw());
    bind(DNNL_ARG_DST, y.raw());
    if (!linear_) bind(DNNL_ARG_WEIGHTS, b.raw());
    if (bind_bias_) bind(DNNL_ARG_BIAS, ctx.input(size_t(spec_.bias_input)).raw());
    execute();
  }

 private:
  // New input dims (steady calls skip this): descriptors of this call's A, B and Y, and the thread count.
  void describe(const Dims& as, const Dims& bs, const Dims& ys) {
    last_a_ = as;
    last_b_ = bs;
    if (linear_) {
      int64_t rows = shape_numel(as) / k_;
      args_[DNNL_ARG_SRC] = memory(dense_md({rows, k_}, dt_), cpu_engine(), DNNL_MEMORY_NONE);
      args_[DNNL_ARG_DST] = memory(dense_md({rows, n_}, dt_), cpu_engine(), DNNL_MEMORY_NONE);
    } else {
      args_[DNNL_ARG_SRC] = memory(dense_md(as, dt_), cpu_engine(), DNNL_MEMORY_NONE);
      args_[DNNL_ARG_DST] = memory(dense_md(ys, dt_), cpu_engine(), DNNL_MEMORY_NONE);
      args_[DNNL_ARG_WEIGHTS] = memory(weights_md(bs), cpu_engine(), DNNL_MEMORY_NONE);
    }
    arguments_changed();
    double flops = 2.0 * double(shape_numel(ys)) * double(linear_ ? k_ : as.back());
    threads_ = flops < kSingleThreadFlops ? 1 : 0;
  }

  // A row-major descriptor of run-time dims, or with the last two swapped in memory.
  memory::desc dense_md_any(const Dims& dims, bool swap_last2) const {
    using T = memory::format_tag;
    T tag;
    switch (dims.size()) {
      case 2: tag = swap_last2 ? T::ba : T::ab; break;
      case 3: tag = swap_last2 ? T::acb : T::abc; break;
      case 4: tag = swap_last2 ? T::abdc : T::abcd; break;
      case 5: tag = swap_last2 ? T::abced : T::abcde; break;
      case 6: tag = swap_last2 ? T::abcdfe : T::abcdef; break;
      default: throw dnnl::error(dnnl_unimplemented, "no format tag for this rank");
    }
    return memory::desc(dims, dt_, tag);
  }

  MatMulSpec spec_;
  memory::data_type dt_ = memory::data_type::f32;
  bool linear_ = false, bind_bias_ = false;
  int64_t k_ = 0, n_ = 0;
  size_t rank_ = 0;
  Dims last_a_, last_b_;
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_shape_generic_matmul(const Node& n) {
  auto k = std::make_unique<ShapeGenericMatMul>();
  if (!k->prepare(n)) return nullptr;
  return k;
}

std::unique_ptr<PreparedKernel> prepare_matmul(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y) {
  auto k = std::make_unique<MatMulKernel>();
  if (!k->prepare(n, inputs, y)) return nullptr;
  if (!k->threaded()) return k;
  // The single-threaded twin for a loaded machine, made at its first use (the node outlives its kernels).
  const Node* node = &n;
  PrecisionDecision decision = k->precision;
  auto twin = std::make_unique<SpinAwareKernel>(
      std::move(k), [node, held = hold_inputs(inputs), y]() -> std::unique_ptr<PreparedKernel> {
        auto single = std::make_unique<MatMulKernel>();
        single->make_single();
        if (!single->prepare(*node, held.inputs, y)) return nullptr;
        return single;
      });
  twin->precision = decision;
  return twin;
}

std::unique_ptr<PreparedKernel> prepare_matmul_bf16(const Node& n, const std::vector<PrepareInput>& inputs,
                                                    const Dims& y, std::string* reason) {
  auto k = std::make_unique<MatMulKernel>();
  if (!k->prepare(n, inputs, y, /*bf16=*/true, reason)) {
    if (reason->empty()) *reason = "no bf16 kernel for this product";
    return nullptr;
  }
  if (!k->threaded()) return k;
  // As f32's: the single-threaded twin for a loaded machine, made at its first use. Where bf16 does not take the
  // node on one thread (it should: the ISA decides), the threaded primitive keeps running.
  PrecisionDecision decision = k->precision;
  auto twin = std::make_unique<SpinAwareKernel>(
      std::move(k), [node = &n, held = hold_inputs(inputs), y]() -> std::unique_ptr<PreparedKernel> {
        auto single = std::make_unique<MatMulKernel>();
        single->make_single();
        std::string why;
        if (!single->prepare(*node, held.inputs, y, /*bf16=*/true, &why) ||
            single->precision.precision != Precision::bf16)
          return nullptr;
        return single;
      });
  twin->precision = decision;
  return twin;
}

}  // namespace cuvil::onednn
