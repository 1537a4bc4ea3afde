// Reference kernel of the trees family: TreeEnsemble (semantics in src/ir/ops/trees.cpp), one row at a time
// through every tree (kernels/ref/tree_ensemble.h; the CPU kernel runs the same walk on threads).
#include <algorithm>

#include "kernels/ref/ref_kernels.h"
#include "kernels/ref/tree_ensemble.h"

namespace cuvil {

std::string TreeEnsembleModel::pack(const ::cuvil::Node& node, TreeEnsembleModel& out) {
  const auto& roots = node.attr("roots").ints();
  const auto& feature = node.attr("node_feature").ints();
  const auto& mode = node.attr("node_mode").ints();
  const auto& threshold = node.attr("node_threshold").floats();
  const auto& on_true = node.attr("node_true").ints();
  const auto& on_false = node.attr("node_false").ints();
  const auto& missing = node.attr("node_missing_true").ints();
  const size_t n = feature.size();
  if (mode.size() != n || threshold.size() != n || on_true.size() != n || on_false.size() != n ||
      missing.size() != n)
    return "the node attributes differ in length";
  if (n >= size_t(std::numeric_limits<int32_t>::max())) return "too many nodes";
  out.leaf_start = node.attr("leaf_start").ints();
  out.weight_value = node.attr("weight_value").floats();
  const auto& target = node.attr("weight_target").ints();
  out.n_targets = node.attr("n_targets").i();
  if (out.leaf_start.empty() || out.leaf_start.front() != 0 || out.leaf_start.back() != int64_t(target.size()) ||
      out.weight_value.size() != target.size() || out.n_targets < 1)
    return "the leaf weights are inconsistent";
  for (size_t l = 1; l < out.leaf_start.size(); ++l)
    if (out.leaf_start[l] < out.leaf_start[l - 1]) return "the leaf weights are inconsistent";
  out.weight_target.clear();
  for (int64_t t : target) {
    if (t < 0 || t >= out.n_targets) return "a leaf weight's target is out of range";
    out.weight_target.push_back(int32_t(t));
  }
  const int64_t leaves = int64_t(out.leaf_start.size()) - 1;
  auto ref_ok = [&](int64_t r) { return r >= 0 ? r < int64_t(n) : -(r + 1) < leaves; };
  out.splits.resize(n);
  out.max_feature = -1;
  bool any_member = false;
  for (size_t k = 0; k < n; ++k) {
    if (mode[k] < 0 || mode[k] > 6 || feature[k] < 0 || feature[k] > std::numeric_limits<int32_t>::max() ||
        !ref_ok(on_true[k]) || !ref_ok(on_false[k]))
      return "node " + std::to_string(k) + " is malformed";
    out.splits[k] = {threshold[k], int32_t(feature[k]), int32_t(on_true[k]), int32_t(on_false[k]),
                     uint8_t(mode[k]), uint8_t(missing[k] != 0)};
    out.max_feature = std::max(out.max_feature, feature[k]);
    any_member |= mode[k] == 6;
  }
  out.member_start = node.attr("member_start").ints();
  out.member_values = node.attr("member_values").floats();
  if (any_member) {
    if (out.member_start.size() != n + 1 || out.member_start.front() != 0 ||
        out.member_start.back() != int64_t(out.member_values.size()))
      return "the set members are inconsistent";
    for (size_t k = 1; k <= n; ++k)
      if (out.member_start[k] < out.member_start[k - 1]) return "the set members are inconsistent";
  }
  // Trees, not graphs: no node reached twice from the roots, so every walk ends within n steps.
  std::vector<char> seen(n, 0);
  std::vector<int64_t> stack;
  out.roots.clear();
  for (int64_t r : roots) {
    if (!ref_ok(r)) return "a tree root is out of range";
    out.roots.push_back(int32_t(r));
    if (r >= 0) stack.push_back(r);
    while (!stack.empty()) {
      const int64_t k = stack.back();
      stack.pop_back();
      if (seen[size_t(k)]++) return "node " + std::to_string(k) + " is reached twice (a cycle or a shared subtree)";
      for (int64_t next : {on_true[size_t(k)], on_false[size_t(k)]})
        if (next >= 0) stack.push_back(next);
    }
  }
  if (out.roots.empty()) return "there are no trees";
  out.base = node.attr("base").floats();
  if (!out.base.empty() && int64_t(out.base.size()) != out.n_targets) return "'base' has the wrong length";
  const std::string& aggregate = node.attr("aggregate").s();
  if (aggregate == "SUM") out.aggregate = kSum;
  else if (aggregate == "AVERAGE") out.aggregate = kAverage;
  else if (aggregate == "MIN") out.aggregate = kMin;
  else if (aggregate == "MAX") out.aggregate = kMax;
  else return "unknown aggregate '" + aggregate + "'";
  return "";
}

CUVIL_REF_KERNEL(TreeEnsemble) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  TreeEnsembleModel model;
  if (std::string why = TreeEnsembleModel::pack(ctx.node(), model); !why.empty()) ctx.error(why);
  if (x.rank() != 1 && x.rank() != 2) ctx.error("input must have rank 1 or 2, got ", x.type_str());
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  const int64_t features = x.rank() == 2 ? x.dim(1) : x.dim(0);
  if (model.max_feature >= features)
    ctx.error("a split reads feature ", model.max_feature, ", but the input has ", features, " features");
  CUVIL_ASSERT(y.dtype() == tree_ensemble_output_dtype(x.dtype()) && y.numel() == rows * model.n_targets,
               ctx.node().describe(), ": output is ", y.type_str(), " for input ", x.type_str());
  if (!visit_tree_ensemble_input(x, [&](const auto* in) {
        if (y.dtype() == DType::f64) model.predict(in, features, 0, rows, y.data<double>());
        else model.predict(in, features, 0, rows, y.data<float>());
      }))
    ctx.error("input must be f16, f32, f64, i32 or i64, got ", dtype_name(x.dtype()));
}

}  // namespace cuvil
