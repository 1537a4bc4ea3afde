#include "support/perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace cuvil {

namespace {

std::mutex mu;
int fd = -2;  // -2: not opened yet; -1: off (not asked for, or failed)

void off(const char* why) {
  std::fprintf(stderr, "cuvil: warning: CUVIL_PERF_MAP: %s; generated kernels are not announced to perf\n", why);
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Under mu.
bool open_map() {
  if (fd != -2) return fd >= 0;
  fd = -1;
  if (!perf_map_enabled()) return false;
  std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    off(("cannot open " + path + ": " + std::strerror(errno)).c_str());
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    off((path + " is not a regular file of this user").c_str());
    return false;
  }
  return true;
}

}  // namespace

bool perf_map_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("CUVIL_PERF_MAP");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void perf_map_announce(const void* start, size_t size, std::string_view name) {
  if (!perf_map_enabled() || !start || size == 0) return;
  std::lock_guard<std::mutex> lock(mu);
  if (!open_map()) return;
  char head[64];
  int n = std::snprintf(head, sizeof head, "%llx %zx ", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(start)),
                        size);
  std::string line(head, size_t(n));
  for (char c : name) line += (c == '\n' || c == '\r') ? ' ' : c;  // one line per entry
  line += '\n';
  // One write per line: with O_APPEND, lines of other writers (another Cuvil thread is excluded by mu) never interleave.
  if (::write(fd, line.data(), line.size()) != ssize_t(line.size())) off("a write failed");
}

}  // namespace cuvil
