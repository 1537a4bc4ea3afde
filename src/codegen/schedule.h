// How a generated kernel loops: vector width, unrolling and the parallel split. A schedule never changes what a
// kernel computes (kernel_ir.h fixes the reduction order), so tests run random schedules against one oracle.
#pragma once

#include <cstdint>
#include <string>

namespace cuvil::codegen {

struct Schedule {
  // Lanes per vector op: 1, 2, 4, ..., 128; 16 f32 lanes fill an AVX-512 register (wider vectors are split).
  int vector_width = 16;
  int unroll = 2;         // vectors per iteration of the element-wise loop
  // Parallel split (run time, not part of the compiled code): work items per task, rounded to whole vectors.
  int64_t grain = 16384;
  // Full-vector f32 output stores bypass the caches (non-temporal) when the outputs are aligned: for outputs far
  // larger than the caches, a write then costs no read of the line it replaces (a third of an element-wise
  // kernel's memory traffic), and does not evict what the next kernel reads.
  bool streaming_stores = false;

  std::string str() const {
    return "w" + std::to_string(vector_width) + "u" + std::to_string(unroll) + (streaming_stores ? "s" : "");
  }
  bool valid() const {
    bool w = vector_width == 1 || vector_width == 2 || vector_width == 4 || vector_width == 8 ||
             vector_width == 16 || vector_width == 32 || vector_width == 64 || vector_width == 128;
    return w && unroll >= 1 && unroll <= 8 && grain >= 1;
  }
};

}  // namespace cuvil::codegen
