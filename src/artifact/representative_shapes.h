// The shapes a save prepares an executor at, to see what its kernels use (generated kernels, packed weights):
// the graph's static input shapes, or with every symbolic dim at 1 and then at 2. Other shapes that lower to
// other kernels are prepared by the loading process when it first meets them.
#pragma once

#include "runtime/executor.h"

namespace cuvil::artifact {

// Prepares `e` (an executor of `g`) at those shapes. A shape the model refuses (cuvil::Error) is skipped; an
// input of unknown rank or a dim neither constant nor symbolic stops there.
void prepare_representative_shapes(Executor& e, const Graph& g);

}  // namespace cuvil::artifact
