// Weights the passes derived from others — a BatchNormalization folded into the weights and bias of the
// convolution or product before it — kept with their recipe and the original weights they came from, so that a
// model holding only its optimized graph (a loaded .cuv artifact, a C API session) still updates by the names
// the model was trained with (`conv.weight`, `bn.running_var`): an update of originals folds again (the pass's
// own arithmetic, ir/ops/batchnorm_fold.h: the same bits as a fresh compile with those weights) and becomes an
// update of the derived constants (weights.h), all off the request path.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "runtime/weights.h"

namespace cuvil {

// out_w, out_b = BatchNorm(scale, bias, mean, var, eps) folded into (w, b): names of the optimized graph's
// constants (out_*) and of original weights (the others; b "" when the producer had no bias).
struct FoldRecipe {
  std::string out_w, out_b;
  std::string w, b, scale, bias, mean, var;
  double eps = 0;
  bool by_column = false;  // W's output channels are its columns (a [K, N] product), else its rows
};

struct WeightRecipes {
  std::vector<std::pair<std::string, Tensor>> originals;  // current values of the weights the folds read
  std::vector<FoldRecipe> folds;

  const Tensor* original(const std::string& name) const;
  bool derived(const std::string& name) const;  // an out_w or out_b
};

// out_w and out_b of `f` from `originals`.
std::pair<Tensor, Tensor> evaluate(const FoldRecipe& f, const WeightRecipes& r);

// Checks that `r` fits `g` (every name known, shapes and dtypes agree, each fold gives an out_* of g's type);
// throws cuvil::Error naming the first problem.
void check_recipes(const Graph& g, const WeightRecipes& r);

// g's weights as a caller names them: the originals in place of the constants derived from them.
std::vector<WeightInfo> list_weights(const Graph& g, const WeightRecipes& r);

// `updates` by any name list_weights(g, r) gives, checked all at once (unknown, repeated or derived names,
// dtypes, shapes; with `strict`, every required weight given: one InputError, nothing changed), turned into
// updates of g's own constants: originals fold again into the derived constants they feed. `next`: r with the
// originals updated (the recipes of the version these updates make).
std::vector<std::pair<std::string, Tensor>> translate_updates(const Graph& g, const WeightRecipes& r,
                                                              const std::vector<std::pair<std::string, Tensor>>& updates,
                                                              bool strict, WeightRecipes* next);

// The folds `optimized` holds, found from `source` (the same model before the passes): each BatchNormalization
// of `source` reading a Conv, Gemm or MatMul with constant f32/f64 weights whose folded values are, bit for bit,
// the constants `optimized` names after the pass's names (`<w>_bn`, `<b or w>_bn_bias`). Folds not found so are
// left out (their original weights are then not updatable).
WeightRecipes derive_fold_recipes(const Graph& source, const Graph& optimized);

}  // namespace cuvil
