// split-sliced-matmul: a matrix product with constant weights whose output is read only by Slices of its columns
// (the last axis, step 1) becomes one product per Slice, over those columns of the weights and the bias:
//   Slice(FusedMatMul(A, B, bias), s:e, axis -1)  =  FusedMatMul(A, B[:, s:e], bias[s:e])
// Every output column depends only on its own column of B and of the bias (the activation is element-wise), so
// each smaller product computes exactly the values its Slice kept, and the copies the Slices made are gone.
// BERT's fused QKV projection (one [768, 2304] product read by three Slices of 768 columns) becomes three
// [768, 768] products writing Q, K and V where the attention reads them.
// A Split of the columns (GPT-2's c_attn: [768, 2304] product, Reshape to [1, S, 2304], Split into Q, K, V) is
// taken the same way, through a Reshape that keeps the last dim: each part is a product over its columns,
// reshaped to the part's shape.
// Taken: MatMul and FusedMatMul with B a constant matrix (rank 2; transB selects B's rows instead), a bias that is
// a constant of N values or of one, no residual input, and Slices with constant bounds that take each column at
// most once (overlapping ranges would compute columns twice). The old weights are left to dead-code-elimination.
#include <algorithm>
#include <cstring>
#include <optional>

#include "ir/op_schema.h"
#include "ir/ops/tensor_helpers.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// A one-element integer constant, exactly (rewrite::scalar_constant's double would lose Slice's INT64_MAX ends).
std::optional<int64_t> int_constant(const Value* v) {
  if (!v || !v->is_constant() || v->constant().numel() != 1) return std::nullopt;
  const Tensor& t = v->constant();
  if (t.dtype() == DType::i64) return t.data<int64_t>()[0];
  if (t.dtype() == DType::i32) return t.data<int32_t>()[0];
  return std::nullopt;
}

// The columns [begin, begin + len) a Slice of y keeps, when it slices only y's last axis with step 1.
std::optional<std::pair<int64_t, int64_t>> column_range(const Node& s, const Value* y, int64_t n) {
  if (s.op() != OpKind::Slice || s.input(0) != y) return std::nullopt;
  for (size_t i = 1; i < s.num_inputs(); ++i)
    if (s.input(i) == y) return std::nullopt;  // y also as a bound: not a plain column slice
  int64_t rank = int64_t(y->shape().rank());
  std::optional<int64_t> start = int_constant(s.input(1)), end = int_constant(s.input(2));
  // absent axes: the first axis; absent steps: 1
  std::optional<int64_t> axis = s.input(3) ? int_constant(s.input(3)) : std::optional<int64_t>(0);
  std::optional<int64_t> step = s.input(4) ? int_constant(s.input(4)) : std::optional<int64_t>(1);
  if (!start || !end || !axis || !step || *step != 1) return std::nullopt;
  if (*axis != -1 && *axis != rank - 1) return std::nullopt;
  tensor_ops::SliceRange r = tensor_ops::slice_range(n, *start, *end, 1);
  if (r.len <= 0) return std::nullopt;
  return std::pair{r.start, r.len};
}

// Columns [c0, c0 + len) of t read as a row-major [rows, t.numel() / rows] matrix, as a tensor of dims `dims`.
Tensor column_block(const Tensor& t, int64_t rows, int64_t c0, int64_t len, std::vector<int64_t> dims) {
  size_t es = dtype_size(t.dtype());
  int64_t cols = t.numel() / rows;
  Tensor r = Tensor::zeros(t.dtype(), std::move(dims));
  auto* dst = static_cast<char*>(r.raw());
  auto* src = static_cast<const char*>(t.raw());
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(dst + size_t(i * len) * es, src + size_t(i * cols + c0) * es, size_t(len) * es);
  return r;
}

// Whether two of the column ranges [begin, begin + len) share a column.
bool overlapping(std::vector<std::pair<int64_t, int64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first) return true;
  return false;
}

// When y is read only by a Split of its last axis, possibly through a Reshape keeping the last dim (read only by
// the Split): that Split, with the Reshape (or null), and the column range of each of its outputs.
struct ColumnSplit {
  Node* split = nullptr;
  Node* reshape = nullptr;
  std::vector<std::pair<int64_t, int64_t>> ranges;
};

std::optional<ColumnSplit> column_split(const rewrite::UseMap& uses, Value* y, int64_t n) {
  ColumnSplit cs;
  Node* reader = uses.sole_user(y);
  if (reader && reader->op() == OpKind::Reshape && reader->input(0) == y) {
    const Value* r = reader->output(0);
    if (uses.pinned(r) || !r->shape().rank_known() || !r->shape().is_static() || r->shape().rank() < 1 ||
        r->shape()[r->shape().rank() - 1].value() != n)
      return std::nullopt;
    cs.reshape = reader;
    reader = uses.sole_user(r);
  }
  Value* x = cs.reshape ? cs.reshape->output(0) : y;
  if (!reader || reader->op() != OpKind::Split || reader->input(0) != x) return std::nullopt;
  for (size_t i = 1; i < reader->num_inputs(); ++i)
    if (reader->input(i) == x) return std::nullopt;
  int64_t rank = int64_t(x->shape().rank()), axis = AttrReader(*reader).i("axis");
  if (axis != -1 && axis != rank - 1) return std::nullopt;
  int64_t c0 = 0;
  for (const Value* part : reader->outputs()) {
    if (!part || !part->shape().rank_known() || !part->shape().is_static() || int64_t(part->shape().rank()) != rank)
      return std::nullopt;
    int64_t len = part->shape()[size_t(rank - 1)].value();
    if (len <= 0) return std::nullopt;
    cs.ranges.push_back({c0, len});
    c0 += len;
  }
  if (c0 != n) return std::nullopt;
  cs.split = reader;
  return cs;
}

bool split(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* mm = g.nodes()[i].get();
    if (mm->op() != OpKind::MatMul && mm->op() != OpKind::FusedMatMul) continue;
    Value* y = mm->output(0);
    Value* b = mm->input(1);
    bool fused = mm->op() == OpKind::FusedMatMul;
    if (uses.pinned(y) || !b->is_constant() || b->constant().rank() != 2) continue;
    if (fused && mm->input(3)) continue;  // a residual: would need slicing at run time
    if (!y->shape().rank_known() || y->shape().rank() < 2) continue;
    const Dim& nd = y->shape()[y->shape().rank() - 1];
    if (!nd.is_const()) continue;
    int64_t n = nd.value();
    Value* bias = fused ? mm->input(2) : nullptr;
    if (bias && (!bias->is_constant() || (bias->constant().numel() != n && bias->constant().numel() != 1) ||
                 (bias->constant().numel() == n && bias->constant().rank() != 1)))
      continue;
    std::vector<Node*> readers = uses.users(y);
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (Node* s : readers) {
      auto r = column_range(*s, y, n);
      if (!r) break;
      ranges.push_back(*r);
    }
    std::optional<ColumnSplit> cs;
    if (readers.empty() || ranges.size() != readers.size()) {
      cs = column_split(uses, y, n);
      if (!cs) continue;
      ranges = cs->ranges;
    }
    if (overlapping(ranges)) continue;  // their shared columns would be computed twice
    bool trans_b = fused && AttrReader(*mm).i("transB") != 0;
    size_t parts = cs ? cs->split->num_outputs() : readers.size();
    const Node* after = cs ? cs->split : nullptr;  // the parts of a Split go after it, in order
    for (size_t k = 0; k < parts; ++k) {
      auto [c0, len] = ranges[k];
      std::string base = g.unique_name(b->name() + "_cols" + std::to_string(c0));
      // Output columns [c0, c0 + len): of B [K, N] those columns; of B stored [N, K] (transB) those rows.
      const Tensor& w = b->constant();
      int64_t depth = trans_b ? w.dim(1) : w.dim(0);  // K
      Value* part = g.add_constant(base, trans_b ? column_block(w, 1, c0 * depth, len * depth, {len, depth})
                                                 : column_block(w, depth, c0, len, {depth, len}));
      std::vector<Value*> ins{mm->input(0), part};
      if (bias)
        ins.push_back(bias->constant().numel() == 1
                          ? bias
                          : g.add_constant(g.unique_name(bias->name() + "_cols" + std::to_string(c0)),
                                           column_block(bias->constant(), 1, c0, len, {len})));
      if (!cs) {
        rewrite::replace_result(g, readers[k], readers[k]->output(0), mm->op(), ins, mm->attrs());
        dead.push_back(readers[k]);
        continue;
      }
      Value* part_y = cs->split->output(k);
      if (!cs->reshape) {
        after = rewrite::replace_result(g, after, part_y, mm->op(), ins, mm->attrs());
        continue;
      }
      // The part's product in y's shape with len columns, then reshaped to the Split output's shape.
      std::vector<Dim> dims = y->shape().dims();
      dims.back() = Dim(len);
      Node* p = g.insert_node(rewrite::node_index(g, after) + 1, mm->op(), ins,
                              {g.unique_name(y->name() + "_cols" + std::to_string(c0))}, mm->attrs(), mm->loc());
      p->output(0)->set_type({y->dtype(), Shape(dims)});
      std::vector<int64_t> to;
      for (const Dim& d : part_y->shape().dims()) to.push_back(d.value());
      Tensor shape = Tensor::zeros(DType::i64, {int64_t(to.size())});
      std::copy(to.begin(), to.end(), shape.data<int64_t>());
      Value* shape_v = g.add_constant(g.unique_name(part_y->name() + "_shape"), shape);
      after = rewrite::replace_result(g, p, part_y, OpKind::Reshape, {p->output(0), shape_v}, {});
    }
    if (cs) {
      dead.push_back(cs->split);
      if (cs->reshape) dead.push_back(cs->reshape);
    }
    dead.push_back(mm);
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool SplitSlicedMatMulPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, split); }

}  // namespace cuvil
