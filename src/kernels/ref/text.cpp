// Reference kernels of the text family: TfIdfVectorizer on integer token ids.
//
// Semantics (ONNX TfIdfVectorizer-9, as onnxruntime and ONNX's reference implementation run it): for every row,
// every start position i, every skip distance d in 1..max_skip_count+1 and every length n in
// [min_gram_length, max_gram_length], the tokens x[i], x[i+d], ..., x[i+(n-1)d] form an n-gram; each one found in
// the pool adds 1 to its output coordinate. 1-grams do not depend on d, so they are counted for d = 1 only.
// IDF/TFIDF then scale output coordinate j by weights[j] (IDF first clamps counts to 1).
#include <algorithm>
#include <unordered_map>

#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// The pool's n-grams as a prefix tree over token ids: walking a candidate token by token stops at the first
// prefix no pool n-gram has, so long rows with a large skip count cost little beyond the matches themselves.
class NgramTrie {
 public:
  NgramTrie() : nodes_(1) {}
  static constexpr int32_t kRoot = 0, kNone = -1;

  // A later duplicate of an n-gram takes over its output coordinate (as in onnxruntime).
  void insert(const int64_t* tokens, int64_t n, int64_t column) {
    int32_t node = kRoot;
    for (int64_t k = 0; k < n; ++k) {
      auto [it, added] = nodes_[size_t(node)].next.try_emplace(tokens[k], int32_t(nodes_.size()));
      int32_t child = it->second;  // read before push_back, which may move the map
      if (added) nodes_.emplace_back();
      node = child;
    }
    nodes_[size_t(node)].column = column;
  }
  int32_t child(int32_t node, int64_t token) const {
    const auto& next = nodes_[size_t(node)].next;
    auto it = next.find(token);
    return it == next.end() ? kNone : it->second;
  }
  // The output coordinate of the n-gram ending at `node`, or -1 when only a longer n-gram passes through it.
  int64_t column(int32_t node) const { return nodes_[size_t(node)].column; }

 private:
  struct Node {
    std::unordered_map<int64_t, int32_t> next;
    int64_t column = -1;
  };
  std::vector<Node> nodes_;
};

// Loads the n-grams whose length is in [min_n, max_n]. Inference has validated the layout; the checks here only
// keep the kernel from indexing out of bounds if it is run on an unvalidated node.
NgramTrie build_trie(const KernelContext& ctx, int64_t min_n, int64_t max_n) {
  const std::vector<int64_t>& pool = ctx.ints("pool_int64s");
  const std::vector<int64_t>& starts = ctx.ints("ngram_counts");
  const std::vector<int64_t>& indexes = ctx.ints("ngram_indexes");
  const int64_t pool_size = int64_t(pool.size());
  NgramTrie trie;
  size_t ngram_id = 0;  // position of the n-gram in the pool, counted over every length
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t n = int64_t(k) + 1;
    int64_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : pool_size;
    if (begin < 0 || end < begin || end > pool_size || (end - begin) % n != 0)
      ctx.error("invalid 'ngram_counts' for a pool of ", pool_size, " ids");
    for (int64_t p = begin; p < end; p += n, ++ngram_id) {
      if (ngram_id >= indexes.size()) ctx.error("'ngram_indexes' has fewer entries than the pool has n-grams");
      if (n >= min_n && n <= max_n) trie.insert(pool.data() + p, n, indexes[ngram_id]);
    }
  }
  return trie;
}

// Adds row `x` (length `len`)'s n-gram counts into `counts` (one entry per output coordinate).
void count_row(const NgramTrie& trie, const int64_t* x, int64_t len, int64_t min_n, int64_t max_n, int64_t skips,
               std::vector<int64_t>& counts) {
  // A distance of len or more cannot fit a 2-gram in the row, so larger skip counts change nothing.
  const int64_t max_dist = std::max<int64_t>(1, std::min(skips, len - 1) + 1);
  for (int64_t d = 1; d <= max_dist; ++d) {
    const int64_t shortest = d == 1 ? min_n : std::max<int64_t>(min_n, 2);
    if (shortest > max_n) break;
    for (int64_t i = 0; i < len; ++i) {
      int32_t node = NgramTrie::kRoot;
      int64_t pos = i;
      for (int64_t n = 1; n <= max_n && pos < len; ++n, pos += d) {
        node = trie.child(node, x[pos]);
        if (node == NgramTrie::kNone) break;
        int64_t col = trie.column(node);
        if (n >= shortest && col >= 0) ++counts[size_t(col)];
      }
    }
  }
}

}  // namespace

CUVIL_REF_KERNEL(TfIdfVectorizer) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.rank() != 1 && x.rank() != 2) ctx.error("input must have rank 1 or 2, got ", x.type_str());
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  const int64_t len = x.rank() == 2 ? x.dim(1) : x.dim(0);
  const int64_t out_size = y.rank() == 0 ? 0 : y.dim(y.rank() - 1);
  CUVIL_ASSERT(y.dtype() == DType::f32 && y.numel() == rows * out_size, ctx.node().describe(),
               ": output is ", y.type_str(), " for input ", x.type_str());

  // Token ids widened to int64, the pool's type, once for the whole input.
  std::vector<int64_t> tokens(static_cast<size_t>(x.numel()));
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      const T* p = x.data<T>();
      for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = int64_t(p[k]);
    } else {
      ctx.error("input must be i32 or i64 token ids, got ", dtype_name(x.dtype()));
    }
  });

  const int64_t min_n = ctx.i("min_gram_length"), max_n = ctx.i("max_gram_length");
  const int64_t skips = ctx.i("max_skip_count");
  const NgramTrie trie = build_trie(ctx, min_n, max_n);

  const std::string& mode = ctx.s("mode");
  std::vector<float> weights(static_cast<size_t>(out_size), 1.0f);
  const std::vector<double>& w = ctx.floats("weights");
  if (mode != "TF" && !w.empty()) {
    if (int64_t(w.size()) < out_size) ctx.error("'weights' has fewer entries than the output has coordinates");
    for (size_t j = 0; j < weights.size(); ++j) weights[j] = float(w[j]);
  }

  float* out = y.data<float>();
  std::vector<int64_t> counts(static_cast<size_t>(out_size));
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    count_row(trie, tokens.data() + r * len, len, min_n, max_n, skips, counts);
    float* out_row = out + r * out_size;  // may be an arena view: every element is written
    for (int64_t j = 0; j < out_size; ++j) {
      int64_t cnt = counts[size_t(j)];
      if (mode == "TF") out_row[j] = float(cnt);
      else if (mode == "IDF") out_row[j] = cnt > 0 ? weights[size_t(j)] : 0.0f;  // a select: absent stays 0
      else out_row[j] = float(cnt) * weights[size_t(j)];
    }
  }
}

}  // namespace cuvil
