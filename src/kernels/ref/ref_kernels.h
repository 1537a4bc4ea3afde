// The reference backend: one plain-loop kernel per op in the table. It is the ground truth every fast path is
// tested against, so each kernel favours clarity over speed.
#pragma once

#include "kernels/kernel_context.h"

namespace cuvil {

// The reference kernel of op `k` (every op in the table has one).
KernelFn ref_kernel(OpKind k);

// Defines a reference kernel in src/kernels/ref/<family>.cpp:  CUVIL_REF_KERNEL(Relu) { ... ctx ... }
#define CUVIL_REF_KERNEL(Name) void ref_kernel_##Name(::cuvil::KernelContext& ctx)

}  // namespace cuvil
