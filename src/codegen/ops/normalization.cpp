// Lowering records: the Softmax family (Softmax with 1/sum per row, LogSoftmax, Hardmax's one-hot), the
// normalizations (LayerNormalization with two passes, InstanceNormalization as a row kernel over the spatial dims,
// inference BatchNormalization element-wise, MeanVarianceNormalization over one block of axes) and LRN, whose sum
// of squares over its window is `size` loads shifted along the channels. The normalizations' [C] parameters are
// views read along the channel dim.
#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

std::optional<ReducedBlock> softmax_block(const Node& n, int64_t rank) {
  return axis_block(n, rank, ReducedBlock::Kind::reduce);
}
bool softmax_supports(const Node& n, std::string* why) {
  if (!floats_only(n, why)) return false;
  return reduced_block(n).has_value() || refuse(why, "the axis is not known");
}

template <bool log>
CUVIL_LOWERING(lower_softmax) {
  int x = in[0];
  Scalar tx = L.type(x);
  int m = L.add(Op::row_max_num, tx, x);  // a NaN x makes d, the sum and so every output NaN
  int d = L.bin(Op::sub, x, m);
  int e = L.un(Op::exp, d);
  int s = L.add(Op::row_sum, tx, e);
  // 1 / sum once per row, then a multiply per element (within an ulp of dividing)
  out[0] = !log ? L.bin(Op::mul, e, L.bin(Op::div, L.cst(1), s)) : L.bin(Op::sub, d, L.un(Op::log, s));
  return true;
}

CUVIL_LOWERING(lower_hardmax) {  // one-hot at the first largest element (NaN counts as largest)
  int best = L.add(Op::row_argmax, Scalar::i64, in[0]);
  out[0] = L.sel(L.cmp(Op::eq, L.add(Op::row_index, Scalar::i64), best), L.cst(1), L.cst(0));
  return true;
}

std::optional<ReducedBlock> layer_norm_block(const Node& n, int64_t rank) {
  int64_t axis = AttrReader(n).i("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  return ReducedBlock{int(rank - axis), 0};
}
bool layer_norm_supports(const Node& n, std::string* why) {
  if (!floats_only(n, why)) return false;
  return reduced_block(n).has_value() || refuse(why, "the normalized axes are not known");
}
// The optional Mean and InvStdDev outputs: one value per row.
OutputUse layer_norm_outputs(const Node&, size_t o) { return {o > 0 ? OutputRole::per_row : OutputRole::element}; }

CUVIL_LOWERING(lower_layer_norm) {
  AttrReader at(n);
  auto [mean, d, var] = L.moments(in[0]);
  int inv = L.bin(Op::div, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, var, L.cst(at.f("epsilon")))));
  int y = L.bin(Op::mul, L.bin(Op::mul, d, inv), in[1]);
  if (n.input(2)) y = L.bin(Op::add, y, in[2]);
  out[0] = y;
  if (out.size() > 1) out[1] = mean;
  if (out.size() > 2) out[2] = inv;
  return true;
}

// The per-channel parameters of InstanceNormalization (scale, B) and BatchNormalization (scale, B, mean, var):
// views along dim 1.
template <size_t first, size_t last>
InputUse channel_parameters(const Node&, size_t i) {
  return i >= first && i <= last ? InputUse{InputRole::along_axis, 1} : InputUse{};
}

std::optional<ReducedBlock> instance_norm_block(const Node&, int64_t rank) {  // over the spatial dims, after N, C
  if (rank < 3) return std::nullopt;
  return ReducedBlock{int(rank - 2), 0};
}
bool instance_norm_supports(const Node& n, std::string* why) {
  if (!floats_only(n, why)) return false;
  return input_rank(n, 0) >= 3 || refuse(why, "input rank below 3 (nothing to normalize over)");
}
CUVIL_LOWERING(lower_instance_norm) {  // in[1], in[2]: the channel views of scale and B
  AttrReader at(n);
  auto [mean, d, var] = L.moments(in[0]);
  int inv = L.bin(Op::div, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, var, L.cst(at.f("epsilon")))));
  out[0] = L.bin(Op::add, L.bin(Op::mul, L.bin(Op::mul, d, inv), in[1]), in[2]);
  return true;
}

bool batch_norm_supports(const Node& n, std::string* why) {
  if (!floats_only(n, why)) return false;
  if (AttrReader(n).i("training_mode") != 0 || n.num_outputs() != 1)
    return refuse(why, "training mode (batch statistics) is not generated");
  return input_rank(n, 0) >= 2 || refuse(why, "rank-1 input");
}
CUVIL_LOWERING(lower_batch_norm) {  // (x - mean) / sqrt(var + eps) * scale + B, parameters per channel
  AttrReader at(n);
  int inv = L.bin(Op::div, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, in[4], L.cst(at.f("epsilon")))));
  out[0] = L.bin(Op::add, L.bin(Op::mul, L.bin(Op::mul, L.bin(Op::sub, in[0], in[3]), inv), in[1]), in[2]);
  return true;
}

std::optional<std::vector<int64_t>> mvn_axes(const Node& n, int64_t rank) {
  return normalized_axes(AttrReader(n).ints("axes"), rank);
}
std::optional<ReducedBlock> mvn_block(const Node& n, int64_t rank) {
  auto axes = reduced_axes(n);
  return axes ? block_of_sized(*axes, n, rank) : std::nullopt;
}
bool mvn_supports(const Node& n, std::string* why) {
  if (!floats_only(n, why)) return false;
  return reduced_block(n).has_value() || refuse(why, "the axes (less those of size 1) are not one block");
}
CUVIL_LOWERING(lower_mvn) {  // (x - mean) / (sqrt(var) + 1e-9), as ONNX's function body
  auto [mean, d, var] = L.moments(in[0]);
  out[0] = L.bin(Op::div, d, L.bin(Op::add, L.un(Op::sqrt, var), L.cst(1e-9)));
  return true;
}

std::optional<ReducedBlock> lrn_block(const Node& n, int64_t rank) {  // a window over the channels (dim 1)
  if (rank < 2) return std::nullopt;
  if (AttrReader(n).i("size") == 1 || n.input(0)->shape()[1] == Dim(1)) return ReducedBlock{};  // element-wise
  return ReducedBlock{1, int(rank - 2), ReducedBlock::Kind::window};
}
bool lrn_supports(const Node& n, std::string* why) {
  if (!floats_only(n, why)) return false;
  if (AttrReader(n).i("size") <= 0) return refuse(why, "size is not positive");  // the reference reports it
  return reduced_block(n).has_value() || refuse(why, "input rank below 2");
}
InputUse lrn_inputs(const Node&, size_t i) { return {i == 0 ? InputRole::window : InputRole::element}; }

// x / (bias + alpha / size * sum of squares)^beta, the sum over the channels [c - floor((size - 1) / 2),
// c + ceil((size - 1) / 2)] within range, in the reference's order: loads shifted along the channels (0 past either
// end) of the input, which must be read from memory (InputRole::window).
CUVIL_LOWERING(lower_lrn) {
  AttrReader at(n);
  int x = in[0];
  Scalar tx = L.type(x);
  const Expr xe = L.k.exprs[size_t(x)];  // (a copy: adding expressions below moves the vector)
  if (xe.op != Op::load || xe.imm != 0) return refuse(why, n.describe(), ": its input is computed in the kernel");
  int64_t size = at.i("size"), before = (size - 1) / 2;
  // A window of one channel (size 1, or one channel known at compile time: an element-wise kernel) holds only the
  // element itself. A kernel over one channel that only run time shows runs op by op.
  const Operand xo = L.k.operands[size_t(xe.operand)];
  bool one = reduced_block(n)->count == 0;
  if (!one && (L.k.columns ? xo.column_broadcast : xo.inner == Access::broadcast))
    return refuse(why, n.describe(), ": a window over one channel");
  int sq = -1;
  for (int64_t k = one ? 0 : -before; k < (one ? 1 : size - before); ++k) {
    int v = L.load(xe.operand, tx, k);
    int term = L.bin(Op::mul, v, v);
    sq = sq < 0 ? term : L.bin(Op::add, sq, term);
  }
  int base = L.bin(Op::add, L.cst(at.f("bias"), tx), L.bin(Op::mul, L.cst(double(at.f("alpha")) / double(size), tx), sq));
  out[0] = L.bin(Op::div, x, L.bin(Op::pow, base, L.cst(at.f("beta"), tx)));
  return true;
}

}  // namespace

void add_normalization_lowerings(LoweringTable& t) {
  t.add(OpKind::Softmax, {.supports = softmax_supports, .f64 = true, .block = softmax_block, .compile_weight = 8,
                          .lower = lower_softmax<false>});
  t.add(OpKind::LogSoftmax, {.supports = softmax_supports, .f64 = true, .block = softmax_block,
                             .compile_weight = 8, .lower = lower_softmax<true>});
  t.add(OpKind::Hardmax, {.supports = softmax_supports, .f64 = true, .block = softmax_block, .lower = lower_hardmax});
  t.add(OpKind::LayerNormalization, {.supports = layer_norm_supports, .f64 = true, .block = layer_norm_block,
                                     .output = layer_norm_outputs, .lower = lower_layer_norm});
  t.add(OpKind::InstanceNormalization, {.supports = instance_norm_supports, .f64 = true, .block = instance_norm_block,
                                        .input = channel_parameters<1, 2>, .lower = lower_instance_norm});
  t.add(OpKind::BatchNormalization,
        {.supports = batch_norm_supports, .input = channel_parameters<1, 4>, .lower = lower_batch_norm});
  t.add(OpKind::MeanVarianceNormalization,
        {.supports = mvn_supports, .f64 = true, .block = mvn_block, .axes = mvn_axes, .lower = lower_mvn});
  t.add(OpKind::LRN, {.supports = lrn_supports, .f64 = true, .block = lrn_block, .input = lrn_inputs,
                      .compile_weight = 8, .lower = lower_lrn});
}

}  // namespace cuvil::codegen
