#include "kernels/workers.h"

#include <cstdlib>
#include <strings.h>

namespace cuvil::cpu {

bool workers_spinning(int64_t now) {
  static const bool passive = [] {
    const char* p = std::getenv("OMP_WAIT_POLICY");
    return p && strcasecmp(p, "passive") == 0;
  }();
  return !passive && now - detail::last_region_end_ns.load(std::memory_order_relaxed) < kSpinWindowNs;
}

}  // namespace cuvil::cpu
