#include "kernels/workers.h"

#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace cuvil::cpu {

bool workers_spinning(int64_t now) {
  static const bool passive = [] {
    const char* p = std::getenv("OMP_WAIT_POLICY");
    return p && strcasecmp(p, "passive") == 0;
  }();
  return !passive && now - detail::last_region_end_ns.load(std::memory_order_relaxed) < kSpinWindowNs;
}

int parse_runnable_tasks(const char* loadavg) {
  const char* p = loadavg;
  for (int field = 0; field < 3; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return -1;
    ++p;
  }
  if (*p < '0' || *p > '9') return -1;
  char* end = nullptr;
  long n = std::strtol(p, &end, 10);
  if (end == p || *end != '/' || n < 0 || n > 1'000'000) return -1;
  return int(n);
}

int threads_given_load(int want, int cores, int runnable, int own) {
  if (want <= 1 || cores <= 0 || runnable < 0) return std::max(want, 1);
  int others = std::max(runnable - std::max(own, 1), 0);
  return std::clamp(cores - others, 1, want);
}

namespace {

int runnable_tasks_now() {
  static const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return parse_runnable_tasks(buf);
}

std::atomic<int64_t> load_read_ns{std::numeric_limits<int64_t>::min() / 2};
std::atomic<int> load_runnable{-1};

}  // namespace

int threads_free(int want, int64_t now) {
  if (want <= 1) return std::max(want, 1);
  static const bool ignore = [] {
    const char* v = std::getenv("CUVIL_IGNORE_LOAD");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  static const int cores = int(std::max<long>(::sysconf(_SC_NPROCESSORS_ONLN), 1));
  if (ignore) return want;
  int runnable = load_runnable.load(std::memory_order_relaxed);
  if (now - load_read_ns.load(std::memory_order_relaxed) >= kLoadRecheckNs) {
    runnable = runnable_tasks_now();
    load_runnable.store(runnable, std::memory_order_relaxed);
    load_read_ns.store(now, std::memory_order_relaxed);
  }
  // Ours: the caller, and the workers while they may still spin after a region (they count as running).
  bool spin = now - detail::last_region_end_ns.load(std::memory_order_relaxed) < kOwnSpinNs;
  return threads_given_load(want, cores, runnable, spin ? want : 1);
}

}  // namespace cuvil::cpu
