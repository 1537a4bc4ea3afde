#include <gtest/gtest.h>

#include "ir/dim.h"
#include "test_util.h"

using namespace cuvil;

TEST(Dim, CanonicalFormMakesEqualExpressionsEqual) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  EXPECT_EQ(b * 2 + 1, 1 + 2 * b);
  EXPECT_EQ((b + s) * 2, s * 2 + b * 2);
  EXPECT_EQ(b * s, s * b);
  EXPECT_EQ(b - b, Dim(0));
  EXPECT_TRUE((b - b).is_const());
  EXPECT_NE(b, s);
  EXPECT_NE(b * 2, b * 3);
}

TEST(Dim, DivisionSimplifiesOnlyWhenExact) {
  Dim b = Dim::symbol("b");
  EXPECT_EQ(Dim::floordiv(b * 6 + 4, 2), b * 3 + 2);
  EXPECT_FALSE(Dim::floordiv(b * 6 + 3, 2).is_const());
  EXPECT_EQ(Dim::floordiv(b, b), Dim(1));
  EXPECT_EQ(Dim::floordiv(Dim(7), Dim(2)), Dim(3));
  EXPECT_EQ(Dim::floordiv(Dim(-7), Dim(2)), Dim(-4));  // floor, not truncation
  EXPECT_EQ(Dim::ceildiv(Dim(7), Dim(2)), Dim(4));
  EXPECT_EQ(Dim::mod(Dim(-7), Dim(3)), Dim(2));
  EXPECT_EQ(Dim::mod(b * 4, 2), Dim(0));
}

TEST(Dim, MinMaxAbsorb) {
  Dim s = Dim::symbol("seq");
  EXPECT_EQ(Dim::max(Dim::min(64, s), s), s);  // a clamped slice bound broadcast against the full dim
  EXPECT_EQ(Dim::max(s, Dim::min(s, 64)), s);
  EXPECT_EQ(Dim::min(Dim::max(s, 1), s), s);
  EXPECT_NE(Dim::max(Dim::min(64, s), Dim::symbol("other")), s);
}

TEST(Dim, EvaluatesUnderBindings) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  Dim e = Dim::floordiv(b * s + 3, 2) + Dim::max(b, s);
  SymbolBindings bind{{"batch", 3}, {"seq", 5}};
  EXPECT_EQ(e.eval(bind), (3 * 5 + 3) / 2 + 5);
  EXPECT_FALSE(e.eval({{"batch", 3}}).has_value());
  EXPECT_FALSE(Dim::floordiv(b, s).eval({{"batch", 1}, {"seq", 0}}).has_value());  // division by zero
  std::set<std::string> syms;
  e.collect_symbols(syms);
  EXPECT_EQ(syms, (std::set<std::string>{"batch", "seq"}));
}

TEST(Dim, TextRoundTrips) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  for (Dim d : {Dim(0), Dim(-3), b, b * 2 + 1, b - s * 3, Dim::floordiv(b + 1, 2) * s, Dim::mod(b, s) + Dim::min(b, 4),
                Dim::ceildiv(b * s, Dim::symbol("_7"))}) {
    Dim p = Dim::parse(d.str());
    EXPECT_EQ(p, d) << d.str();
    EXPECT_EQ(p.str(), d.str());
  }
}

TEST(Dim, ParseErrorsAreClear) {
  EXPECT_CUVIL_ERROR(Dim::parse("batch +"), "bad dim expression");
  EXPECT_CUVIL_ERROR(Dim::parse("foo(a, b)"), "unknown function");
  EXPECT_CUVIL_ERROR(Dim::parse("(a"), "expected ')'");
  EXPECT_CUVIL_ERROR(Dim::parse("99999999999999999999"), "too large");
}
