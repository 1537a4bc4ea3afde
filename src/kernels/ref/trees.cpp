// Reference kernel of the trees family: TreeEnsemble (semantics in src/ir/ops/trees.cpp), one row at a time
// through every tree (kernels/ref/tree_ensemble.h; the CPU kernel runs the same walk on threads).
#include <algorithm>

#include "kernels/ref/ref_kernels.h"
#include "ir/ops/trees.h"
#include "kernels/ref/tree_ensemble.h"

namespace cuvil {

std::string TreeEnsembleModel::pack(const ::cuvil::Node& node, TreeEnsembleModel& out) {
  if (std::string problem = tree_ensemble_problem(node); !problem.empty()) return problem;
  const auto& feature = node.attr("node_feature").ints();
  const auto& mode = node.attr("node_mode").ints();
  const auto& threshold = node.attr("node_threshold").floats();
  const auto& on_true = node.attr("node_true").ints();
  const auto& on_false = node.attr("node_false").ints();
  const auto& missing = node.attr("node_missing_true").ints();
  out.splits.resize(feature.size());
  out.max_feature = -1;
  for (size_t k = 0; k < feature.size(); ++k) {
    out.splits[k] = {threshold[k], int32_t(feature[k]), int32_t(on_true[k]), int32_t(on_false[k]),
                     uint8_t(mode[k]), uint8_t(missing[k] != 0)};
    out.max_feature = std::max(out.max_feature, feature[k]);
  }
  const auto& roots = node.attr("roots").ints();
  out.roots.assign(roots.begin(), roots.end());
  const auto& target = node.attr("weight_target").ints();
  out.weight_target.assign(target.begin(), target.end());
  out.leaf_start = node.attr("leaf_start").ints();
  out.weight_value = node.attr("weight_value").floats();
  out.member_start = node.attr("member_start").ints();
  out.member_values = node.attr("member_values").floats();
  out.base = node.attr("base").floats();
  out.n_targets = node.attr("n_targets").i();
  const std::string& aggregate = node.attr("aggregate").s();
  out.aggregate = aggregate == "AVERAGE" ? kAverage : aggregate == "MIN" ? kMin : aggregate == "MAX" ? kMax : kSum;
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
