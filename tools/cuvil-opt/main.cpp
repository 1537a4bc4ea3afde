// cuvil-opt: runs passes on text IR and prints the result (for pass tests and for looking at what passes do).
//
//   cuvil-opt [--pass=a,b,...] [--O0|--O1] [--print-ir-after=PASS|all] [--no-verify] in.cvir
//
// Lines starting with "//" are ignored, and so is everything from a line "// EXPECT:" on, so a pass test file
// (tests/passes/*.cvir) can be given as is. Passes from --pass run in the order given, after the --O pipeline.
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"

using namespace cuvil;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) r.push_back(item);
  return r;
}

int usage(const std::string& why) {
  std::cerr << "cuvil-opt: " << why << "\n"
            << "usage: cuvil-opt [--pass=a,b,...] [--O0|--O1] [--print-ir-after=PASS|all] [--no-verify] in.cvir\n"
            << "passes:";
  for (auto& n : pass_names()) std::cerr << " " << n;
  std::cerr << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> passes;
  std::string path;
  int level = 0;
  PassContext ctx;
  ctx.verify_each = true;
  ctx.ir_out = &std::cout;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      std::string f = std::string(flag) + "=";
      if (a.rfind(f, 0) == 0) return a.substr(f.size());
      return std::nullopt;
    };
    if (auto v = value("--pass")) {
      for (auto& p : split(*v)) passes.push_back(p);
    } else if (auto v = value("--print-ir-after")) {
      for (auto& p : split(*v)) ctx.print_ir_after.insert(p);
    } else if (a == "--O0" || a == "-O0") {
      level = 0;
    } else if (a == "--O1" || a == "-O1") {
      level = 1;
    } else if (a == "--no-verify") {
      ctx.verify_each = false;
    } else if (a == "--help" || a == "-h") {
      return usage("runs passes on a .cvir file and prints the result");
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown flag '" + a + "'");
    } else if (path.empty()) {
      path = a;
    } else {
      return usage("more than one input file");
    }
  }
  if (path.empty()) return usage("no input file");
  for (auto& p : passes)
    if (!create_pass(p)) return usage("unknown pass '" + p + "'");
  for (auto& p : ctx.print_ir_after)
    if (p != "all" && !create_pass(p)) return usage("unknown pass '" + p + "' in --print-ir-after");
  try {
    std::ifstream f(path);
    CUVIL_CHECK(f, "cannot open '", path, "'");
    std::string text, line;
    while (std::getline(f, line)) {
      if (line.rfind("// EXPECT:", 0) == 0) break;
      if (line.rfind("//", 0) == 0) continue;
      text += line + "\n";
    }
    auto g = parse_graph(text);
    infer_shapes(*g);
    verify(*g);
    optimize(*g, level, ctx);
    for (auto& p : passes) run_pass(*create_pass(p), *g, ctx);
    if (ctx.print_ir_after.empty()) std::cout << print_graph(*g);
  } catch (const std::exception& e) {
    std::cerr << "cuvil-opt: " << path << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
