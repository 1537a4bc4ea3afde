#include <gtest/gtest.h>

#include "ir/dim.h"

using namespace cuvil;

TEST(Dim, CanonicalFormMakesEqualExpressionsEqual) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  EXPECT_EQ(b * 2 + 1, 1 + 2 * b);
  EXPECT_EQ((b + s) * 2, s * 2 + b * 2);
  EXPECT_EQ(b - b, Dim(0));
  EXPECT_TRUE((b - b).is_const());
  EXPECT_NE(b, s);
}
