#include "ir/op_schema.h"

#include <array>

namespace cuvil {

// Every op in the table must have a definition; a missing one is a link error naming define_op_<Name>.
#define CUVIL_OP(name, family) void define_op_##name(OpSchema& s);
#include "ir/ops.def"
#undef CUVIL_OP

namespace {

constexpr std::string_view kOpNames[] = {
#define CUVIL_OP(name, family) #name,
#include "ir/ops.def"
#undef CUVIL_OP
};
constexpr std::string_view kOpFamilies[] = {
#define CUVIL_OP(name, family) #family,
#include "ir/ops.def"
#undef CUVIL_OP
};
static_assert(std::size(kOpNames) == size_t(kNumOps), "op name table out of step with OpKind");
static_assert(std::size(kOpFamilies) == size_t(kNumOps), "op family table out of step with OpKind");

std::array<OpSchema, kNumOps> build_schemas() {
  std::array<OpSchema, kNumOps> t;
#define CUVIL_OP(name, family)           \
  t[size_t(OpKind::name)].kind = OpKind::name; \
  define_op_##name(t[size_t(OpKind::name)]);
#include "ir/ops.def"
#undef CUVIL_OP
  return t;
}

}  // namespace

std::string_view op_name(OpKind k) { return kOpNames[size_t(k)]; }
std::string_view op_family(OpKind k) { return kOpFamilies[size_t(k)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOpNames[i] == name) return OpKind(i);
  return std::nullopt;
}

const OpSchema& op_schema(OpKind k) {
  static const std::array<OpSchema, kNumOps> table = build_schemas();
  return table[size_t(k)];
}

void check_arity(const Node& n) {
  const OpSchema& s = op_schema(n.op());
  int ni = int(n.num_inputs()), no = int(n.num_outputs());
  CUVIL_CHECK(ni >= s.min_inputs && (s.max_inputs < 0 || ni <= s.max_inputs), n.describe(), ": has ", ni,
              " inputs; the op takes ", s.min_inputs,
              s.max_inputs < 0 ? " or more" : " to " + std::to_string(s.max_inputs));
  CUVIL_CHECK(no >= s.min_outputs && (s.max_outputs < 0 || no <= s.max_outputs), n.describe(), ": has ", no,
              " outputs; the op gives ", s.min_outputs,
              s.max_outputs < 0 ? " or more" : " to " + std::to_string(s.max_outputs));
  for (int i = 0; i < s.min_inputs; ++i)
    CUVIL_CHECK(n.input(size_t(i)), n.describe(), ": required input ", i, " is missing");
}

const AttrSpec* OpSchema::find_attr(const std::string& name) const {
  for (auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

// ---- InferContext

InferContext::InferContext(const Node& n, std::vector<const TensorType*> in_types,
                           std::vector<const Tensor*> in_values, std::vector<const std::vector<Dim>*> in_dim_values,
                           int64_t* fresh_counter)
    : AttrReader(n),
      in_types_(std::move(in_types)),
      in_values_(std::move(in_values)),
      in_dim_values_(std::move(in_dim_values)),
      derived_dim_values_(in_types_.size()),
      out_types_(n.num_outputs()),
      out_set_(n.num_outputs(), false),
      out_dim_values_(n.num_outputs()),
      fresh_counter_(fresh_counter) {
  in_values_.resize(in_types_.size(), nullptr);
  in_dim_values_.resize(in_types_.size(), nullptr);
}

const TensorType& InferContext::input_type(size_t i) const {
  if (!has_input(i)) error("input ", i, " is required but missing");
  return *in_types_[i];
}

size_t InferContext::input_rank(size_t i) const {
  const Shape& s = input_shape(i);
  if (!s.rank_known()) throw UnknownRankError(node_.describe() + ": input " + std::to_string(i) +
                                              " must have a known rank");
  return s.rank();
}

const std::vector<Dim>* InferContext::input_dims_value(size_t i) {
  if (!has_input(i)) return nullptr;
  if (in_dim_values_[i] || derived_dim_values_[i]) {
    read_values_ = true;
    return in_dim_values_[i] ? in_dim_values_[i] : &*derived_dim_values_[i];
  }
  const Tensor* t = in_values_[i];
  // A tensor that is not a small integer vector gives no dims whatever it holds: that follows from its type, so
  // the inference does not count as reading values (the executor then reuses the dims it found).
  if (!t || t->rank() > 1 || t->numel() > kMaxDimsValueElements || is_float(t->dtype()) ||
      t->dtype() == DType::str || is_low_precision(t->dtype())) return nullptr;
  read_values_ = true;
  std::vector<Dim> v;
  for (int64_t k = 0; k < t->numel(); ++k) v.push_back(Dim(t->get_i64(k)));
  derived_dim_values_[i] = std::move(v);
  return &*derived_dim_values_[i];
}

void InferContext::set_output(size_t i, DType dtype, Shape shape) {
  if (i >= out_types_.size()) return;  // an optional output the node does not produce
  out_types_[i] = TensorType{dtype, std::move(shape)};
  out_set_[i] = true;
}

void InferContext::set_output_dims_value(size_t i, std::vector<Dim> v) {
  if (i < out_dim_values_.size()) out_dim_values_[i] = std::move(v);
}

std::vector<TensorType> InferContext::infer_region(Graph& region, const std::vector<TensorType>& input_types) {
  CUVIL_ASSERT(region_inferrer);
  return region_inferrer(region, input_types);
}

Dim InferContext::fresh_dim() { return Dim::symbol("_" + std::to_string(++*fresh_counter_)); }

void InferContext::fail_node(const std::string& msg) const { fail(node_.describe(), ": ", msg); }

}  // namespace cuvil
