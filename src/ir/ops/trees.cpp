// Op definition (arity, attributes, shape inference) of the trees family: TreeEnsemble.
//
// One form for every ai.onnx.ml tree op (TreeEnsembleRegressor and TreeEnsembleClassifier, opsets 1 and 3, and
// TreeEnsemble, opset 5): the importer (src/frontend/onnx/convert_trees.cpp) numbers the internal nodes and the
// leaves of all trees, and a classifier's labels and post transform become ordinary ops after this one.
//
//   x [N, F] or [F] (f16, f32, f64, i32, i64) -> y [N, n_targets] (f64 for an f64 x, else f32)
//
// Internal node k: feature `node_feature[k]`, comparison `node_mode[k]` (0 x <= v, 1 x < v, 2 x >= v, 3 x > v,
// 4 x == v, 5 x != v, 6 x in the set member_values[member_start[k] .. member_start[k+1])) against
// `node_threshold[k]` (compared in double: a float threshold widens exactly), true also for a NaN where
// `node_missing_true[k]` is 1 (otherwise a NaN compares as IEEE says: false but for !=, as ONNX Runtime and the
// opset-5 reference do; the opset-3 reference sends a NaN down != 's false branch). `node_true[k]` / `node_false[k]`, like each tree's entry of `roots`, name the next
// internal node (>= 0) or a leaf l as -(l + 1). Leaf l adds weight_value[e] to target weight_target[e] for e in
// leaf_start[l] .. leaf_start[l+1]; `aggregate` combines the trees' leaves per target (SUM, AVERAGE: the sum over
// the number of trees, MIN, MAX: from the type's largest / lowest value, as ONNX's reference), then `base` (one per
// target, or none) is added.
//
// tree_ensemble_problem (trees.h) checks the whole structure: every reference in range, each tree a tree (no node
// reached twice, so no cycle), every leaf weight's target in range. Inference runs it, and so does the kernel when
// it packs the attributes (a graph that skipped inference, e.g. from a damaged artifact, must not loop or overrun).
#include "ir/ops/trees.h"

#include <limits>

#include "ir/ops/infer_util.h"

namespace cuvil {

std::string tree_ensemble_problem(const Node& node) {
  const AttrReader c(node);
  const auto& roots = c.ints("roots");
  const auto& feature = c.ints("node_feature");
  const auto& mode = c.ints("node_mode");
  const auto& threshold = c.floats("node_threshold");
  const auto& on_true = c.ints("node_true");
  const auto& on_false = c.ints("node_false");
  const auto& missing = c.ints("node_missing_true");
  const auto& leaf_start = c.ints("leaf_start");
  const auto& target = c.ints("weight_target");
  const auto& weight = c.floats("weight_value");
  const auto& member_start = c.ints("member_start");
  const auto& members = c.floats("member_values");
  const int64_t nodes = int64_t(feature.size());
  if (mode.size() != feature.size() || threshold.size() != feature.size() || on_true.size() != feature.size() ||
      on_false.size() != feature.size() || missing.size() != feature.size())
    return str_cat("the node attributes must all have one entry per internal node (", nodes, ")");
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();  // (the kernels pack indices as int32)
  if (nodes >= kMax32 || int64_t(leaf_start.size()) >= kMax32)
    return str_cat("the ensemble has over 2^31 nodes or leaves");
  if (roots.empty()) return str_cat("attribute 'roots' is empty: an ensemble needs at least one tree");
  if (leaf_start.empty() || leaf_start.front() != 0 || leaf_start.back() != int64_t(target.size()))
    return str_cat("attribute 'leaf_start' must run from 0 to the number of leaf weights (", target.size(), ")");
  if (weight.size() != target.size()) return str_cat("'weight_target' and 'weight_value' differ in length");
  const int64_t leaves = int64_t(leaf_start.size()) - 1;
  for (size_t l = 1; l < leaf_start.size(); ++l)
    if (leaf_start[l] < leaf_start[l - 1]) return str_cat("attribute 'leaf_start' must be non-decreasing");
  const int64_t n_targets = c.i("n_targets");
  if (n_targets < 1) return str_cat("attribute 'n_targets' must be >= 1, got ", n_targets);
  for (int64_t t : target)
    if (t < 0 || t >= n_targets) return str_cat("a leaf weight is for target ", t, ", outside [0, ", n_targets, ")");
  const auto& base = c.floats("base");
  if (!base.empty() && int64_t(base.size()) != n_targets)
    return str_cat("attribute 'base' has ", base.size(), " values for ", n_targets, " targets");
  const std::string& aggregate = c.s("aggregate");
  if (aggregate != "SUM" && aggregate != "AVERAGE" && aggregate != "MIN" && aggregate != "MAX")
    return str_cat("attribute 'aggregate' must be SUM, AVERAGE, MIN or MAX, got \"", aggregate, "\"");

  bool any_member = false;
  for (int64_t k = 0; k < nodes; ++k) {
    if (mode[k] < 0 || mode[k] > 6) return str_cat("node ", k, " has comparison mode ", mode[k], " (0..6)");
    if (feature[k] < 0 || feature[k] > kMax32)
      return str_cat("node ", k, " reads feature ", feature[k]);
    any_member |= mode[k] == 6;
  }
  if (any_member) {
    if (int64_t(member_start.size()) != nodes + 1 || member_start.front() != 0 ||
        member_start.back() != int64_t(members.size()))
      return str_cat("attribute 'member_start' must have one entry per node and one more, from 0 to the number of set "
              "members (", members.size(), ")");
    for (size_t k = 1; k < member_start.size(); ++k)
      if (member_start[k] < member_start[k - 1]) return str_cat("attribute 'member_start' must be non-decreasing");
  }

  // Each tree a tree: walking from every root, no internal node or leaf is reached twice (so every walk ends
  // within `nodes` steps).
  std::vector<char> seen_node(size_t(nodes), 0), seen_leaf(size_t(leaves), 0);
  std::vector<int64_t> stack;
  auto visit = [&](int64_t ref, const char* from) -> std::string {
    if (ref >= 0) {
      if (ref >= nodes) return str_cat(from, " names node ", ref, ", but there are ", nodes, " internal nodes");
      if (seen_node[size_t(ref)]++)
        return str_cat("node ", ref, " is reached twice: the trees have a cycle or share nodes");
      stack.push_back(ref);
    } else {
      int64_t leaf = -(ref + 1);
      if (leaf >= leaves) return str_cat(from, " names leaf ", leaf, ", but there are ", leaves, " leaves");
      if (seen_leaf[size_t(leaf)]++) return str_cat("leaf ", leaf, " is reached twice: the trees share leaves");
    }
    return {};
  };
  for (int64_t r : roots) {
    if (std::string p = visit(r, "a tree root"); !p.empty()) return p;
    while (!stack.empty()) {
      int64_t k = stack.back();
      stack.pop_back();
      if (std::string p = visit(on_true[size_t(k)], "a true branch"); !p.empty()) return p;
      if (std::string p = visit(on_false[size_t(k)], "a false branch"); !p.empty()) return p;
    }
  }
  return {};
}

CUVIL_DEFINE_OP(TreeEnsemble) {
  s.inputs(1, 1)
      .required_attr("roots", AttrKind::Ints)
      .required_attr("node_feature", AttrKind::Ints)
      .required_attr("node_mode", AttrKind::Ints)
      .required_attr("node_threshold", AttrKind::Floats)
      .required_attr("node_true", AttrKind::Ints)
      .required_attr("node_false", AttrKind::Ints)
      .required_attr("node_missing_true", AttrKind::Ints)
      .required_attr("leaf_start", AttrKind::Ints)
      .required_attr("weight_target", AttrKind::Ints)
      .required_attr("weight_value", AttrKind::Floats)
      .required_attr("n_targets", AttrKind::Int)
      .attr("member_start", AttrKind::Ints, std::vector<int64_t>{})
      .attr("member_values", AttrKind::Floats, std::vector<double>{})
      .attr("aggregate", AttrKind::String, "SUM")
      .attr("base", AttrKind::Floats, std::vector<double>{})
      .infer_with([](InferContext& c) {
        infer::expect_dtype(c, 0, {DType::f16, DType::f32, DType::f64, DType::i32, DType::i64});
        if (std::string problem = tree_ensemble_problem(c.node()); !problem.empty()) c.error(problem);
        const Shape& in = c.input_shape(0);
        const Dim targets(c.i("n_targets"));
        const DType out = c.input_dtype(0) == DType::f64 ? DType::f64 : DType::f32;
        if (!in.rank_known()) {
          c.set_output(0, out, Shape(std::vector<Dim>{infer::fresh_shape(c, 1)[0], targets}));
        } else if (in.rank() == 1) {
          c.set_output(0, out, Shape(std::vector<Dim>{Dim(1), targets}));
        } else if (in.rank() == 2) {
          c.set_output(0, out, Shape(std::vector<Dim>{in[0], targets}));
        } else {
          c.error("input must have rank 1 ([F]) or 2 ([N, F]), got shape ", in.str());
        }
      });
}

}  // namespace cuvil
