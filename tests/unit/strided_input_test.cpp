// Strided inputs: copy_strided against a naive index walk over random shapes and strides (negative, zero, size-1
// dims, every element size), and Executor::run_strided: contiguous views used in place, strided ones copied once
// per run into the plan's buffer, results equal to running on a contiguous copy, bad views refused.
#include <gtest/gtest.h>

#include <random>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "runtime/strided_copy.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

// The element of row-major index `i` of a view (shape, strides), as an offset in elements.
int64_t view_offset(int64_t i, const Ints& shape, const Ints& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

template <class T>
void check_copy(std::mt19937& rng, const Ints& shape, const Ints& strides) {
  // A source buffer large enough for every offset the view reaches, with the view's origin inside it.
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t span = (shape[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  std::vector<T> src(size_t(hi - lo + 1));
  for (size_t i = 0; i < src.size(); ++i) src[i] = T(rng());
  const T* origin = src.data() - lo;
  int64_t n = shape_numel(shape);
  std::vector<T> got(size_t(n) + 1, T(0)), want(size_t(n) + 1, T(0));
  got.back() = want.back() = T(77);  // guard: nothing is written past the end
  copy_strided(got.data(), origin, shape, strides, sizeof(T));
  for (int64_t i = 0; i < n; ++i) want[size_t(i)] = origin[view_offset(i, shape, strides)];
  ASSERT_EQ(got, want) << "shape " << shape_str(shape) << " strides " << shape_str(strides) << " elem " << sizeof(T);
}

TEST(StridedInput, CopyMatchesNaiveWalk) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    size_t rank = size_t(rng() % 5);
    Ints shape(rank), strides(rank);
    for (size_t d = 0; d < rank; ++d) {
      shape[d] = int64_t(rng() % 6) + (rng() % 4 == 0 ? 0 : 1);  // 0..6, sometimes empty
      strides[d] = int64_t(rng() % 41) - 20;                       // any sign, 0 included
    }
    switch (trial % 4) {
      case 0: check_copy<uint8_t>(rng, shape, strides); break;
      case 1: check_copy<uint16_t>(rng, shape, strides); break;
      case 2: check_copy<float>(rng, shape, strides); break;
      default: check_copy<int64_t>(rng, shape, strides); break;
    }
  }
  // Large enough to be split over threads; a transposed and a sliced view.
  check_copy<float>(rng, {300, 257}, {1, 300});
  check_copy<float>(rng, {64, 1000}, {2000, 2});
}

TEST(StridedInput, ContiguityAllowsAnyStrideOnUnitDims) {
  EXPECT_TRUE(is_contiguous({2, 3}, {3, 1}));
  EXPECT_TRUE(is_contiguous({2, 1, 3}, {3, 99, 1}));
  EXPECT_TRUE(is_contiguous({0, 3}, {5, 7}));
  EXPECT_TRUE(is_contiguous({}, {}));
  EXPECT_FALSE(is_contiguous({2, 3}, {1, 2}));
  EXPECT_FALSE(is_contiguous({2, 3}, {4, 1}));
  EXPECT_FALSE(is_contiguous({3}, {0}));
}

Tensor ramp(Ints shape) {
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i % 13) - 6.f;
  return t;
}

TEST(StridedInput, RunStridedCopiesOnlyNonContiguousInputs) {
  auto g = parse_checked(R"(graph @main(%x: f32[n, 4], %y: f32[n, 4]) {
  %s: f32[n, 4] = Sub(%x, %y)
  %r: f32[n, 4] = Relu(%s)
  return %r
})");
  Executor e(g);
  // A batch of 8 rows from which windows are taken: rows 2..5 (contiguous, offset) and every other row.
  Tensor big = ramp({8, 4});
  const float* base = big.data<float>();
  Tensor y = ramp({3, 4});
  StridedInput window{DType::f32, {3, 4}, {4, 1}, base + 2 * 4};
  StridedInput every_other{DType::f32, {3, 4}, {8, 1}, base};
  StridedInput dense_y{DType::f32, {3, 4}, {}, y.raw()};

  auto expect_run = [&](const StridedInput& x, int64_t staged) {
    Tensor xc = Tensor::zeros(DType::f32, x.shape);
    copy_strided(xc.raw(), x.data, x.shape, x.strides.empty() ? Ints{4, 1} : x.strides, 4);
    Tensor want = e.run({xc, y})[0];
    Tensor got = e.run_strided({x, dense_y})[0];
    EXPECT_EQ(e.stats().staged_inputs, staged);
    EXPECT_TRUE(got.same_bytes(want));
  };
  expect_run(window, 0);
  expect_run(every_other, 1);
  expect_run(every_other, 1);  // the plan's buffer again
  // A transposed view of a [4, 3] buffer as [3, 4].
  Tensor t = ramp({4, 3});
  expect_run(StridedInput{DType::f32, {3, 4}, {1, 3}, t.raw()}, 1);
  // Both inputs strided, a new signature (n = 2).
  StridedInput two{DType::f32, {2, 4}, {16, 1}, base};
  Tensor got = e.run_strided({two, two})[0];
  EXPECT_EQ(e.stats().staged_inputs, 2);
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_EQ(got.data<float>()[i], 0.f);
}

TEST(StridedInput, BadViewsAreInputErrors) {
  auto g = parse_checked(R"(graph @main(%x: f32[n, 4]) {
  %r: f32[n, 4] = Relu(%x)
  return %r
})");
  Executor e(g);
  Tensor x = ramp({2, 4});
  EXPECT_THROW(e.run_strided({StridedInput{DType::f32, {2, 4}, {1}, x.raw()}}), InputError);
  EXPECT_THROW(e.run_strided({StridedInput{DType::f32, {2, 4}, {}, nullptr}}), InputError);
  EXPECT_THROW(e.run_strided({StridedInput{DType::i32, {2, 4}, {}, x.raw()}}), InputError);
  EXPECT_THROW(e.run_strided({StridedInput{DType::f32, {2, 5}, {5, 1}, x.raw()}}), InputError);
  // An empty view needs no data.
  EXPECT_EQ(e.run_strided({StridedInput{DType::f32, {0, 4}, {4, 1}, nullptr}})[0].numel(), 0);
}

}  // namespace
