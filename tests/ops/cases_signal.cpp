// Cases of the signal family (src/ir/ops/signal.cpp): DFT of real and complex signals along inner and outer
// axes, one-sided, inverse, inverse one-sided, and dft_length shorter and longer than the signal (odd lengths).
#include "harness.h"

namespace cuvil::optest {

void add_signal_cases(Cases& cs) {
  for (int64_t inverse : {0, 1})
    for (int64_t onesided : {0, 1}) {
      std::string w = std::string(inverse ? "inverse" : "forward") + (onesided ? ", one-sided" : "");
      cs.add(OpKind::DFT, w + ", complex").in(f32({2, 7, 3, 2})).in(none()).in(cst(scalar<int64_t>(1)))
          .attr("inverse", inverse).attr("onesided", onesided).tol(DType::f32, {1e-5, 1e-5});
      cs.add(OpKind::DFT, w + ", length 9").in(f32({3, 6, 2})).in(cst(scalar<int64_t>(9))).in(none())
          .attr("inverse", inverse).attr("onesided", onesided).tol(DType::f32, {1e-5, 1e-5});
    }
  cs.add(OpKind::DFT, "real, length 4 of 10").in(f32({10, 1})).in(cst(scalar<int32_t>(4))).in(cst(scalar<int64_t>(0)))
      .tol(DType::f32, {1e-5, 1e-5});
  cs.add(OpKind::DFT, "f64 one-sided").in(rnd(DType::f64, {2, 11, 1})).attr("onesided", int64_t(1));
}

}  // namespace cuvil::optest
