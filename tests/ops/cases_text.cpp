// Cases of the text family (src/ir/ops/text.cpp): TfIdfVectorizer over unigrams and bigrams with skips, each
// weighting mode, one sequence and a batch.
#include "harness.h"

namespace cuvil::optest {

void add_text_cases(Cases& cs) {
  // The ONNX operator documentation's pool: 4 unigrams' slots are bigrams (5,6) (7,8) (6,7) after [2 3 5 4].
  const Ints pool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
  Tensor tokens = tensor<int64_t>({1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8}, {2, 6});
  for (const char* mode : {"TF", "IDF", "TFIDF"})
    for (int64_t skip : {0, 2}) {
      OpCase& c = cs.add(OpKind::TfIdfVectorizer, std::string(mode) + ", skip " + std::to_string(skip))
                      .in(val(tokens))
                      .attr("mode", mode)
                      .attr("min_gram_length", int64_t(1))
                      .attr("max_gram_length", int64_t(2))
                      .attr("max_skip_count", skip)
                      .attr("ngram_counts", Ints{0, 4})
                      .attr("ngram_indexes", Ints{0, 1, 2, 3, 4, 5, 6})
                      .attr("pool_int64s", pool)
                      .exact();
      if (std::string(mode) != "TF") c.attr("weights", std::vector<double>{0.5, 1, 1.5, 2, 0.25, 3, 1});
    }
  cs.add(OpKind::TfIdfVectorizer, "one sequence, i32")
      .in(val(vec<int32_t>({2, 3, 5, 4, 5, 6, 7, 8, 6, 7})))
      .attr("mode", "TF")
      .attr("min_gram_length", int64_t(2))
      .attr("max_gram_length", int64_t(2))
      .attr("max_skip_count", int64_t(0))
      .attr("ngram_counts", Ints{0, 4})
      .attr("ngram_indexes", Ints{0, 1, 2, 3, 4, 5, 6})
      .attr("pool_int64s", pool)
      .exact();
}

}  // namespace cuvil::optest
