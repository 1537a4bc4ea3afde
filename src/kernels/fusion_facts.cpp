#include "kernels/fusion_facts.h"

#include <atomic>

namespace cuvil {

namespace {

// No generator: nothing generates, so fusion makes no kernels.
class NothingGenerates final : public FusionFacts {
 public:
  bool can_generate(const Node&, std::string* why) const override {
    if (why) *why = "no kernel generator is linked into this process";
    return false;
  }
  std::optional<ReducedBlock> reduced_block(const Node&) const override { return std::nullopt; }
  std::optional<std::vector<int64_t>> reduced_axes(const Node&) const override { return std::nullopt; }
  bool storable(DType) const override { return false; }
  InputRole input_role(const Node&, size_t) const override { return InputRole::element; }
  OutputRole output_role(const Node&, size_t) const override { return OutputRole::element; }
  int compile_weight(const Node&) const override { return 1; }
  bool gathers(const Node&) const override { return false; }
};

std::atomic<const FusionFacts*>& registered() {
  static std::atomic<const FusionFacts*> facts{nullptr};
  return facts;
}

}  // namespace

const FusionFacts& fusion_facts() {
  static const NothingGenerates none;
  const FusionFacts* f = registered().load(std::memory_order_acquire);
  return f ? *f : none;
}

void register_fusion_facts(const FusionFacts* facts) { registered().store(facts, std::memory_order_release); }

}  // namespace cuvil
