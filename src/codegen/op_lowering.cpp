// The table of per-op lowering records and what it answers about single nodes: whether one generates, the block of
// dims it reduces, the roles of its inputs and outputs; and those facts registered for the graph passes.
#include "codegen/op_lowering.h"

#include <algorithm>

namespace cuvil::codegen {

namespace {

const LoweringTable& table() {
  static const LoweringTable t = [] {
    LoweringTable t;
    add_unary_lowerings(t);
    add_activation_lowerings(t);
    add_trigonometry_lowerings(t);
    add_binary_lowerings(t);
    add_power_lowerings(t);
    add_conversion_lowerings(t);
    add_reduction_lowerings(t);
    add_normalization_lowerings(t);
    add_scan_select_lowerings(t);
    add_loss_lowerings(t);
    return t;
  }();
  return t;
}

constexpr double kTwo63 = 9223372036854775808.0;

}  // namespace

const OpLowering* op_lowering(OpKind op) { return table().find(op); }

InputUse input_use(const Node& n, size_t i) {
  const OpLowering* r = op_lowering(n.op());
  return r && r->input ? r->input(n, i) : InputUse{};
}
OutputUse output_use(const Node& n, size_t o) {
  const OpLowering* r = op_lowering(n.op());
  return r && r->output ? r->output(n, o) : OutputUse{};
}

// ---- shared helpers

bool floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64; }
bool narrow_int(DType t) { return is_integer(t) && t != DType::i32 && t != DType::i64 && t != DType::u64; }
bool numeric(DType t) { return floating(t) || is_integer(t); }
bool all_inputs(const Node& n, bool (*pred)(DType)) {
  for (const Value* v : n.inputs())
    if (v && !pred(v->dtype())) return false;
  return true;
}
bool floats_only(const Node& n, std::string* why) {
  return all_inputs(n, floating) || refuse(why, "generated only for floats");
}
bool numbers_only(const Node& n, std::string* why) {
  return all_inputs(n, numeric) || refuse(why, "generated only for numbers");
}

std::optional<double> immediate_i64(int64_t v) {
  double d = double(v);
  if (d < kTwo63 && int64_t(d) == v) return d;
  return std::nullopt;
}
std::optional<double> immediate(const Tensor& t) {
  if (is_float(t.dtype())) return t.get_f64(0);
  if (t.dtype() == DType::u64) {
    uint64_t v = t.data<uint64_t>()[0];
    double d = double(v);
    if (d < 2 * kTwo63 && uint64_t(d) == v) return d;
    return std::nullopt;
  }
  return immediate_i64(t.get_i64(0));
}
std::optional<double> scalar_input(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (!v || !v->is_constant() || v->constant().numel() != 1) return std::nullopt;
  return immediate(v->constant());
}

std::optional<std::vector<int64_t>> normalized_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& x : axes) {
    if (x < -rank || x >= rank) return std::nullopt;
    if (x < 0) x += rank;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

int64_t input_rank(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->shape().rank_known() ? int64_t(v->shape().rank()) : -1;
}

std::optional<ReducedBlock> block_of(const std::vector<int64_t>& axes, int64_t rank) {
  if (axes.empty()) return std::nullopt;
  for (size_t j = 1; j < axes.size(); ++j)
    if (axes[j] != axes[j - 1] + 1) return std::nullopt;
  return ReducedBlock{int(axes.size()), int(rank - 1 - axes.back())};
}

std::optional<ReducedBlock> block_of_sized(std::vector<int64_t> axes, const Node& n, int64_t rank) {
  const std::vector<Dim>& x = n.input(0)->shape().dims();
  std::erase_if(axes, [&](int64_t a) { return x[size_t(a)] == Dim(1); });
  return block_of(axes, rank);
}

std::optional<ReducedBlock> axis_block(const Node& n, int64_t rank, ReducedBlock::Kind kind) {
  auto axis = normalized_axes({AttrReader(n).i("axis")}, rank);
  if (!axis) return std::nullopt;
  return ReducedBlock{1, int(rank - 1 - axis->front()), kind};
}

// ---- what the records answer about one node

bool storable_dtype(DType t) { return numeric(t) || t == DType::boolean; }

std::optional<ReducedBlock> reduced_block(const Node& n) {
  int64_t r = input_rank(n, 0);
  if (r < 0) return std::nullopt;
  const OpLowering* rec = op_lowering(n.op());
  return rec && rec->block ? rec->block(n, r) : ReducedBlock{};
}

std::optional<std::vector<int64_t>> reduced_axes(const Node& n) {
  int64_t r = input_rank(n, 0);
  const OpLowering* rec = op_lowering(n.op());
  if (r < 0 || !rec || !rec->axes) return std::nullopt;
  return rec->axes(n, r);
}

InputRole input_role(const Node& n, size_t i) { return input_use(n, i).role; }
OutputRole output_role(const Node& n, size_t o) { return output_use(n, o).role; }
bool is_axes_input(const Node& n, size_t i) { return input_role(n, i) == InputRole::axes; }
bool must_be_kernel_input(const Node& n, size_t i) { return cuvil::must_be_kernel_input(input_role(n, i)); }

int compile_weight(const Node& n) {
  const OpLowering* rec = op_lowering(n.op());
  return rec ? rec->compile_weight : 1;
}

bool can_generate(const Node& n, std::string* why) {
  if (!n.regions().empty()) return refuse(why, "it holds regions");
  for (const Value* v : n.inputs())
    if (v && !storable_dtype(v->dtype())) return refuse(why, "input dtype ", dtype_name(v->dtype()), " is not generated");
  for (const Value* v : n.outputs()) {
    if (!storable_dtype(v->dtype())) return refuse(why, "output dtype ", dtype_name(v->dtype()), " is not generated");
    if (!v->shape().rank_known()) return refuse(why, "output rank is unknown");
  }
  // (f64 -> f16/bf16 goes through f32, as the reference's conversions do: the same two roundings.)
  bool any_f64 = false;
  for (const Value* v : n.inputs()) any_f64 = any_f64 || (v && v->dtype() == DType::f64);
  for (const Value* v : n.outputs()) any_f64 = any_f64 || v->dtype() == DType::f64;
  const OpLowering* rec = op_lowering(n.op());
  if (any_f64 && !(rec && rec->f64)) return refuse(why, "not generated for f64 (its math is f32 only)");
  if (!rec) return refuse(why, "no generated form");
  return !rec->supports || rec->supports(n, why);
}

// ---- the facts the passes see

namespace {

class GeneratorFacts final : public FusionFacts {
 public:
  bool can_generate(const Node& n, std::string* why) const override { return codegen::can_generate(n, why); }
  std::optional<ReducedBlock> reduced_block(const Node& n) const override { return codegen::reduced_block(n); }
  std::optional<std::vector<int64_t>> reduced_axes(const Node& n) const override {
    return codegen::reduced_axes(n);
  }
  bool storable(DType t) const override { return storable_dtype(t); }
  InputRole input_role(const Node& n, size_t i) const override { return codegen::input_role(n, i); }
  OutputRole output_role(const Node& n, size_t o) const override { return codegen::output_role(n, o); }
  int compile_weight(const Node& n) const override { return codegen::compile_weight(n); }
  // Only views that keep the innermost dim read contiguous vectors; moving it would read each vector from 16 rows
  // (Transpose to NHWC + Add over 64 MB: 21 ms strided, against ONNX Runtime's 12 ms with a copy).
  bool gathers(const Node& n) const override {
    if (n.num_inputs() == 0) return false;
    InputUse use = input_use(n, 0);
    if (use.role != InputRole::permuted) return false;
    return use.perm.empty() || use.perm.back() != int64_t(use.perm.size()) - 1;
  }
};

const bool kRegistered = (register_fusion_facts(&generator_facts()), true);

}  // namespace

const FusionFacts& generator_facts() {
  static const GeneratorFacts facts;
  (void)kRegistered;
  return facts;
}

}  // namespace cuvil::codegen
