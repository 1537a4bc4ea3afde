// Cases of the trees family (src/ir/ops/trees.cpp): TreeEnsemble over random complete trees with every
// comparison mode, NaN routing both ways, set membership, each aggregate, several targets per leaf, every input
// type, and batches large enough for the CPU kernel's threads; the CPU kernel must claim each case.
#include <random>

#include "harness.h"

namespace cuvil::optest {

namespace {

struct RandomEnsemble {
  Ints roots, feature, mode, on_true, on_false, missing, leaf_start{0}, weight_target, member_start{0};
  std::vector<double> threshold, weight_value, member_values;
};

// `trees` complete trees of `depth` levels over `features` features; node k's children are 2k+1 and 2k+2 of its
// tree, the last level leaves. Thresholds on a 0.5 grid (inputs on the same grid hit every equality).
RandomEnsemble random_ensemble(uint32_t seed, int trees, int depth, int features, int targets, const Ints& modes) {
  std::mt19937 rng(seed);
  auto uniform = [&](int n) { return int64_t(rng() % uint32_t(n)); };
  RandomEnsemble e;
  const int64_t internal = (int64_t(1) << depth) - 1, per_tree = 2 * internal + 1;
  int64_t leaves = 0;
  for (int t = 0; t < trees; ++t) {
    const int64_t base = int64_t(e.feature.size()), first_leaf = leaves;
    e.roots.push_back(base);
    for (int64_t k = 0; k < internal; ++k) {
      e.feature.push_back(uniform(features));
      e.mode.push_back(modes[size_t(uniform(int(modes.size())))]);
      e.threshold.push_back(double(uniform(9) - 4) * 0.5);
      e.missing.push_back(uniform(2));
      for (int64_t child : {2 * k + 1, 2 * k + 2})
        (child == 2 * k + 1 ? e.on_true : e.on_false)
            .push_back(child < internal ? base + child : -(first_leaf + (child - internal) + 1));
      if (e.mode.back() == 6)
        for (int m = 0; m < 1 + uniform(3); ++m) e.member_values.push_back(double(uniform(9) - 4) * 0.5);
      e.member_start.push_back(int64_t(e.member_values.size()));
    }
    for (int64_t l = 0; l < per_tree - internal; ++l, ++leaves) {
      for (int64_t target = 0; target < targets; ++target)
        if (target == 0 || uniform(2)) {
          e.weight_target.push_back(target);
          e.weight_value.push_back(double(uniform(2001) - 1000) / 256);
        }
      e.leaf_start.push_back(int64_t(e.weight_target.size()));
    }
  }
  return e;
}

OpCase& ensemble_case(Cases& cs, const std::string& label, const RandomEnsemble& e, int targets,
                      const char* aggregate) {
  OpCase& c = cs.add(OpKind::TreeEnsemble, label)
                  .attr("roots", e.roots)
                  .attr("node_feature", e.feature)
                  .attr("node_mode", e.mode)
                  .attr("node_threshold", e.threshold)
                  .attr("node_true", e.on_true)
                  .attr("node_false", e.on_false)
                  .attr("node_missing_true", e.missing)
                  .attr("leaf_start", e.leaf_start)
                  .attr("weight_target", e.weight_target)
                  .attr("weight_value", e.weight_value)
                  .attr("n_targets", int64_t(targets))
                  .attr("aggregate", aggregate)
                  .exact()
                  .needs({Backend::cpu});
  if (!e.member_values.empty()) c.attr("member_start", e.member_start).attr("member_values", e.member_values);
  return c;
}

}  // namespace

void add_trees_cases(Cases& cs) {
  const Ints all_modes = {0, 1, 2, 3, 4, 5, 6};
  for (const char* aggregate : {"SUM", "AVERAGE", "MIN", "MAX"}) {
    RandomEnsemble e = random_ensemble(7, 5, 4, 6, 3, all_modes);
    ensemble_case(cs, std::string(aggregate) + ", every mode, NaN and infinities", e, 3, aggregate)
        .in(f32({37, 6}).ties(0.5).sp())
        .attr("base", std::vector<double>{0.5, -1, 2});
  }
  RandomEnsemble e = random_ensemble(11, 24, 6, 9, 1, {0, 3});
  ensemble_case(cs, "batch of 5000 over threads", e, 1, "SUM").in(f32({5000, 9}).ties(0.5).sp());
  ensemble_case(cs, "f64 input", e, 1, "SUM").in(rnd(DType::f64, {19, 9}).ties(0.5));
  ensemble_case(cs, "f16 input", e, 1, "AVERAGE").in(rnd(DType::f16, {19, 9}).ties(0.5));
  ensemble_case(cs, "i64 input", e, 1, "SUM").in(i64({19, 9}, -4, 4));
  ensemble_case(cs, "one row as [F]", e, 1, "MAX").in(f32({9}).ties(0.5));
}

}  // namespace cuvil::optest
