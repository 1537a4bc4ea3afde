// Channels-last support for the reference kernels: they are written for [N, C, spatial...]; for a node with
// channels_last = 1 the input and output are permuted around the channels-first body (clarity over speed).
#pragma once

#include "kernels/kernel_context.h"

namespace cuvil::ref {

// Runs body(ctx) directly when the node is channels-first, else on channels-first copies of input 0 and output 0
// (other inputs pass through), writing the result back in channels-last order.
void channels_first_or(KernelContext& ctx, KernelFn body);

}  // namespace cuvil::ref
