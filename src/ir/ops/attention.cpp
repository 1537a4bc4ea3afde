// Attention(Q, K, V, Mask?) -> Y: scaled dot-product attention, the node the fuse-attention pass forms from
// MatMul - scale - mask Add - Softmax - MatMul. With q, k, v the inputs seen through their permutations
// (Transpose semantics: dim i of q is dim perm_q[i] of Q; an empty perm is the identity):
//
//   q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv]     (the same batch dims "..." on all three)
//   y = Softmax(scale * q k^T + Mask, axis = -1) v      y [..., Sq, Dv]; Mask broadcasts to [..., Sq, Sk]
//   Y = Transpose(y, perm_y)
//
// A bool Mask selects instead of adding: Where(Mask, scale * q k^T, mask_fill), True keeping the score (what
// PyTorch's SDPA decomposition and Hugging Face's masks produce; mask_fill is their -inf or dtype minimum).
//
// nan_probs_zero = 1: probabilities that are NaN become 0 (Where(IsNaN(P), 0, P): PyTorch's safe softmax, which
// its ONNX exports of SDPA write out). A row's probabilities are NaN all together or not at all (a NaN score, a
// row without a finite one, or +inf), so such a row of y is 0.
//
// The permutations are how the node absorbs the transposes around attention (heads split out of [S, H, D] and
// merged back): a kernel reads Q, K, V and writes Y through strides instead of moving them.
#include "ir/ops/attention.h"

#include "ir/ops/infer_util.h"

#include <limits>

namespace cuvil {

namespace {

// attention_perm, checked against rank r.
std::vector<int64_t> read_perm(const InferContext& c, const char* name, size_t r) {
  std::vector<int64_t> perm = attention_perm(c, name, r);
  if (perm.size() != r) c.error(name, " has ", perm.size(), " entries for rank ", r);
  std::vector<bool> seen(r, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(r) || seen[size_t(p)]) c.error(name, " is not a permutation of 0..", r - 1);
    seen[size_t(p)] = true;
  }
  return perm;
}

Shape permute(const Shape& s, const std::vector<int64_t>& perm) {
  std::vector<Dim> d;
  for (int64_t p : perm) d.push_back(s[size_t(p)]);
  return Shape(d);
}

void expect_equal(const InferContext& c, const Dim& a, const Dim& b, const char* what) {
  if (a.is_const() && b.is_const() && a.value() != b.value()) c.error(what, ": ", a.value(), " vs ", b.value());
}

}  // namespace

std::vector<int64_t> attention_perm(const AttrReader& node, const char* name, size_t rank) {
  std::vector<int64_t> p = node.ints(name);
  if (p.empty())
    for (size_t d = 0; d < rank; ++d) p.push_back(int64_t(d));
  return p;
}

CUVIL_DEFINE_OP(Attention) {
  s.inputs(3, 4).outputs(1, 1);
  s.attr("scale", AttrKind::Float, 1.0);
  s.attr("mask_fill", AttrKind::Float, -std::numeric_limits<double>::infinity());  // (a bool Mask's)
  s.attr("nan_probs_zero", AttrKind::Int, int64_t(0));
  for (const char* p : {"perm_q", "perm_k", "perm_v", "perm_y"}) s.attr(p, AttrKind::Ints, std::vector<int64_t>{});
  s.infer_with([](InferContext& c) {
    infer::expect_dtype(c, 0, {DType::f16, DType::bf16, DType::f32, DType::f64});
    for (size_t i = 1; i < c.num_inputs(); ++i)
      if (c.has_input(i) && !(i == 3 && c.input_dtype(i) == DType::boolean)) infer::expect_same_dtype(c, 0, i);
    size_t r = c.input_rank(0);
    if (r < 2) c.error("Q must have rank >= 2, got ", c.input_shape(0).str());
    for (size_t i : {1, 2})
      if (c.input_rank(i) != r) c.error("Q, K and V must have the same rank, got ", c.input_shape(0).str(), ", ",
                                        c.input_shape(1).str(), " and ", c.input_shape(2).str());
    Shape q = permute(c.input_shape(0), read_perm(c, "perm_q", r));
    Shape k = permute(c.input_shape(1), read_perm(c, "perm_k", r));
    Shape v = permute(c.input_shape(2), read_perm(c, "perm_v", r));
    for (size_t d = 0; d + 2 < r; ++d) {
      expect_equal(c, q[d], k[d], "q and k have different batch dims");
      expect_equal(c, q[d], v[d], "q and v have different batch dims");
    }
    expect_equal(c, q[r - 1], k[r - 1], "q and k have different head sizes");
    expect_equal(c, k[r - 2], v[r - 2], "k and v have different sequence lengths");
    std::vector<Dim> scores(q.dims().begin(), q.dims().end() - 1);
    scores.push_back(k[r - 2]);
    if (c.has_input(3)) {
      const Shape& m = c.input_shape(3);
      if (m.rank() > r) c.error("Mask ", m.str(), " has a higher rank than the scores [..., Sq, Sk] (", r, ")");
      for (size_t d = 0; d < m.rank(); ++d) {
        const Dim& md = m[d];
        const Dim& sd = scores[r - m.rank() + d];
        if (md.is_const() && md.value() != 1) expect_equal(c, md, sd, "Mask does not broadcast to the scores");
      }
    }
    std::vector<Dim> y(q.dims().begin(), q.dims().end() - 1);
    y.push_back(v[r - 1]);
    c.set_output(0, c.input_dtype(0), permute(Shape(y), read_perm(c, "perm_y", r)));
  });
}

}  // namespace cuvil
