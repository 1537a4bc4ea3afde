// Op definitions (arity, attributes, shape inference) of the text family: TfIdfVectorizer.
//
// TfIdfVectorizer works on integer token ids: the importer turns string tokens and `pool_strings` into ids
// (src/frontend/onnx/convert_text.cpp), and a `pool_strings` attribute is rejected here. Every attribute is static, so inference checks the
// whole n-gram pool layout once, at compile time; the kernel relies on that (and re-checks only what it indexes).
#include <algorithm>
#include <limits>

#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

// Validates the attributes and returns the output's last dim, max(ngram_indexes) + 1.
int64_t tfidf_output_size(const InferContext& c) {
  const std::string& mode = c.s("mode");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    c.error("attribute 'mode' must be \"TF\", \"IDF\" or \"TFIDF\", got \"", mode, "\"");
  int64_t min_n = c.i("min_gram_length"), max_n = c.i("max_gram_length"), skips = c.i("max_skip_count");
  if (min_n < 1) c.error("attribute 'min_gram_length' must be >= 1, got ", min_n);
  if (max_n < min_n)
    c.error("attribute 'max_gram_length' (", max_n, ") must be >= 'min_gram_length' (", min_n, ")");
  if (skips < 0) c.error("attribute 'max_skip_count' must be >= 0, got ", skips);

  if (!c.strings("pool_strings").empty())
    c.error("attribute 'pool_strings' is not supported: only integer token ids (pool_int64s) are");
  if (!c.has("pool_int64s")) c.error("attribute 'pool_int64s' is required (string pools are not supported)");
  const int64_t pool_size = int64_t(c.ints("pool_int64s").size());

  // ngram_counts[k] is where the (k+1)-grams start in the pool; the last level runs to the pool's end.
  const std::vector<int64_t>& starts = c.ints("ngram_counts");
  if (starts.empty() && pool_size > 0)
    c.error("attribute 'ngram_counts' is empty, but 'pool_int64s' holds ", pool_size, " ids");
  if (!starts.empty() && starts[0] != 0)
    c.error("attribute 'ngram_counts' must start at 0 (where the 1-grams begin), got ", starts[0]);
  int64_t num_ngrams = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : pool_size;
    if (begin < 0 || begin > pool_size)
      c.error("attribute 'ngram_counts'[", k, "] = ", begin, " is outside the pool of ", pool_size, " ids");
    if (end < begin) c.error("attribute 'ngram_counts' must be non-decreasing, got ", begin, " then ", end);
    int64_t n = int64_t(k) + 1;
    if ((end - begin) % n != 0)
      c.error("the ", n, "-grams of 'pool_int64s' (ids ", begin, "..", end, ") are ", end - begin,
              " ids, not a whole number of ", n, "-grams");
    num_ngrams += (end - begin) / n;
  }

  const std::vector<int64_t>& indexes = c.ints("ngram_indexes");
  if (indexes.empty()) c.error("attribute 'ngram_indexes' must not be empty");
  if (int64_t(indexes.size()) < num_ngrams)
    c.error("attribute 'ngram_indexes' has ", indexes.size(), " entries, but the pool holds ", num_ngrams,
            " n-grams (one output coordinate is needed for each)");
  int64_t max_index = 0;
  for (int64_t v : indexes) {
    if (v < 0 || v == std::numeric_limits<int64_t>::max())
      c.error("attribute 'ngram_indexes' holds an invalid output coordinate ", v);
    max_index = std::max(max_index, v);
  }
  const int64_t out_size = max_index + 1;

  // Like onnxruntime and ONNX's reference implementation, weights[j] scales output coordinate j; TF ignores them.
  const std::vector<double>& weights = c.floats("weights");
  if (mode != "TF" && !weights.empty() && int64_t(weights.size()) < out_size)
    c.error("attribute 'weights' has ", weights.size(), " entries, but the output has ", out_size,
            " coordinates (max(ngram_indexes) + 1)");
  return out_size;
}

}  // namespace

CUVIL_DEFINE_OP(TfIdfVectorizer) {
  s.inputs(1, 1)
      .required_attr("mode", AttrKind::String)
      .required_attr("min_gram_length", AttrKind::Int)
      .required_attr("max_gram_length", AttrKind::Int)
      .required_attr("max_skip_count", AttrKind::Int)
      .required_attr("ngram_counts", AttrKind::Ints)
      .required_attr("ngram_indexes", AttrKind::Ints)
      .attr("pool_int64s", AttrKind::Ints, std::vector<int64_t>{})
      .attr("pool_strings", AttrKind::Strings, std::vector<std::string>{})
      .attr("weights", AttrKind::Floats, std::vector<double>{})
      .infer_with([](InferContext& c) {
        infer::expect_dtype(c, 0, {DType::i32, DType::i64});
        int64_t out_size = tfidf_output_size(c);
        const Shape& in = c.input_shape(0);
        if (!in.rank_known()) {
          c.set_output(0, DType::f32, Shape::unknown_rank());
          return;
        }
        if (in.rank() == 1) {
          c.set_output(0, DType::f32, Shape(std::vector<Dim>{Dim(out_size)}));
        } else if (in.rank() == 2) {
          c.set_output(0, DType::f32, Shape(std::vector<Dim>{in[0], Dim(out_size)}));
        } else {
          c.error("input must have rank 1 ([C]) or 2 ([N, C]), got shape ", in.str());
        }
      });
}

}  // namespace cuvil
