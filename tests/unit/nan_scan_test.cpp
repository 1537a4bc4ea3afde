// cpu::any_nan / any_nan_bf16 (kernels/cpu/nan_scan.h), which fast max pools check before dropping NaN: a NaN
// anywhere is found (first, last, on both sides of the scan's block boundaries, negative and signalling ones), and
// infinities, the largest finite values and empty ranges are not NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/nan_scan.h"

using namespace cuvil;

namespace {

TEST(NanScan, Bf16FindsEveryNaNAndOnlyNaN) {
  const int64_t n = 3 * 8192 + 37;  // several of the scan's blocks and a tail
  std::vector<uint16_t> v(size_t(n), 0x3f80);  // 1.0
  v[5] = 0x7f80, v[6] = 0xff80, v[7] = 0x7f7f, v[8] = 0xff7f;  // +-inf, +-largest finite
  EXPECT_FALSE(cpu::any_nan_bf16(v.data(), n));
  EXPECT_FALSE(cpu::any_nan_bf16(v.data(), 0));
  for (int64_t at : {int64_t(0), int64_t(8191), int64_t(8192), int64_t(2 * 8192 + 1), n - 1})
    for (uint16_t nan : {uint16_t(0x7fc0), uint16_t(0xffc0), uint16_t(0x7f81), uint16_t(0xffff)}) {
      SCOPED_TRACE(testing::Message() << "NaN 0x" << std::hex << nan << std::dec << " at " << at);
      std::vector<uint16_t> w = v;
      w[size_t(at)] = nan;
      EXPECT_TRUE(cpu::any_nan_bf16(w.data(), n));
      EXPECT_FALSE(cpu::any_nan_bf16(w.data(), at)) << "found before it";
      EXPECT_TRUE(cpu::any_nan_bf16(w.data() + at, 1));
    }
}

TEST(NanScan, F32FindsEveryNaNAndOnlyNaN) {
  const int64_t n = 3 * 4096 + 11;
  std::vector<float> v(size_t(n), 1.f);
  v[3] = std::numeric_limits<float>::infinity(), v[4] = -v[3], v[9] = std::numeric_limits<float>::max();
  EXPECT_FALSE(cpu::any_nan(v.data(), n));
  uint32_t sig = 0x7f800001u, neg = 0xffc00000u;
  float snan, nnan;
  std::memcpy(&snan, &sig, 4);
  std::memcpy(&nnan, &neg, 4);
  for (int64_t at : {int64_t(0), int64_t(4095), int64_t(4096), n - 1})
    for (float nan : {std::nanf(""), snan, nnan}) {
      SCOPED_TRACE(testing::Message() << "at " << at);
      std::vector<float> w = v;
      w[size_t(at)] = nan;
      EXPECT_TRUE(cpu::any_nan(w.data(), n));
      EXPECT_FALSE(cpu::any_nan(w.data(), at));
    }
}

}  // namespace
