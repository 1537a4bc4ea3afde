// Cast f32 -> bf16 (rounding to nearest even) as one oneDNN reorder: the conversion a bf16 primitive would do
// on its source, done once for a value several bf16 products read (runtime/bf16_links.h inserts such Casts).
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"

namespace cuvil::onednn {

namespace {

// Below this the conversion runs on the calling thread (as Bf16Source's).
constexpr size_t kSingleThreadConvertBytes = size_t(1) << 18;

class Bf16ConvertKernel final : public PreparedKernel {
 public:
  explicit Bf16ConvertKernel(int64_t numel)
      : from_(memory::desc({numel}, memory::data_type::f32, memory::format_tag::a), cpu_engine(), DNNL_MEMORY_NONE),
        to_(memory::desc({numel}, memory::data_type::bf16, memory::format_tag::a), cpu_engine(), DNNL_MEMORY_NONE),
        reorder_(from_, to_), single_(size_t(numel) * 4 < kSingleThreadConvertBytes) {
    precision.precision = Precision::bf16;
  }
  void run(KernelContext& ctx) override {
    ScopedThreads t(single_ ? 1 : 0);
    from_.set_data_handle(const_cast<void*>(ctx.input(0).raw()));
    to_.set_data_handle(ctx.output(0).raw());
    reorder_.execute(from_, to_);
  }
  std::string impl_name() const override { return "onednn:reorder:f32->bf16"; }

 private:
  memory from_, to_;
  Reorder reorder_;
  bool single_;
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_bf16_convert(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (n.op() != OpKind::Cast || inputs.size() != 1 || inputs[0].dtype != DType::f32 ||
      n.output(0)->dtype() != DType::bf16 || !n.has_attr("round_bf16") || n.attr("round_bf16").i() == 0)
    return nullptr;
  int64_t numel = 1;
  for (int64_t d : inputs[0].shape) numel *= d;
  if (numel <= 0) return nullptr;
  try {
    return std::make_unique<Bf16ConvertKernel>(numel);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace cuvil::onednn
