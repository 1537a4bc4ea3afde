#include "artifact/cpu_features.h"

#include <algorithm>

namespace cuvil::artifact {

std::vector<std::string> host_cpu_features() {
  std::vector<std::string> r;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // __builtin_cpu_supports takes a literal: one line per feature.
#define CUVIL_FEATURE(name) \
  if (__builtin_cpu_supports(name)) r.emplace_back(name);
  CUVIL_FEATURE("sse2")
  CUVIL_FEATURE("sse3")
  CUVIL_FEATURE("ssse3")
  CUVIL_FEATURE("sse4.1")
  CUVIL_FEATURE("sse4.2")
  CUVIL_FEATURE("popcnt")
  CUVIL_FEATURE("avx")
  CUVIL_FEATURE("avx2")
  CUVIL_FEATURE("fma")
  CUVIL_FEATURE("bmi")
  CUVIL_FEATURE("bmi2")
  CUVIL_FEATURE("avx512f")
  CUVIL_FEATURE("avx512vl")
  CUVIL_FEATURE("avx512bw")
  CUVIL_FEATURE("avx512dq")
  CUVIL_FEATURE("avx512cd")
  CUVIL_FEATURE("avx512vbmi")
  CUVIL_FEATURE("avx512ifma")
  CUVIL_FEATURE("avx512vnni")
  CUVIL_FEATURE("avx512bf16")
#undef CUVIL_FEATURE
#endif
  std::sort(r.begin(), r.end());
  return r;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required,
                                              const std::vector<std::string>& host) {
  std::vector<std::string> r;
  for (const std::string& f : required)
    if (std::find(host.begin(), host.end(), f) == host.end()) r.push_back(f);
  return r;
}

std::vector<std::string> features_for_host_code() { return host_cpu_features(); }

std::vector<std::string> baseline_cpu_features() { return {"sse2"}; }

}  // namespace cuvil::artifact
