#include "artifact/representative_shapes.h"

#include "support/error.h"

namespace cuvil::artifact {

void prepare_representative_shapes(Executor& e, const Graph& g) {
  bool all_static = true;
  for (Value* v : g.inputs()) all_static = all_static && v->shape().is_static();
  for (int64_t n : {int64_t(1), int64_t(2)}) {
    std::vector<std::vector<int64_t>> shapes;
    for (Value* v : g.inputs()) {
      if (!v->shape().rank_known()) return;
      std::vector<int64_t> dims;
      for (const Dim& d : v->shape().dims()) {
        if (d.is_const()) dims.push_back(d.value());
        else if (d.is_symbol()) dims.push_back(n);
        else return;
      }
      shapes.push_back(std::move(dims));
    }
    try {
      e.prepare(shapes);
    } catch (const Error&) {  // (a shape the model refuses: less is recorded)
    }
    if (all_static) return;
  }
}

}  // namespace cuvil::artifact
