// The model cache's graph key (artifact/cache_key.h): source locations do not count, the graph's structure and
// its weights each change their own hash, and a quoted name holding " loc(" is not taken for a location.
#include <gtest/gtest.h>

#include "artifact/cache_key.h"
#include "ir/text_format.h"

namespace cuvil {
namespace {

std::string model(const std::string& w, const std::string& op, const std::string& loc) {
  std::string big;
  for (int i = 0; i < 20; ++i) big += w;  // 20 floats: stored apart (not inline), so they count as weights
  return "graph @main(%x: f32[n, 20]) {\n"
         "  %w: f32[20] = constant 0x" + big + "\n"
         "  %y: f32[n, 20] = Add(%x, %w)" + loc + "\n"
         "  %z: f32[n, 20] = " + op + "(%y)" + loc + "\n"
         "  return %z\n}\n";
}

artifact::GraphKey key(const std::string& text) { return artifact::graph_key(*parse_graph(text)); }

TEST(CacheKeyTest, LocationsDoNotCountStructureAndWeightsApart) {
  artifact::GraphKey a = key(model("0000803f", "Relu", ""));
  artifact::GraphKey located = key(model("0000803f", "Relu", " loc(\"model.py\":12 \"conv1\")"));
  EXPECT_EQ(a.graph, located.graph);
  EXPECT_EQ(a.weights, located.weights);
  artifact::GraphKey weights = key(model("00000040", "Relu", ""));
  EXPECT_EQ(a.graph, weights.graph);
  EXPECT_NE(a.weights, weights.weights);
  artifact::GraphKey op = key(model("0000803f", "Neg", ""));
  EXPECT_NE(a.graph, op.graph);
  EXPECT_EQ(a.weights, op.weights);
}

TEST(CacheKeyTest, StripLocationsSkipsQuotedText) {
  EXPECT_EQ(artifact::strip_locations("%a = Relu(%b) loc(\"m.py\":3)\n%c = Neg(%a)\n"),
            "%a = Relu(%b)\n%c = Neg(%a)\n");
  // a name holding ` loc(` (quoted) stays; the real location after it goes
  EXPECT_EQ(artifact::strip_locations("%\"x loc(y\" = Relu(%b) loc(\"q \\\" loc(\")\n"), "%\"x loc(y\" = Relu(%b)\n");
  EXPECT_EQ(artifact::strip_locations("no newline at the end"), "no newline at the end");
}

}  // namespace
}  // namespace cuvil
