// Folding perf samples into a profile report (src/report/perf_fold.h): parsing `perf script` lines and
// attributing samples to kernels by time, on a synthetic report. The whole path with a real `perf record` is
// tested in tests/python/test_perf_profile.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "report/perf_fold.h"
#include "support/error.h"

namespace cuvil::report {
namespace {

using json = nlohmann::json;

TEST(PerfFold, ParsesPerfScriptLines) {
  auto s = parse_perf_script(
      "   101/102 24312.514866787:  ffffffff81618bff ___pte_offset_map ([kernel.kallsyms])\n"
      "101/103 24312.515000000:      7f30a9 cuvil jit:4941bd10 (/tmp/perf-101.map)\n"
      "101/101 1.000000001:  564d30 [unknown] (/usr/bin/bash)\n"
      "101/101 7.5:  564d30 short_fraction (/x)\n"  // not nanoseconds: skipped
      "garbage line\n"
      "101/101 2.000000000:  564d30 std::vector<int, std::allocator<int> >::push_back(int&&) (/lib/libc (x).so)\n"
      "\n");
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].pid, 101);
  EXPECT_EQ(s[0].tid, 102);
  EXPECT_EQ(s[0].time_ns, 24312514866787);
  EXPECT_EQ(s[0].symbol, "___pte_offset_map");
  EXPECT_EQ(s[0].dso, "[kernel.kallsyms]");
  EXPECT_EQ(s[1].symbol, "cuvil jit:4941bd10");
  EXPECT_EQ(s[2].time_ns, 1000000001);
  EXPECT_EQ(s[2].symbol, "[unknown]");
  EXPECT_EQ(s[3].symbol, "std::vector<int, std::allocator<int> >::push_back(int&&)");
  EXPECT_EQ(s[3].dso, "/lib/libc (x).so");
}

// Two runs of a report with two top-level kernels (ids 0 and 2; id 1 ran inside 2).
std::string report() {
  json kernels = json::array();
  for (int id = 0; id < 3; ++id)
    kernels.push_back({{"id", id}, {"label", "K" + std::to_string(id)}, {"impl", "x"}, {"share", 0.5}});
  json runs = json::array();
  for (int64_t start : {int64_t(1000000000), int64_t(2000000000)})
    runs.push_back({{"start_ns", start}, {"wall_ms", 10.0}, {"kernels", {{0, 0.5, 4.0}, {2, 5.0, 4.5}}}});
  return json({{"format", "cuvil-profile"},
               {"version", 1},
               {"kernels", kernels},
               {"timeline", {{"clock", "CLOCK_MONOTONIC"}, {"pid", 7}, {"runs", runs}}}})
      .dump();
}

PerfSample at(int64_t pid, int64_t ns, const char* sym) { return {pid, pid, ns, sym, ""}; }

TEST(PerfFold, AttributesSamplesByTime) {
  std::vector<PerfSample> samples = {
      at(7, 1000000000 + 1000000, "a"),   // run 1, kernel 0 (0.5..4.5 ms)
      at(7, 1000000000 + 3000000, "a"),   // run 1, kernel 0
      at(7, 1000000000 + 4800000, "b"),   // run 1, between kernels (4.5..5.0 ms)
      at(7, 1000000000 + 6000000, "c"),   // run 1, kernel 2 (5.0..9.5 ms)
      at(7, 2000000000 + 9400000, "c"),   // run 2, kernel 2
      at(7, 2000000000 + 9600000, "d"),   // run 2, after its last kernel, inside the run
      at(7, 1500000000, "e"),             // between the runs
      at(7, 999999999, "e"),              // before them
      at(8, 1000000000 + 1000000, "f"),   // another process
  };
  json r = json::parse(fold_perf_samples(report(), samples));
  EXPECT_EQ(r["perf"]["in_runs"], 6);
  EXPECT_EQ(r["perf"]["in_kernels"], 4);
  EXPECT_EQ(r["perf"]["between_kernels"], 2);
  EXPECT_EQ(r["perf"]["between_symbols"], json::parse(R"([["b", 1], ["d", 1]])"));
  EXPECT_EQ(r["perf"]["outside_runs"], 2);
  EXPECT_EQ(r["perf"]["other_processes"], 1);
  EXPECT_EQ(r["kernels"][0]["perf"]["samples"], 2);
  EXPECT_EQ(r["kernels"][1]["perf"]["samples"], 0);
  EXPECT_EQ(r["kernels"][2]["perf"]["samples"], 2);
  EXPECT_DOUBLE_EQ(r["kernels"][0]["perf"]["share"].get<double>(), 2.0 / 6.0);
  EXPECT_EQ(r["kernels"][0]["perf"]["symbols"][0][0], "a");
  EXPECT_EQ(r["kernels"][2]["perf"]["symbols"][0][1], 2);
  std::string table = perf_table(r.dump());
  EXPECT_NE(table.find("K0 x"), std::string::npos);
  EXPECT_EQ(table.find("K1 x"), std::string::npos);  // no samples: not listed
  EXPECT_NE(table.find("between kernels: b 1, d 1"), std::string::npos);
}

TEST(PerfFold, RefusesReportsAndSamplesThatDoNotMatch) {
  EXPECT_THROW(fold_perf_samples("{}", {}), Error);
  EXPECT_THROW(fold_perf_samples(R"({"format": "cuvil-profile", "version": 1, "kernels": []})", {}), Error);
  // Samples of another process only: perf recorded something else.
  EXPECT_THROW(fold_perf_samples(report(), {at(8, 1000000000 + 1000000, "f")}), Error);
  EXPECT_THROW(read_perf_data("/nonexistent/perf.data"), Error);
}

}  // namespace
}  // namespace cuvil::report
