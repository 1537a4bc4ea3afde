// The op-test harness (tests/ops) under gtest, as CI runs it: every op's cases on the reference and on each
// backend on its own; every op of src/ir/ops.def has cases unless exempted (with its reason); and the harness
// itself reports what it must (a missing kernel a case needs, a wrong result).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ops/harness.h"

using namespace cuvil;
using namespace cuvil::optest;

namespace {

std::vector<OpKind> ops_with_cases() {
  std::vector<OpKind> ops;
  for (const OpCase& c : all_cases())
    if (ops.empty() || ops.back() != c.op) ops.push_back(c.op);
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return ops;
}

class OpHarness : public ::testing::TestWithParam<OpKind> {};

TEST_P(OpHarness, BackendsMatchReference) {
  int n = 0;
  for (const OpCase& c : all_cases()) {
    if (c.op != GetParam()) continue;
    ++n;
    for (const BackendResult& r : run_case(c, {}))
      for (const std::string& f : r.failures) ADD_FAILURE() << c.describe() << ": " << f;
  }
  EXPECT_GT(n, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpHarness, ::testing::ValuesIn(ops_with_cases()),
                         [](const ::testing::TestParamInfo<OpKind>& i) { return std::string(op_name(i.param)); });

// Coverage: an op added to ops.def without a harness case (or an exemption saying why) fails here.
TEST(OpHarnessCoverage, EveryOpHasACase) {
  std::vector<OpKind> have = ops_with_cases();
  for (int k = 0; k < kNumOps; ++k) {
    OpKind op = OpKind(k);
    bool has = std::binary_search(have.begin(), have.end(), op);
    bool exempt = exempt_ops().count(op) != 0;
    EXPECT_TRUE(has || exempt) << op_name(op) << " has no case in tests/ops/cases_" << op_family(op) << ".cpp";
    EXPECT_FALSE(has && exempt) << op_name(op) << " has cases: remove its exemption in tests/ops/harness.cpp";
  }
}

// A case that names a backend it needs fails when that backend has no kernel for it.
TEST(OpHarnessSelf, ReportsAMissingKernel) {
  OpCase c(OpKind::Log, "self test");
  c.in(f32({9}, 0.5, 3)).needs({Backend::onednn});
  std::vector<BackendResult> rs = run_case(c, {});
  bool reported = false;
  for (const BackendResult& r : rs)
    if (r.backend == Backend::onednn) reported = !r.claimed && !r.failures.empty();
  EXPECT_TRUE(reported);
}

// Inputs are fixed by the case (the same seed gives the same tensors), and specials appear where asked.
TEST(OpHarnessSelf, InputsAreReproducible) {
  OpCase c(OpKind::Relu, "self test");
  c.in(f32({50}).sp());
  c.seed = 5;
  std::vector<Tensor> a = make_inputs(c), b = make_inputs(c);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].same_bytes(b[0]));
  int nan = 0;
  for (int64_t i = 0; i < a[0].numel(); ++i) nan += std::isnan(a[0].data<float>()[i]);
  EXPECT_GT(nan, 0);
}

// A backend whose result differs is reported: a case whose tolerance no float op meets exactly (Exp on the
// generated and cpu backends uses vectorized approximations, within 1e-6 of std::exp but not equal everywhere).
TEST(OpHarnessSelf, ReportsAMismatch) {
  OpCase c(OpKind::Exp, "self test");
  c.in(f32({4099}, -80, 80)).exact();
  bool any = false;
  for (const BackendResult& r : run_case(c, {}))
    if (r.backend != Backend::ref && r.claimed && !r.failures.empty()) any = true;
  EXPECT_TRUE(any) << "an exact comparison of a vectorized exp with std::exp found no difference";
}

}  // namespace
