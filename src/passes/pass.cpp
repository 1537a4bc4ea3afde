#include "passes/pass.h"

#include <algorithm>
#include <cstdlib>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace cuvil {

std::unique_ptr<Pass> create_pass(std::string_view name) {
#define CUVIL_PASS(Class, flag) \
  if (name == flag) return std::make_unique<Class##Pass>();
#include "passes/passes.def"
#undef CUVIL_PASS
  return nullptr;
}

std::vector<std::string> pass_names() {
  return {
#define CUVIL_PASS(Class, flag) flag,
#include "passes/passes.def"
#undef CUVIL_PASS
  };
}

namespace {

// CUVIL_SKIP_PASSES, read once.
const std::set<std::string>& skipped_by_environment() {
  static const std::set<std::string> names = [] {
    std::set<std::string> out;
    const char* e = std::getenv("CUVIL_SKIP_PASSES");
    std::string s = e ? e : "";
    for (size_t at = 0; at < s.size();) {
      size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) out.insert(s.substr(at, comma - at));
      at = comma + 1;
    }
    return out;
  }();
  return names;
}

}  // namespace

bool run_pass(Pass& p, Graph& g, PassContext& ctx) {
  std::string name(p.name());
  if (ctx.skip.count(name) || skipped_by_environment().count(name)) return false;
  bool changed = p.run(g, ctx);
  if (changed) {
    try {
      infer_shapes(g);
      if (ctx.verify_each) verify(g);
    } catch (const Error& e) {
      throw Error("after pass " + std::string(p.name()) + ": " + e.what());
    }
  }
  if (ctx.ir_out && (ctx.print_ir_after.count(std::string(p.name())) || ctx.print_ir_after.count("all")))
    *ctx.ir_out << "// IR after " << p.name() << (changed ? "" : " (unchanged)") << "\n"
                << print_graph(g, {.elide_large_constants = true});
  return changed;
}

}  // namespace cuvil
