// Graph passes: pure rewrites of a Graph. Each pass lives in its own file (src/passes/FooBar.cpp defines
// FooBarPass, flag foo-bar, tests in tests/passes/foo_bar.cvir); passes.def lists them. A pass handles the regions
// of control-flow nodes itself (each pass recurses into them).
//
// After a pass that changed the graph, run_pass re-runs shape inference (a rewrite may make types more precise,
// e.g. a folded constant has concrete dims) and, when verify_each is on, the verifier.
#pragma once

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "kernels/fusion_facts.h"

namespace cuvil {

struct PassContext {
  // Runs the verifier after every pass that changed the graph. On in tests and debug builds.
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;
#endif
  // Prints the IR after each pass named here ("all": after every pass) to `ir_out`.
  std::set<std::string> print_ir_after;
  std::ostream* ir_out = nullptr;
  // Passes that do not run (debugging, A/B measurements of one pass). The environment variable
  // CUVIL_SKIP_PASSES (pass names separated by commas) adds to these.
  std::set<std::string> skip;
  // Constant folding leaves nodes whose outputs together exceed this many elements alone.
  int64_t max_fold_elements = int64_t(1) << 20;
  // What the kernel generator computes (fuse-elementwise, decompose-ops and split-reductions ask): the
  // generator linked into this process, unless a caller points elsewhere. Passes never include the generator.
  const FusionFacts* fusion = &fusion_facts();
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Rewrites `g` (and its regions); returns whether anything changed.
  virtual bool run(Graph& g, PassContext& ctx) = 0;
};

// One class per row of passes.def.
#define CUVIL_PASS(Class, flag)                           \
  class Class##Pass : public Pass {                       \
   public:                                                \
    std::string_view name() const override { return flag; } \
    bool run(Graph& g, PassContext& ctx) override;        \
  };
#include "passes/passes.def"
#undef CUVIL_PASS

// The pass with this flag name, or null.
std::unique_ptr<Pass> create_pass(std::string_view name);
// Every pass's flag name, in table order.
std::vector<std::string> pass_names();

// Runs one pass, then (if it changed the graph) shape inference, the verifier when ctx.verify_each, and the IR
// printout when requested. Returns what the pass returned.
bool run_pass(Pass& p, Graph& g, PassContext& ctx);

}  // namespace cuvil
