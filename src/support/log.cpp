#include "support/log.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cuvil {

bool log_topic_in(std::string_view list, std::string_view topic) {
  if (topic.empty()) return false;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == topic || item == "all") return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

bool log_enabled(std::string_view topic) {
  static const std::string topics = [] {
    const char* v = std::getenv("CUVIL_LOG");
    return std::string(v ? v : "");
  }();
  return log_topic_in(topics, topic);
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
