// Lowering record: NegativeLogLikelihoodLoss per element (reduction 'none'; decompose-ops writes the sums and means
// out as reductions over it). It reduces the class dim: the target's element of each row and its class weight are
// picked exactly by a row maximum over `row_index == target ? value : -inf`, and the loss is 0 where the target is
// ignore_index. Its targets are a per-row view (the space's shape without the class dim), checked before the run
// (each a class or the ignored index), and its weights a per-class view.
#include <limits>

#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

// The ignored target of a loss (ignore_index), when it has one.
std::optional<int64_t> ignored_target(const Node& n) {
  AttrReader at(n);
  if (!at.has("ignore_index")) return std::nullopt;
  return at.i("ignore_index");
}

std::optional<ReducedBlock> loss_block(const Node&, int64_t rank) {  // a pick from each row of classes (dim 1)
  if (rank < 2) return std::nullopt;
  return ReducedBlock{1, int(rank - 2)};
}

bool loss_supports(const Node& n, std::string* why) {  // (input dtypes: the schema's)
  const std::string& red = AttrReader(n).s("reduction");
  if (red != "none") return refuse(why, "reduction '", red, "' is not generated (decompose-ops writes it out)");
  auto ignore = ignored_target(n);
  if (ignore && !immediate_i64(*ignore)) return refuse(why, "ignore_index ", *ignore, " is no kernel immediate");
  return reduced_block(n).has_value() || refuse(why, "input rank below 2");
}

InputUse loss_inputs(const Node& n, size_t i) {
  if (i == 1) {  // the targets: one per row, class indices along dim 1 of the input
    InputUse use{InputRole::per_row, 1};
    use.class_targets = true;
    use.ignore = ignored_target(n);
    return use;
  }
  if (i == 2) return {InputRole::along_axis, 1};  // the class weights
  return {};
}

OutputUse loss_output(const Node&, size_t) { return {OutputRole::row_dropped}; }

// -input[n, t, d...] * weight[t] at each target t (in[1], read per row), 0 where t is the ignored index. Every
// other element of the row counts as -inf (the prepared kernel has checked that each target is a class or the
// ignored index).
CUVIL_LOWERING(lower_loss) {
  int x = in[0];
  Scalar tx = L.type(x);
  auto zero = [&]() { return L.cst(0, tx); };
  int t = L.cast(in[1], Scalar::i64);
  int hit = L.cmp(Op::eq, L.add(Op::row_index, Scalar::i64), t);
  int none = L.cst(-std::numeric_limits<double>::infinity(), tx);
  int loss = L.un(Op::neg, L.add(Op::row_max, tx, L.sel(hit, x, none)));
  if (in.size() > 2 && in[2] >= 0) loss = L.bin(Op::mul, loss, L.add(Op::row_max, tx, L.sel(hit, in[2], none)));
  if (auto ignore = ignored_target(n)) loss = L.sel(L.cmp(Op::eq, t, L.cst(double(*ignore), Scalar::i64)), zero(), loss);
  out[0] = loss;
  return true;
}

}  // namespace

void add_loss_lowerings(LoweringTable& t) {
  t.add(OpKind::NegativeLogLikelihoodLoss, {.supports = loss_supports, .f64 = true, .block = loss_block,
                                            .input = loss_inputs, .output = loss_output, .lower = lower_loss});
}

}  // namespace cuvil::codegen
