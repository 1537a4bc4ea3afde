// MatMul, Gemm and FusedMatMul whose B is a constant matrix (a Linear layer), on the product of gemm.h: A's
// leading dims run as the rows of one tall [rows, K] x [K, N] product, B (times alpha) is packed at prepare,
// and the rows are read from the input at every call, so one kernel serves every batch and sequence length.
// Also a FusedConv over one pixel (a squeeze-excitation block's two small layers after its global pool): a
// [N, C] x [C, M] product with the filters as B^T.
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/matmul_spec.h"

namespace cuvil::cpu {

namespace {

// Between one row and this many, products stay with oneDNN (not timed here). One row (a batch-1 classifier or
// MLP) runs here: gemm.cpp's one-row tile beat oneDNN's gemv (MobileNetV2's classifier 0.19 against 0.34 ms in
// the model, the 784-128-10 MLP 13 against 15 us per call; one thread, alternated with ONNX Runtime).
constexpr int64_t kMinRows = 16;
// On Intel cores, from this many rows oneDNN's brgemm runs the product faster (a 2 MB-L2 Xeon with AMX, one thread,
// alternated: 197 x 768 x 3072 2-3 %, Whisper's 1500 x 256 x 1024 10-12 %; ViT-base 2.4 %, the Whisper encoder
// 5 % in the model), while BERT's 128 rows run 3 % faster here. Zen 5 keeps them (level or ahead of oneDNN there).
constexpr int64_t kIntelOneDnnRows = 192;
bool rows_here(int64_t rows) {
  static const bool intel = __builtin_cpu_is("intel");
  if (intel && rows >= kIntelOneDnnRows) return false;
  return rows == 1 || rows >= kMinRows;
}

class GemmMatMul final : public PreparedKernel {
 public:
  // in: the inputs' dtypes and dims (-1 where a dim varies), B's value set.
  // generic: the dims marked -1 vary between calls.
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y, bool generic) {
    if (!gemm_supported() || in.size() < 2 || !in[0].present || !in[1].value) return false;
    for (const PrepareInput& i : in)
      if (i.present && i.dtype != DType::f32) return false;
    const std::vector<int64_t>& as = in[0].shape;
    const std::vector<int64_t>& bs = in[1].shape;
    if (as.size() < 2 || bs.size() < 2 || y.size() < 2) return false;
    for (size_t d = 0; d + 2 < bs.size(); ++d)
      if (bs[d] != 1) return false;  // a batched B: oneDNN's
    if (!read_matmul_spec(n, in, y, spec_) || spec_.trans_a) return false;
    // A Gemm's C read as Y-shaped might be a broadcast row at run time: only static shapes tell.
    if (generic && n.op() == OpKind::Gemm && spec_.sum_input >= 0) return false;
    k_ = bs[bs.size() - (spec_.trans_b ? 1 : 2)];
    n_ = bs[bs.size() - (spec_.trans_b ? 2 : 1)];
    if (k_ <= 0 || n_ <= 0 || as.back() != k_ || y.back() != n_) return false;
    if (spec_.sum_input >= 0 && in[size_t(spec_.sum_input)].shape != y) return false;
    b_ = std::make_unique<PackedB>(in[1].value->data<float>(), k_, n_, spec_.trans_b, spec_.alpha);
    if (spec_.bias_input >= 0) {
      const PrepareInput& bias = in[size_t(spec_.bias_input)];
      if (shape_numel(bias.shape) != n_) return false;
      if (bias.value) {
        // alpha is in B; the bias keeps its own scale (Gemm's beta), applied once here
        const float* v = bias.value->data<float>();
        bias_.resize(size_t(n_));
        for (int64_t j = 0; j < n_; ++j) bias_[size_t(j)] = v[j] * spec_.bias_scale;
      } else if (spec_.bias_scale != 1.f) {
        return false;
      }
    }
    return true;
  }

  // A FusedConv whose input, output and filters have one pixel (any padding would make the output larger), in
  // either layout (one pixel: the same memory), group 1, constant filters.
  bool prepare_pixel_conv(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y) {
    if (!gemm_supported() || n.op() != OpKind::FusedConv || in.size() < 2 || !in[0].present || !in[1].value)
      return false;
    for (const PrepareInput& i : in)
      if (i.present && i.dtype != DType::f32) return false;
    AttrReader attrs(n);
    const std::vector<int64_t>&x = in[0].shape, &w = in[1].shape;
    if (x.size() < 3 || w.size() != x.size() || y.size() != x.size() || attrs.i("group") != 1) return false;
    bool cl = attrs.i("channels_last") != 0;
    size_t c_axis = cl ? x.size() - 1 : 1;
    for (size_t d = 2; d < w.size(); ++d)
      if (w[d] != 1) return false;
    for (size_t d = 1; d < x.size(); ++d)
      if (d != c_axis && (x[d] != 1 || y[d] != 1)) return false;
    k_ = x[c_axis];
    n_ = w[0];
    if (k_ <= 0 || n_ <= 0 || w[1] != k_ || y[c_axis] != n_ || y[0] != x[0]) return false;
    spec_.trans_b = true;
    spec_.act = nn::read_activation(attrs);
    if (in.size() > 2 && in[2].present) {
      if (!in[2].value || shape_numel(in[2].shape) != n_) return false;
      spec_.bias_input = 2;
      const float* v = in[2].value->data<float>();
      bias_.assign(v, v + n_);
    }
    if (in.size() > 3 && in[3].present) {
      if (in[3].shape != y) return false;
      spec_.sum_input = 3;
    }
    b_ = std::make_unique<PackedB>(in[1].value->data<float>(), k_, n_, true, 1.f);
    return true;
  }

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    Tensor& y = ctx.output(0);
    int64_t rows = a.numel() / k_;
    CUVIL_ASSERT(rows * n_ == y.numel(), ctx.node().describe(), ": ", a.type_str(), " x [", k_, ", ",
                n_, "] does not give ", y.type_str());
    GemmEpilogue e;
    e.act = spec_.act;
    if (spec_.bias_input >= 0)
      e.bias = bias_.empty() ? ctx.input(size_t(spec_.bias_input)).data<float>() : bias_.data();
    if (spec_.sum_input >= 0) {
      const Tensor& sum = ctx.input(size_t(spec_.sum_input));
      CUVIL_ASSERT(sum.shape() == y.shape(), ctx.node().describe(), ": the residual input is ",
                  sum.type_str(), " but the output ", y.type_str());
      e.sum = sum.data<float>();
      e.sum_scale = spec_.sum_scale;
    }
    gemm(a.data<float>(), rows, k_, *b_, y.data<float>(), n_, e);
  }
  std::string impl_name() const override { return "cpu:gemm:avx512"; }

 private:
  MatMulSpec spec_;
  int64_t k_ = 0, n_ = 0;
  std::unique_ptr<PackedB> b_;
  std::vector<float> bias_;  // a constant bias times its scale; empty when the bias is read at run time
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_matmul(const Node& n, const std::vector<PrepareInput>& inputs) {
  bool conv = n.op() == OpKind::FusedConv;
  if (n.op() != OpKind::MatMul && n.op() != OpKind::Gemm && n.op() != OpKind::FusedMatMul && !conv) return nullptr;
  if (inputs.empty() || !inputs[0].present) return nullptr;
  std::vector<std::vector<int64_t>> y = infer_output_dims(n, inputs);
  if (y.empty() || y[0].empty()) return nullptr;
  if (conv) {
    // One pixel per image, one image: as one-row products (MobileNetV3-large's 16 squeeze-excitation layers
    // took 0.43 ms on oneDNN, ORT's 0.39)
    if (inputs[0].shape.empty() || inputs[0].shape[0] != 1) return nullptr;
    auto kernel = std::make_unique<GemmMatMul>();
    if (!kernel->prepare_pixel_conv(n, inputs, y[0])) return nullptr;
    return kernel;
  }
  int64_t k = inputs[0].shape.empty() ? 0 : inputs[0].shape.back();
  if (k <= 0 || !rows_here(shape_numel(inputs[0].shape) / k)) return nullptr;
  auto kernel = std::make_unique<GemmMatMul>();
  if (!kernel->prepare(n, inputs, y[0], false)) return nullptr;
  return kernel;
}

std::unique_ptr<PreparedKernel> prepare_shape_generic_matmul(const Node& n) {
  if (n.op() != OpKind::MatMul && n.op() != OpKind::Gemm && n.op() != OpKind::FusedMatMul) return nullptr;
  bool varies = false;
  for (const Value* v : n.inputs()) varies = varies || (v && !v->shape().is_static());
  if (!varies) return nullptr;  // one shape only: prepare_matmul decides, knowing the rows
  std::vector<PrepareInput> in;
  std::vector<int64_t> y;
  if (!symbolic_inputs(n, in, y)) return nullptr;
  auto kernel = std::make_unique<GemmMatMul>();
  if (!kernel->prepare(n, in, y, true)) return nullptr;
  return kernel;
}

}  // namespace cuvil::cpu
