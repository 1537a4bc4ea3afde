// What the int8 unit tests share (int8_kernels_test, int8_links_test, int8_residual_test): whether oneDNN may use
// VNNI here (the u8 x s8 kernels need it; elsewhere those tests skip), uniform random f32 tensors, and executor
// options that lower every calibrated node to int8, the graph's last one included.
#pragma once

#include <dnnl.hpp>

#include <random>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "runtime/executor.h"

namespace cuvil::test::int8 {

inline bool machine_has_vnni() {
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), vnni = unsigned(dnnl::cpu_isa::avx512_core_vnni);
  return (isa & vnni) == vnni;
}

inline bool machine_has_amx() {
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), amx = unsigned(dnnl::cpu_isa::avx512_core_amx);
  return (isa & amx) == amx;
}

// Whether a kernel's implementation name says it multiplies u8 x s8 natively: VNNI dot products, or AMX tiles
// (which oneDNN picks on CPUs that have them).
inline bool runs_on_int8_dot_products(const std::string& impl) {
  return impl.find("vnni") != std::string::npos || impl.find("amx") != std::string::npos;
}

inline Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// int8 with the graph's final outputs lowered too: these tests' graphs are a node or a few, and the last is the one
// under test.
inline ExecutorOptions int8_options() {
  ExecutorOptions o;
  o.kernels.precision = Precision::int8;
  o.kernels.lower_final_outputs = true;
  return o;
}

}  // namespace cuvil::test::int8
