#include "report/perf_fold.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "support/error.h"

namespace cuvil::report {

namespace {

using json = nlohmann::json;

bool parse_int(std::string_view s, int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "  1234/1240 24312.514866787:  7f30a9 some_symbol (/usr/lib/libx.so)"
bool parse_line(std::string_view line, PerfSample& s) {
  line = trim(line);
  size_t slash = line.find('/'), space = line.find(' ');
  if (slash == std::string_view::npos || space == std::string_view::npos || slash > space) return false;
  if (!parse_int(line.substr(0, slash), s.pid) || !parse_int(line.substr(slash + 1, space - slash - 1), s.tid))
    return false;
  std::string_view rest = trim(line.substr(space));
  size_t colon = rest.find(':'), dot = rest.find('.');
  if (colon == std::string_view::npos || dot == std::string_view::npos || dot > colon) return false;
  int64_t sec = 0, frac = 0;
  std::string_view frac_text = rest.substr(dot + 1, colon - dot - 1);
  if (!parse_int(rest.substr(0, dot), sec) || frac_text.size() != 9 || !parse_int(frac_text, frac)) return false;
  s.time_ns = sec * 1000000000 + frac;
  rest = trim(rest.substr(colon + 1));
  size_t ip_end = rest.find(' ');  // the address, then the symbol and "(dso)"
  rest = ip_end == std::string_view::npos ? std::string_view() : trim(rest.substr(ip_end));
  s.dso.clear();
  if (!rest.empty() && rest.back() == ')') {  // the "(dso)" at the end, whose name may hold parentheses too
    int depth = 0;
    size_t open = std::string_view::npos;
    for (size_t i = rest.size(); i-- > 0;) {
      depth += rest[i] == ')' ? 1 : rest[i] == '(' ? -1 : 0;
      if (depth == 0) {
        open = i;
        break;
      }
    }
    if (open != std::string_view::npos && open > 0 && rest[open - 1] == ' ') {
      s.dso = std::string(rest.substr(open + 1, rest.size() - open - 2));
      rest = trim(rest.substr(0, open));
    }
  }
  s.symbol = rest.empty() ? "[unknown]" : std::string(rest);
  return true;
}

// The `n` symbols with the most samples, as [[name, count], ...], most first.
json top_symbols(const std::map<std::string, int64_t>& counts, size_t n) {
  std::vector<std::pair<std::string, int64_t>> top(counts.begin(), counts.end());
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (top.size() > n) top.resize(n);
  json syms = json::array();
  for (auto& [name, c] : top) syms.push_back({name, c});
  return syms;
}

}  // namespace

std::vector<PerfSample> parse_perf_script(std::string_view text) {
  std::vector<PerfSample> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    PerfSample s;
    if (parse_line(text.substr(at, end - at), s)) out.push_back(std::move(s));
    at = end + 1;
  }
  return out;
}

std::vector<PerfSample> read_perf_data(const std::string& perf_data) {
  if (::access(perf_data.c_str(), R_OK) != 0)
    throw Error("cannot read perf data '" + perf_data + "': " + std::strerror(errno));
  int fds[2];
  if (::pipe(fds) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  pid_t child = ::fork();
  if (child < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {  // argv, no shell: the path is never interpreted
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    const char* argv[] = {"perf", "script", "-i", perf_data.c_str(), "-F", "pid,tid,time,ip,sym,dso", "--ns", nullptr};
    ::execvp("perf", const_cast<char* const*>(argv));
    std::fprintf(stderr, "cuvil: cannot run perf: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("'perf script -i " + perf_data + "' failed" +
                (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? std::string(" (is perf installed?)") : ""));
  return parse_perf_script(text);
}

std::string fold_perf_samples(const std::string& report_json, const std::vector<PerfSample>& samples) {
  json r = json::parse(report_json, nullptr, false);
  if (r.is_discarded() || !r.is_object() || r.value("format", "") != "cuvil-profile")
    throw Error("not a cuvil profile report (JSON with \"format\": \"cuvil-profile\")");
  if (!r.contains("timeline") || !r["timeline"].contains("runs"))
    throw Error("the report has no timeline (made by an older cuvil): profile again");
  const json& tl = r["timeline"];
  int64_t pid = tl.value("pid", int64_t(-1));

  struct Span {
    int64_t begin, end;
    int64_t kernel;
  };
  struct Run {
    int64_t begin, end;
    std::vector<Span> spans;  // by begin
  };
  std::vector<Run> runs;
  for (const auto& run : tl["runs"]) {
    Run x;
    x.begin = run["start_ns"].get<int64_t>();
    x.end = x.begin + int64_t(run["wall_ms"].get<double>() * 1e6);
    for (const auto& k : run["kernels"]) {
      int64_t b = x.begin + int64_t(k[1].get<double>() * 1e6);
      x.spans.push_back({b, b + int64_t(k[2].get<double>() * 1e6), k[0].get<int64_t>()});
    }
    std::sort(x.spans.begin(), x.spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    runs.push_back(std::move(x));
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.begin < b.begin; });

  std::map<int64_t, int64_t> per_kernel;
  std::map<int64_t, std::map<std::string, int64_t>> symbols;
  std::map<std::string, int64_t> between_symbols;  // where the unattributed time goes
  int64_t in_runs = 0, in_kernels = 0, other = 0, outside = 0;
  for (const PerfSample& s : samples) {
    if (s.pid != pid) {
      ++other;
      continue;
    }
    auto run = std::upper_bound(runs.begin(), runs.end(), s.time_ns, [](int64_t t, const Run& x) { return t < x.begin; });
    if (run == runs.begin() || s.time_ns > std::prev(run)->end) {
      ++outside;
      continue;
    }
    --run;
    ++in_runs;
    auto span = std::upper_bound(run->spans.begin(), run->spans.end(), s.time_ns,
                                 [](int64_t t, const Span& x) { return t < x.begin; });
    std::string where = s.symbol + (s.dso.empty() || s.symbol != "[unknown]" ? "" : " (" + s.dso + ")");
    if (span == run->spans.begin() || s.time_ns > std::prev(span)->end) {  // between kernels
      ++between_symbols[where];
      continue;
    }
    --span;
    ++in_kernels;
    ++per_kernel[span->kernel];
    ++symbols[span->kernel][where];
  }
  if (in_runs == 0)
    throw Error("no perf sample of process " + std::to_string(pid) + " falls in a profiled run (" +
                std::to_string(samples.size()) + " samples read): record the same `cuvil profile` run, with "
                "`perf record -k CLOCK_MONOTONIC`");
  for (auto& k : r["kernels"]) {
    int64_t id = k["id"].get<int64_t>();
    auto it = per_kernel.find(id);
    int64_t n = it == per_kernel.end() ? 0 : it->second;
    k["perf"] = {{"samples", n}, {"share", double(n) / double(in_runs)}, {"symbols", top_symbols(symbols[id], 5)}};
  }
  r["perf"] = {{"samples", int64_t(samples.size())}, {"in_runs", in_runs},     {"in_kernels", in_kernels},
               {"between_kernels", in_runs - in_kernels}, {"between_symbols", top_symbols(between_symbols, 10)},
               {"other_processes", other}, {"outside_runs", outside}, {"clock", tl.value("clock", "")}};
  return r.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string perf_table(const std::string& folded_json) {
  json r = json::parse(folded_json, nullptr, false);
  if (r.is_discarded() || !r.contains("perf")) throw Error("not a report folded with perf samples");
  std::vector<const json*> rows;
  for (const auto& k : r["kernels"])
    if (k.contains("perf") && k["perf"]["samples"].get<int64_t>() > 0) rows.push_back(&k);
  std::sort(rows.begin(), rows.end(), [](const json* a, const json* b) {
    return (*a)["perf"]["samples"].get<int64_t>() > (*b)["perf"]["samples"].get<int64_t>();
  });
  const json& p = r["perf"];
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "perf samples: %lld in the profiled runs (%lld in kernels, %lld between them), %lld outside them, "
                "%lld of other processes\n",
                static_cast<long long>(p["in_runs"].get<int64_t>()), static_cast<long long>(p["in_kernels"].get<int64_t>()),
                static_cast<long long>(p["between_kernels"].get<int64_t>()),
                static_cast<long long>(p["outside_runs"].get<int64_t>()),
                static_cast<long long>(p["other_processes"].get<int64_t>()));
  out += buf;
  if (p.contains("between_symbols") && !p["between_symbols"].empty()) {
    std::string where;
    for (const auto& s : p["between_symbols"]) {
      if (!where.empty()) where += ", ";
      where += s[0].get<std::string>() + " " + std::to_string(s[1].get<int64_t>());
    }
    out += "between kernels: " + where + "\n";
  }
  out += "samples  share  time share  kernel                          where the samples landed\n";
  for (const json* k : rows) {
    const json& kp = (*k)["perf"];
    std::string where;
    for (const auto& s : kp["symbols"]) {
      if (!where.empty()) where += ", ";
      where += s[0].get<std::string>() + " " + std::to_string(s[1].get<int64_t>());
    }
    double share = (*k).value("share", -1.0);
    std::snprintf(buf, sizeof buf, "%7lld %5.1f%%  %9.1f%%  %-31.31s %s\n", static_cast<long long>(kp["samples"].get<int64_t>()),
                  100 * kp["share"].get<double>(), share < 0 ? 0.0 : 100 * share,
                  ((*k)["label"].get<std::string>() + " " + (*k)["impl"].get<std::string>()).c_str(), where.c_str());
    out += buf;
  }
  return out;
}

}  // namespace cuvil::report
