// TreeEnsemble's evaluation (the op's semantics: src/ir/ops/trees.cpp), shared by the reference kernel and the
// threaded CPU kernel: the node attributes packed into one array of small records (a walk touches one cache line
// per level), checked once when packed, then rows walked through every tree.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"
#include "support/half.h"

namespace cuvil {

// The type an input element converts through on its way to double (f16_t converts to float).
template <class T>
using float_or_double_t = std::conditional_t<std::is_same_v<T, f16_t>, float, T>;

struct TreeEnsembleModel {
  struct Split {
    double threshold;
    int32_t feature;
    int32_t on_true, on_false;  // next node (>= 0) or leaf -(l + 1)
    uint8_t mode;               // 0 <=, 1 <, 2 >=, 3 >, 4 ==, 5 !=, 6 member of a set
    uint8_t missing_true;       // NaN takes the true branch
  };
  enum Aggregate { kSum, kAverage, kMin, kMax };

  std::vector<Split> splits;
  std::vector<int32_t> roots;
  std::vector<int64_t> leaf_start, member_start;
  std::vector<int32_t> weight_target;
  std::vector<double> weight_value, member_values, base;
  int64_t n_targets = 0, max_feature = -1;
  Aggregate aggregate = kSum;

  // Packs node `n`'s attributes; an empty string, or why they do not form a valid ensemble (ir/ops/trees.h's
  // tree_ensemble_problem, which inference runs too: this guards kernels of graphs that skipped it).
  static std::string pack(const ::cuvil::Node& node, TreeEnsembleModel& out);

  // Rows [begin, end) of x [rows, features] into y [rows, n_targets] (TOut: float or double), comparing and
  // summing in double; MIN and MAX start from TOut's largest / lowest value.
  template <class TIn, class TOut>
  void predict(const TIn* x, int64_t features, int64_t begin, int64_t end, TOut* y) const;

 private:
  template <class T>
  int64_t leaf_of(const T* row, int32_t ref) const {
    while (ref >= 0) {
      const Split& n = splits[size_t(ref)];
      const double v = double(static_cast<float_or_double_t<T>>(row[n.feature]));
      bool go;
      switch (n.mode) {  // (IEEE comparisons: a NaN fails all but !=)
        case 0: go = v <= n.threshold; break;
        case 1: go = v < n.threshold; break;
        case 2: go = v >= n.threshold; break;
        case 3: go = v > n.threshold; break;
        case 4: go = v == n.threshold; break;
        case 5: go = v != n.threshold; break;
        default: {
          go = false;
          const size_t k = size_t(&n - splits.data());
          for (int64_t m = member_start[k]; m < member_start[k + 1] && !go; ++m) go = v == member_values[size_t(m)];
        }
      }
      go |= n.missing_true && std::isnan(v);
      ref = go ? n.on_true : n.on_false;
    }
    return -(int64_t(ref) + 1);
  }
};

template <class TIn, class TOut>
void TreeEnsembleModel::predict(const TIn* x, int64_t features, int64_t begin, int64_t end, TOut* y) const {
  const size_t targets = size_t(n_targets);
  std::vector<double> acc(targets);
  const double start = aggregate == kMin   ? double(std::numeric_limits<TOut>::max())
                       : aggregate == kMax ? double(std::numeric_limits<TOut>::lowest())
                                           : 0.0;
  for (int64_t r = begin; r < end; ++r) {
    const TIn* row = x + r * features;
    std::fill(acc.begin(), acc.end(), start);
    for (int32_t root : roots) {
      const int64_t leaf = leaf_of(row, root);
      for (int64_t e = leaf_start[size_t(leaf)]; e < leaf_start[size_t(leaf) + 1]; ++e) {
        double& a = acc[size_t(weight_target[size_t(e)])];
        const double w = weight_value[size_t(e)];
        a = aggregate == kMin ? std::min(a, w) : aggregate == kMax ? std::max(a, w) : a + w;
      }
    }
    TOut* out = y + r * n_targets;
    for (size_t t = 0; t < targets; ++t) {
      double v = aggregate == kAverage ? acc[t] / double(roots.size()) : acc[t];
      if (!base.empty()) v += base[t];
      out[t] = TOut(v);
    }
  }
}

}  // namespace cuvil

namespace cuvil {

// f64 inputs give f64 outputs; every other input type (f16, f32, i32, i64) f32, as ONNX-ML computes in float.
inline DType tree_ensemble_output_dtype(DType in) { return in == DType::f64 ? DType::f64 : DType::f32; }

// fn(const T* data) for x's element type T among those TreeEnsemble reads; false for any other.
template <class Fn>
bool visit_tree_ensemble_input(const Tensor& x, Fn&& fn) {
  switch (x.dtype()) {
    case DType::f16: fn(x.data<f16_t>()); return true;
    case DType::f32: fn(x.data<float>()); return true;
    case DType::f64: fn(x.data<double>()); return true;
    case DType::i32: fn(x.data<int32_t>()); return true;
    case DType::i64: fn(x.data<int64_t>()); return true;
    default: return false;
  }
}

}  // namespace cuvil
