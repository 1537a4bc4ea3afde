// Cases of the lookup family (src/ir/ops/lookup.cpp): LabelEncoder from strings, integers and floats to each
// other, with keys missing from the input, duplicate keys and NaN elements (the default).
#include <cmath>

#include "harness.h"

namespace cuvil::optest {

void add_lookup_cases(Cases& cs) {
  Tensor names = Tensor::strings({"cat", "dog", "émeu", "dog"}, {4});
  cs.add(OpKind::LabelEncoder, "strings to i64, a duplicate key")
      .in(val(Tensor::strings({"dog", "bird", "émeu", "", "cat", "dog"}, {2, 3})))
      .attr("keys", names)
      .attr("values", vec<int64_t>({3, 1, 7, 9}))
      .attr("default", scalar<int64_t>(-1));
  cs.add(OpKind::LabelEncoder, "i64 to strings")
      .in(val(vec<int64_t>({5, 2, 5, -1, 0})))
      .attr("keys", vec<int64_t>({5, 2, -1}))
      .attr("values", Tensor::strings({"five", "two", "minus one"}, {3}))
      .attr("default", Tensor::strings({"_Unused"}, {}));
  cs.add(OpKind::LabelEncoder, "f32 to f32, NaN takes the default")
      .in(val(vec<float>({1.f, 0.5f, NAN, 2.f, -0.f})))
      .attr("keys", vec<float>({0.5f, 1.f, 0.f}))
      .attr("values", vec<float>({10.f, 20.f, 30.f}))
      .attr("default", scalar<float>(-1.f));
  cs.add(OpKind::LabelEncoder, "f64 input, f32 keys")
      .in(val(vec<double>({1.0, 0.5, 0.1})))
      .attr("keys", vec<float>({0.5f, 1.f}))
      .attr("values", vec<int16_t>({4, 5}))
      .attr("default", scalar<int16_t>(0));
}

}  // namespace cuvil::optest
