// Cases of the sampling family (src/ir/ops/sampling.cpp): GridSample in every mode and padding rule, 2-D and 3-D,
// grid points outside the image; Col2Im with strides, dilations and pads. Reference kernels only: the cases check
// that each runs, runs again alike, and agrees with the executor's choice.
#include "harness.h"

namespace cuvil::optest {

void add_sampling_cases(Cases& cs) {
  for (const char* mode : {"linear", "nearest", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1}) {
        std::string what = std::string(mode) + ", " + pad + (align ? ", align_corners" : "");
        cs.add(OpKind::GridSample, what).in(f32({2, 3, 5, 7})).in(f32({2, 4, 6, 2}, -1.3, 1.3))
            .attr("mode", mode).attr("padding_mode", pad).attr("align_corners", align);
      }
  cs.add(OpKind::GridSample, "3-D linear").in(f32({1, 2, 3, 4, 5})).in(f32({1, 2, 3, 4, 3}, -1.2, 1.2));
  cs.add(OpKind::GridSample, "3-D nearest, border").in(f32({1, 2, 3, 4, 5})).in(f32({1, 2, 3, 4, 3}, -1.2, 1.2))
      .attr("mode", "nearest").attr("padding_mode", "border");
  cs.add(OpKind::GridSample, "f64").in(rnd(DType::f64, {1, 1, 4, 4})).in(rnd(DType::f64, {1, 3, 3, 2}, -1, 1));

  cs.add(OpKind::Col2Im, "plain").in(f32({1, 9, 15})).in(cst(vec<int64_t>({5, 7}))).in(cst(vec<int64_t>({3, 3})));
  cs.add(OpKind::Col2Im, "strides, dilations, pads").in(f32({2, 8, 15}))
      .in(cst(vec<int64_t>({5, 6}))).in(cst(vec<int64_t>({2, 2})))
      .attr("strides", Ints{2, 1}).attr("dilations", Ints{1, 2}).attr("pads", Ints{1, 0, 0, 1});
  cs.add(OpKind::Col2Im, "1-D").in(f32({1, 6, 4})).in(cst(vec<int64_t>({6}))).in(cst(vec<int64_t>({3})));
}

}  // namespace cuvil::optest
