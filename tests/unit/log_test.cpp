// CUVIL_LOG's topic list (support/log.h): whole items only, `all` names every topic.
#include <gtest/gtest.h>

#include "support/log.h"

namespace cuvil {
namespace {

TEST(Log, TopicsAreWholeItemsOfTheList) {
  EXPECT_TRUE(log_topic_in("prepack", "prepack"));
  EXPECT_TRUE(log_topic_in("cache,prepack", "prepack"));
  EXPECT_TRUE(log_topic_in("cache , prepack ,time", "prepack"));
  EXPECT_TRUE(log_topic_in("cache, time", "time"));
  EXPECT_TRUE(log_topic_in("all", "time"));
  EXPECT_TRUE(log_topic_in("x,all", "prepack"));
  EXPECT_FALSE(log_topic_in("", "prepack"));
  EXPECT_FALSE(log_topic_in("prepacked", "prepack"));
  EXPECT_FALSE(log_topic_in("pre,pack", "prepack"));
  EXPECT_FALSE(log_topic_in("cache,weights", "time"));
  EXPECT_FALSE(log_topic_in("time", ""));
  EXPECT_FALSE(log_topic_in(",,", "prepack"));
}

TEST(Log, FixedMilliseconds) {
  EXPECT_EQ(fixed_ms(12.345), "12.3");
  EXPECT_EQ(fixed_ms(0), "0.0");
  auto [w0, c0] = wall_and_cpu_ms();
  auto [w1, c1] = wall_and_cpu_ms();
  EXPECT_GE(w1, w0);
  EXPECT_GE(c1, c0);
}

}  // namespace
}  // namespace cuvil
