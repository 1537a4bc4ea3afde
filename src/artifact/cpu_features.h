// The CPU features an artifact's code requires, and the host's. Names are LLVM's (`avx2`, `avx512f`, ...). A
// feature this build cannot test for counts as missing: an artifact that names it is refused rather than run.
#pragma once

#include <string>
#include <vector>

namespace cuvil::artifact {

// The features of the CPU this process runs on, among those this build can test (sorted).
std::vector<std::string> host_cpu_features();
// `required` less `host`, in the order of `required`.
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required,
                                              const std::vector<std::string>& host);
// What code compiled for this host by the process's compiler may use: the host's features (the JIT targets the
// host CPU with all of them).
std::vector<std::string> features_for_host_code();
// The baseline every x86-64 CPU has: what an artifact without machine code requires (the runtime library's own
// kernels pick their ISA level at run time).
std::vector<std::string> baseline_cpu_features();

}  // namespace cuvil::artifact
