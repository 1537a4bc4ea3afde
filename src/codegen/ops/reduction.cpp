// Lowering records: the Reduce ops and ArgMax/ArgMin, reductions over one block of dims whose results hold one
// value per row. ReduceL2 and ReduceLogSum scale by the largest magnitude so that f32 does not overflow where the
// reference's f64 does not; f32 ReduceProd multiplies in f64 for the same reason (integer products wrap like the
// reference's). ArgMax/ArgMin reduce (value, position) pairs whose winner does not depend on the order they meet.
#include <limits>

#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

// The constant axes of a Reduce node (input 1), normalized and sorted; nullopt when not constant. Absent: all.
std::optional<std::vector<int64_t>> reduce_axes(const Node& n, int64_t rank) {
  std::vector<int64_t> axes;
  const Value* a = n.input(1);
  if (a) {
    if (!a->is_constant()) return std::nullopt;
    const Tensor& t = a->constant();
    for (int64_t i = 0; i < t.numel(); ++i) axes.push_back(t.get_i64(i));
  }
  if (axes.empty()) {
    if (AttrReader(n).i("noop_with_empty_axes")) return std::nullopt;  // identity: nothing to generate
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  return normalized_axes(std::move(axes), rank);
}

std::optional<ReducedBlock> reduce_block(const Node& n, int64_t rank) {
  auto axes = reduced_axes(n);
  if (!axes) return std::nullopt;
  if (auto block = block_of(*axes, rank)) return block;
  return block_of_sized(*axes, n, rank);
}

std::optional<ReducedBlock> arg_block(const Node& n, int64_t rank) {
  return axis_block(n, rank, ReducedBlock::Kind::reduce);
}

InputUse axes_input(const Node&, size_t i) { return {i == 1 ? InputRole::axes : InputRole::element}; }
OutputUse row_output(const Node& n, size_t) {
  return {AttrReader(n).i("keepdims") == 0 ? OutputRole::row_dropped : OutputRole::per_row};
}

// Integer sums, products and extremes wrap or compare exactly, as the reference's do; the rest need floats.
template <bool any_number>
bool reduction_supports(const Node& n, std::string* why) {
  DType t0 = n.input(0) ? n.input(0)->dtype() : DType::f32;
  if (!(any_number ? numeric(t0) : floating(t0)))
    return refuse(why, "dtype ", dtype_name(t0), " is not generated for this reduction");
  return reduced_block(n).has_value() || refuse(why, "only reductions over one block of constant axes are generated");
}

bool arg_supports(const Node& n, std::string* why) {
  DType t0 = n.input(0) ? n.input(0)->dtype() : DType::f32;
  if (!numeric(t0)) return refuse(why, "dtype ", dtype_name(t0), " is not generated");
  return reduced_block(n).has_value() || refuse(why, "the axis is not known");
}

template <Op op>
CUVIL_LOWERING(lower_row) {
  out[0] = L.add(op, L.type(in[0]), in[0]);
  return true;
}

CUVIL_LOWERING(lower_mean) {
  int x = in[0];
  Scalar tx = L.type(x);
  out[0] = L.bin(Op::div, L.add(Op::row_sum, tx, x), L.add(Op::row_size, tx));
  return true;
}

CUVIL_LOWERING(lower_prod) {  // a float product in f64, as the reference's: f32 would overflow or underflow midway
  int x = in[0];
  Scalar tx = L.type(x);
  if (tx == Scalar::f32) out[0] = L.cast(L.add(Op::row_prod, Scalar::f64, L.cast(x, Scalar::f64)), Scalar::f32);
  else out[0] = L.add(Op::row_prod, tx, x);
  return true;
}

CUVIL_LOWERING(lower_l1) {
  int x = in[0];
  out[0] = L.add(Op::row_sum, L.type(x), L.un(Op::abs, x));
  return true;
}

CUVIL_LOWERING(lower_sum_square) {
  int x = in[0];
  out[0] = L.add(Op::row_sum, L.type(x), L.bin(Op::mul, x, x));
  return true;
}

CUVIL_LOWERING(lower_l2) {  // m sqrt(sum((x / m)^2)), m = max |x|: no f32 overflow where the f64 reference has none
  int x = in[0];
  Scalar tx = L.type(x);
  int m = L.add(Op::row_max, tx, L.un(Op::abs, x));
  int t = L.bin(Op::div, x, m);
  int r = L.bin(Op::mul, m, L.un(Op::sqrt, L.add(Op::row_sum, tx, L.bin(Op::mul, t, t))));
  int inf = L.cst(std::numeric_limits<double>::infinity());
  out[0] = L.sel(L.cmp(Op::eq, m, L.cst(0)), L.cst(0), L.sel(L.cmp(Op::eq, m, inf), inf, r));
  return true;
}

CUVIL_LOWERING(lower_log_sum) {  // log(m) + log(sum(x / m)), m = max |x|, for the same reason
  int x = in[0];
  Scalar tx = L.type(x);
  int m = L.add(Op::row_max, tx, L.un(Op::abs, x));
  int r = L.bin(Op::add, L.un(Op::log, m), L.un(Op::log, L.add(Op::row_sum, tx, L.bin(Op::div, x, m))));
  int plain = L.un(Op::log, L.add(Op::row_sum, tx, x));  // m = 0 or inf: log(0) = -inf; inf or NaN sums
  int inf = L.cst(std::numeric_limits<double>::infinity());
  out[0] = L.sel(L.bin(Op::logical_or, L.cmp(Op::eq, m, L.cst(0)), L.cmp(Op::eq, m, inf)), plain, r);
  return true;
}

CUVIL_LOWERING(lower_log_sum_exp) {  // max + log(sum(e^(x - max))); an infinite max is the result
  int x = in[0];
  Scalar tx = L.type(x);
  int m = L.add(Op::row_max, tx, x);
  int s = L.add(Op::row_sum, tx, L.un(Op::exp, L.bin(Op::sub, x, m)));
  int inf = L.cmp(Op::eq, L.un(Op::abs, m), L.cst(std::numeric_limits<double>::infinity()));
  out[0] = L.sel(inf, m, L.bin(Op::add, m, L.un(Op::log, s)));
  return true;
}

template <Op op>
CUVIL_LOWERING(lower_arg) {
  out[0] = L.add(op, Scalar::i64, in[0], -1, -1, AttrReader(n).i("select_last_index") != 0 ? 1 : 0);
  return true;
}

}  // namespace

void add_reduction_lowerings(LoweringTable& t) {
  auto reduce = [](auto lower, bool any_number, Stores stores = Stores::computed, int weight = 1) {
    return OpLowering{.supports = any_number ? reduction_supports<true> : reduction_supports<false>,
                      .f64 = true, .block = reduce_block, .axes = reduce_axes, .input = axes_input,
                      .output = row_output, .stores = stores, .compile_weight = weight, .lower = lower};
  };
  t.add(OpKind::ReduceSum, reduce(lower_row<Op::row_sum>, true));
  t.add(OpKind::ReduceMax, reduce(lower_row<Op::row_max>, true, Stores::picked));
  t.add(OpKind::ReduceMin, reduce(lower_row<Op::row_min>, true, Stores::picked));
  t.add(OpKind::ReduceProd, reduce(lower_prod, true));
  t.add(OpKind::ReduceL1, reduce(lower_l1, true));
  t.add(OpKind::ReduceSumSquare, reduce(lower_sum_square, true));
  t.add(OpKind::ReduceMean, reduce(lower_mean, false));
  t.add(OpKind::ReduceL2, reduce(lower_l2, false, Stores::computed, 8));
  t.add(OpKind::ReduceLogSum, reduce(lower_log_sum, false, Stores::computed, 8));
  t.add(OpKind::ReduceLogSumExp, reduce(lower_log_sum_exp, false, Stores::computed, 8));
  t.add(OpKind::ArgMax, {.supports = arg_supports, .f64 = true, .block = arg_block, .output = row_output,
                         .lower = lower_arg<Op::row_argmax>});
  t.add(OpKind::ArgMin, {.supports = arg_supports, .f64 = true, .block = arg_block, .output = row_output,
                         .lower = lower_arg<Op::row_argmin>});
}

}  // namespace cuvil::codegen
