// TreeEnsemble on threads: the reference kernel's walk (kernels/ref/tree_ensemble.h) with the ensemble packed
// once when the kernel is prepared instead of per call, and the rows split over the run's threads.
#include "kernels/cpu/cpu_util.h"
#include "kernels/ref/tree_ensemble.h"

namespace cuvil::cpu {

std::unique_ptr<PreparedKernel> prepare_tree_ensemble(const Node& n, const std::vector<PrepareInput>& in) {
  if (in.empty() || !in[0].present) return nullptr;
  auto model = std::make_shared<TreeEnsembleModel>();
  if (!TreeEnsembleModel::pack(n, *model).empty()) return nullptr;  // (the reference kernel says why)
  return make_kernel(
      [model](KernelContext& ctx) {
        const Tensor& x = ctx.input(0);
        Tensor& y = ctx.output(0);
        if ((x.rank() != 1 && x.rank() != 2) || y.dtype() != tree_ensemble_output_dtype(x.dtype()))
          ctx.error("input must have rank 1 or 2, got ", x.type_str());
        const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
        const int64_t features = x.rank() == 2 ? x.dim(1) : x.dim(0);
        if (model->max_feature >= features)
          ctx.error("a split reads feature ", model->max_feature, ", but the input has ", features, " features");
        // (cost per row: a walk of a few levels per tree, as many element-steps as that)
        const int64_t cost = int64_t(model->roots.size()) * 8;
        visit_tree_ensemble_input(x, [&](const auto* in) {
          parallel_ranges(rows, cost, 1, [&](int64_t b, int64_t e) {
            if (y.dtype() == DType::f64) model->predict(in, features, b, e, y.data<double>());
            else model->predict(in, features, b, e, y.data<float>());
          });
        });
      },
      "tree_ensemble");
}

}  // namespace cuvil::cpu
