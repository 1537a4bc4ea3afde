// host_cpu.h: cpuid through LLVM's host queries (microseconds; the JIT's start-up takes milliseconds).
#include "codegen/llvm/host_cpu.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <vector>

namespace cuvil::codegen {

std::string host_cpu_description() {
  std::string out = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> features;
  std::vector<std::string> list;
  if (llvm::sys::getHostCPUFeatures(features))
    for (const auto& f : features) list.push_back((f.getValue() ? "+" : "-") + f.getKey().str());
  std::sort(list.begin(), list.end());
  for (size_t i = 0; i < list.size(); ++i) out += (i ? "," : " ") + list[i];
  return out;
}

}  // namespace cuvil::codegen
