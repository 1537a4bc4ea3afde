// cuvil_op_tests: the op-test harness's driver.
//
//   cuvil_op_tests [test|perf|support] [--op NAME[,NAME...]] [--backend NAME[,NAME...]] [--verbose]
//
//   test     (default) every case on the reference and on each backend; prints failures; exit 1 on any
//   perf     median microseconds per run of each backend that claims a case (no thresholds; for comparisons)
//   support  per case, the kernel each backend prepares ("-" where it has none)
//
// Backends: ref, generated, cpu, onednn, auto (harness.h). CI runs the same cases through cuvil_unit_tests
// (tests/unit/op_harness_test.cpp).
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include "harness.h"

using namespace cuvil;
using namespace cuvil::optest;

namespace {

std::set<std::string> split(const std::string& s) {
  std::set<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.insert(item);
  return out;
}

int usage() {
  std::fprintf(stderr,
               "usage: cuvil_op_tests [test|perf|support] [--op NAME[,NAME...]] [--backend NAME[,NAME...]] "
               "[--verbose]\nbackends: ref generated cpu onednn auto\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "test";
  std::set<std::string> ops;
  RunOptions options;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "test" || a == "perf" || a == "support") {
      mode = a;
    } else if ((a == "--op" || a == "--backend") && i + 1 < argc) {
      std::set<std::string> names = split(argv[++i]);
      for (const std::string& n : names) {
        if (a == "--op") {
          if (!op_from_name(n)) {
            std::fprintf(stderr, "unknown op '%s'\n", n.c_str());
            return 2;
          }
          ops.insert(n);
        } else {
          auto b = backend_from_name(n);
          if (!b) {
            std::fprintf(stderr, "unknown backend '%s'\n", n.c_str());
            return usage();
          }
          options.backends.insert(*b);
        }
      }
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else {
      return usage();
    }
  }
  options.perf = mode == "perf";

  int cases = 0, failed = 0;
  for (const OpCase& c : all_cases()) {
    if (!ops.empty() && !ops.count(std::string(op_name(c.op)))) continue;
    ++cases;
    std::vector<BackendResult> results = run_case(c, options);
    bool ok = true;
    for (const BackendResult& r : results) ok &= r.failures.empty();
    failed += !ok;
    if (mode == "support" || mode == "perf" || verbose || !ok) {
      std::printf("%s\n", c.describe().c_str());
      for (const BackendResult& r : results) {
        if (mode == "perf" && r.claimed) std::printf("  %-9s %10.1f us  %s\n", backend_name(r.backend), r.us, r.impl.c_str());
        else std::printf("  %-9s %s\n", backend_name(r.backend), r.claimed ? r.impl.c_str() : "-");
        for (const std::string& f : r.failures) std::printf("    FAIL %s\n", f.c_str());
      }
    }
  }
  std::printf("%d cases, %d failed\n", cases, failed);
  return failed ? 1 : 0;
}
