#include "support/log.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cuvil {

bool log_enabled(std::string_view topic) {
  static const std::string topics = [] {
    const char* v = std::getenv("CUVIL_LOG");
    return "," + std::string(v ? v : "") + ",";
  }();
  auto has = [&](std::string_view t) {
    for (size_t at = 0; (at = topics.find(t, at)) != std::string::npos; ++at) {
      // whole items only, spaces around them allowed
      size_t b = at, e = at + t.size();
      while (b > 0 && topics[b - 1] == ' ') --b;
      while (e < topics.size() && topics[e] == ' ') ++e;
      if (b > 0 && topics[b - 1] == ',' && e < topics.size() && topics[e] == ',') return true;
    }
    return false;
  };
  return !topic.empty() && (has(topic) || has("all"));
}

void log_line(std::string_view topic, std::string_view message) {
  if (!log_enabled(topic)) return;
  std::string line = "cuvil[" + std::string(topic) + "]: " + std::string(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

std::pair<double, double> wall_and_cpu_ms() {
  timespec w{}, c{};
  clock_gettime(CLOCK_MONOTONIC, &w);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
  return {double(w.tv_sec) * 1e3 + double(w.tv_nsec) * 1e-6, double(c.tv_sec) * 1e3 + double(c.tv_nsec) * 1e-6};
}

std::string fixed_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", ms);
  return buf;
}

}  // namespace cuvil
