// Cases of the control family (src/ir/ops/control.cpp). If, Loop and Scan hold regions (nested graphs), which a
// one-node case cannot give: they are exempt (harness.cpp says where they are tested). Assert has none.
#include "harness.h"

namespace cuvil::optest {

void add_control_cases(Cases& cs) {
  cs.add(OpKind::Assert, "holds").in(val(scalar<bool>(true))).outs(0).attr("message", "x must be positive");
  cs.add(OpKind::Assert, "holds, a constant").in(cst(scalar<bool>(true))).outs(0);
}

}  // namespace cuvil::optest
