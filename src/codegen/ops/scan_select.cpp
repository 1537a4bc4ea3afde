// Lowering records: CumSum (scan_sum: running sums along the row, in f64 for floats as the reference's, rounded
// once) and TopK with a constant K up to kMaxGeneratedTopK (row_topk: each lane keeps its K best (value, position)
// pairs in registers; the results hold K values per row, no element of the kernel's space).
#include <cmath>

#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

InputUse axis_input(const Node&, size_t i) { return {i == 1 ? InputRole::axes : InputRole::element}; }

std::optional<ReducedBlock> cumsum_block(const Node& n, int64_t rank) {
  auto a = scalar_input(n, 1);
  auto axis = a && *a == std::floor(*a) ? normalized_axes({int64_t(*a)}, rank) : std::nullopt;
  if (!axis) return std::nullopt;
  return ReducedBlock{1, int(rank - 1 - axis->front()),
                      AttrReader(n).i("reverse") != 0 ? ReducedBlock::Kind::reverse_scan : ReducedBlock::Kind::scan};
}
bool cumsum_supports(const Node& n, std::string* why) {  // (the schema's types: numbers)
  if (!n.input(1) || !n.input(1)->is_constant() || is_float(n.input(1)->dtype()))
    return refuse(why, "the axis is not a constant integer");
  return reduced_block(n).has_value() || refuse(why, "the axis is out of range");  // the reference reports it
}
CUVIL_LOWERING(lower_cumsum) {  // running sums as the reference's: floats in f64, rounded once per element
  AttrReader at(n);
  int x = in[0];
  Scalar tx = L.type(x);
  int flags = (at.i("exclusive") != 0 ? kScanExclusive : 0) | (at.i("reverse") != 0 ? kScanReverse : 0);
  Scalar t = is_float(tx) ? Scalar::f64 : tx;
  out[0] = L.cast(L.add(Op::scan_sum, t, L.cast(x, t), -1, -1, flags), tx);
  return true;
}

std::optional<ReducedBlock> topk_block(const Node& n, int64_t rank) {
  return axis_block(n, rank, ReducedBlock::Kind::select);
}
// K pairs per lane live in registers: small K only (larger ones sort op by op).
bool topk_supports(const Node& n, std::string* why) {
  auto k = scalar_input(n, 1);
  if (!k || *k < 1 || *k > kMaxGeneratedTopK) return refuse(why, "K is not a constant from 1 to ", kMaxGeneratedTopK);
  DType t0 = n.input(0) ? n.input(0)->dtype() : DType::f32;
  if (!numeric(t0)) return refuse(why, "dtype ", dtype_name(t0), " is not generated");
  return reduced_block(n).has_value() || refuse(why, "the axis is out of range");
}
OutputUse topk_outputs(const Node& n, size_t) {  // (K is a constant: topk_supports)
  auto k = scalar_input(n, 1);
  return {OutputRole::entries, k ? int64_t(*k) : 0};
}
CUVIL_LOWERING(lower_topk) {  // the K best of each column, then their positions
  AttrReader at(n);
  int64_t k = int64_t(*scalar_input(n, 1));
  out[0] = L.add(Op::row_topk, L.type(in[0]), in[0], -1, -1, double(at.i("largest") != 0 ? k : -k));
  if (out.size() > 1) out[1] = L.add(Op::row_topk_index, Scalar::i64, out[0]);
  return true;
}

}  // namespace

void add_scan_select_lowerings(LoweringTable& t) {
  t.add(OpKind::CumSum,
        {.supports = cumsum_supports, .f64 = true, .block = cumsum_block, .input = axis_input, .lower = lower_cumsum});
  t.add(OpKind::TopK, {.supports = topk_supports, .f64 = true, .block = topk_block, .input = axis_input,
                       .output = topk_outputs, .stores = Stores::passed, .lower = lower_topk});
}

}  // namespace cuvil::codegen
