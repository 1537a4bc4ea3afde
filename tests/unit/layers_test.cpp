// The layers the build declares (CMakeLists.txt, cmake/CuvilLayers.cmake, written out as build/layers.txt) hold
// in the sources: every #include goes to the file's own layer or one below it, the declared dependencies have no
// cycle, and outside libraries' headers (LLVM, ONNX, oneDNN) appear only in the layers declared to use them. The
// checker is also run on small made-up trees, so it is shown to fail on each kind of violation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Layer {
  std::string name;
  std::vector<std::string> files_in, tree, deps, external;
  std::map<std::string, std::string> exceptions;  // layer -> why
};

std::vector<std::string> words(const std::string& s, char sep = ' ') {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string w;
  while (std::getline(in, w, sep)) {
    size_t b = w.find_first_not_of(" \t"), e = w.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(w.substr(b, e - b + 1));
  }
  return out;
}

// build/layers.txt: "name | files_in | tree | deps | external | to:why;to:why;"
std::vector<Layer> parse_layers(std::istream& in) {
  std::vector<Layer> layers;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    size_t at = 0;
    for (int i = 0; i < 6; ++i) {
      size_t bar = i < 5 ? line.find('|', at) : std::string::npos;
      f.push_back(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
      at = bar == std::string::npos ? line.size() : bar + 1;
    }
    Layer l;
    l.name = words(f[0]).at(0);
    l.files_in = words(f[1]);
    l.tree = words(f[2]);
    l.deps = words(f[3]);
    l.external = words(f[4]);
    for (const std::string& e : words(f[5], ';')) {
      size_t colon = e.find(':');
      l.exceptions[e.substr(0, colon)] = colon == std::string::npos ? "" : e.substr(colon + 1);
    }
    layers.push_back(l);
  }
  return layers;
}

// The rule of cmake/CuvilLayers.cmake: the layer listing the file's folder in FILES_IN, else the longest TREE.
const Layer* layer_of(const std::vector<Layer>& layers, const std::string& rel) {
  std::string dir = fs::path(rel).parent_path().string();
  const Layer* best = nullptr;
  size_t best_len = 0;
  for (const Layer& l : layers) {
    for (const std::string& d : l.files_in)
      if (d == dir) return &l;
    for (const std::string& root : l.tree)
      if ((dir == root || dir.rfind(root + "/", 0) == 0) && (!best || root.size() > best_len)) {
        best = &l;
        best_len = root.size();
      }
  }
  return best;
}

// Every violation, one message each; empty when the tree keeps its layers.
std::vector<std::string> check_layers(const fs::path& root, const std::vector<Layer>& layers) {
  std::vector<std::string> bad;
  std::map<std::string, const Layer*> by_name;
  for (const Layer& l : layers) by_name[l.name] = &l;

  // The declared graph: known names, no cycle (depth-first, colouring nodes on the current path).
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::function<void(const Layer&, std::vector<std::string>&)> visit = [&](const Layer& l,
                                                                           std::vector<std::string>& path) {
    state[l.name] = 1;
    path.push_back(l.name);
    std::vector<std::string> next = l.deps;
    for (const auto& [to, why] : l.exceptions) next.push_back(to);
    for (const std::string& d : next) {
      auto it = by_name.find(d);
      if (it == by_name.end()) {
        bad.push_back("layer " + l.name + " depends on undeclared layer " + d);
        continue;
      }
      if (state[d] == 1) {
        std::string cycle;
        for (size_t i = std::find(path.begin(), path.end(), d) - path.begin(); i < path.size(); ++i)
          cycle += path[i] + " -> ";
        bad.push_back("cycle among the layers: " + cycle + d);
      } else if (state[d] == 0) {
        visit(*it->second, path);
      }
    }
    path.pop_back();
    state[l.name] = 2;
  };
  for (const Layer& l : layers)
    if (state[l.name] == 0) {
      std::vector<std::string> path;
      visit(l, path);
    }
  if (!bad.empty()) return bad;

  // What each layer may include: itself and its dependencies, transitively.
  std::map<std::string, std::set<std::string>> below;
  std::function<const std::set<std::string>&(const std::string&)> closure =
      [&](const std::string& name) -> const std::set<std::string>& {
    auto it = below.find(name);
    if (it != below.end()) return it->second;
    std::set<std::string> s{name};
    for (const std::string& d : by_name.at(name)->deps) {
      const std::set<std::string>& sub = closure(d);
      s.insert(sub.begin(), sub.end());
    }
    return below[name] = s;
  };
  std::set<std::string> guarded;  // include prefixes of outside libraries some layer declares
  for (const Layer& l : layers) guarded.insert(l.external.begin(), l.external.end());

  std::set<std::pair<std::string, std::string>> used_exceptions;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root / "src"))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::string ext = file.extension().string();
    if (ext != ".h" && ext != ".cpp" && ext != ".def" && ext != ".inc") continue;
    std::string rel = fs::relative(file, root).string();
    const Layer* from = layer_of(layers, rel);
    if (!from) {
      bad.push_back(rel + " is in no layer");
      continue;
    }
    std::ifstream in(file);
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos || line.compare(b, 8, "#include") != 0) continue;
      size_t open = line.find_first_of("\"<", b + 8);
      if (open == std::string::npos) continue;
      size_t close = line.find(line[open] == '"' ? '"' : '>', open + 1);
      if (close == std::string::npos) continue;
      std::string inc = line.substr(open + 1, close - open - 1);
      std::string where = rel + ":" + std::to_string(line_no) + ": ";
      if (line[open] == '<') {
        for (const std::string& g : guarded)
          if (inc.rfind(g, 0) == 0 &&
              std::find(from->external.begin(), from->external.end(), g) == from->external.end())
            bad.push_back(where + "layer " + from->name + " includes <" + inc + ">, which only the layers declaring '" +
                          g + "' may use");
        continue;
      }
      if (!fs::exists(root / "src" / inc)) continue;  // not one of Cuvil's files
      const Layer* to = layer_of(layers, "src/" + inc);
      if (!to || closure(from->name).count(to->name)) continue;
      if (from->exceptions.count(to->name)) {
        used_exceptions.insert({from->name, to->name});
        continue;
      }
      bad.push_back(where + "layer " + from->name + " includes \"" + inc + "\" of layer " + to->name +
                    ", which is not below it");
    }
  }
  for (const Layer& l : layers)
    for (const auto& [to, why] : l.exceptions)
      if (!used_exceptions.count({l.name, to}))
        bad.push_back("the exception " + l.name + " -> " + to + " is no longer used: delete it from CMakeLists.txt");
  return bad;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& m : v) s += m + "\n";
  return s;
}

TEST(Layers, SourcesKeepTheDeclaredLayers) {
  std::ifstream in(fs::path(CUVIL_BINARY_DIR) / "layers.txt");
  ASSERT_TRUE(in) << "build/layers.txt is missing (written by cmake/CuvilLayers.cmake at configure time)";
  std::vector<Layer> layers = parse_layers(in);
  ASSERT_GE(layers.size(), 8u);
  std::vector<std::string> bad = check_layers(CUVIL_SOURCE_DIR, layers);
  EXPECT_TRUE(bad.empty()) << joined(bad);
}

TEST(Layers, RuntimeLayersNameNoCompilerLayer) {
  // The runtime library's layers must not reach the compiler's (front ends, passes, LLVM), even transitively.
  std::ifstream in(fs::path(CUVIL_BINARY_DIR) / "layers.txt");
  std::vector<Layer> layers = parse_layers(in);
  std::map<std::string, const Layer*> by_name;
  for (const Layer& l : layers) by_name[l.name] = &l;
  for (const char* runtime : {"support", "ir", "kernel_api", "ref_kernels", "kernels", "codegen", "runtime"}) {
    ASSERT_TRUE(by_name.count(runtime)) << runtime;
    std::set<std::string> seen;
    std::vector<std::string> todo{runtime};
    while (!todo.empty()) {
      std::string n = todo.back();
      todo.pop_back();
      if (!seen.insert(n).second) continue;
      for (const std::string& d : by_name.at(n)->deps) todo.push_back(d);
    }
    for (const char* compiler : {"frontend", "passes", "llvm"}) EXPECT_FALSE(seen.count(compiler)) << runtime;
  }
}

// A made-up tree: layers low <- mid <- high, files given as path -> contents.
using Files = std::map<std::string, std::string>;
struct Tree {
  fs::path root;
  Tree(const Tree&) = delete;
  explicit Tree(const Files& files) {
    root = fs::temp_directory_path() / ("cuvil_layers_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    for (const auto& [path, text] : files) {
      fs::create_directories((root / path).parent_path());
      std::ofstream(root / path) << text;
    }
  }
  ~Tree() { fs::remove_all(root); }
};

std::vector<Layer> three_layers(const std::string& extra = "") {
  std::istringstream in("low | | src/low | | |\n"
                        "mid | | src/mid | low | ext/ |\n"
                        "high | src/mid/top | src/high | mid | |" + extra + "\n");
  return parse_layers(in);
}

TEST(Layers, CheckerAcceptsDownwardIncludes) {
  Tree t(Files{{"src/low/a.h", "int a();\n"},
          {"src/mid/b.cpp", "#include \"low/a.h\"\n#include <ext/x.h>\n"},
          {"src/mid/top/c.cpp", "#include \"mid/b.h\"\n#include \"low/a.h\"\n"},
          {"src/mid/b.h", ""}});
  EXPECT_EQ(joined(check_layers(t.root, three_layers())), "");
}

TEST(Layers, CheckerFailsOnAnUpwardInclude) {
  Tree t(Files{{"src/low/a.cpp", "#include \"mid/b.h\"\n"}, {"src/mid/b.h", ""}});
  std::vector<std::string> bad = check_layers(t.root, three_layers());
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_NE(bad[0].find("src/low/a.cpp:1: layer low includes \"mid/b.h\" of layer mid"), std::string::npos) << bad[0];
}

TEST(Layers, CheckerPlacesFilesInByFolder) {
  // src/mid/top is the layer high (FILES_IN), though under mid's tree: mid may not include it.
  Tree t(Files{{"src/mid/b.cpp", "#include \"mid/top/c.h\"\n"}, {"src/mid/top/c.h", ""}});
  std::vector<std::string> bad = check_layers(t.root, three_layers());
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_NE(bad[0].find("of layer high"), std::string::npos) << bad[0];
}

TEST(Layers, CheckerFailsOnACycle) {
  std::istringstream in("a | | src/a | b | |\nb | | src/b | a | |\n");
  Tree t(Files{{"src/a/x.h", ""}});
  std::vector<std::string> bad = check_layers(t.root, parse_layers(in));
  ASSERT_FALSE(bad.empty());
  EXPECT_NE(bad[0].find("cycle among the layers"), std::string::npos) << bad[0];
}

TEST(Layers, CheckerFailsOnAnOutsideHeaderInAnotherLayer) {
  Tree t(Files{{"src/high/h.cpp", "#include <ext/x.h>\n"}});
  std::vector<std::string> bad = check_layers(t.root, three_layers());
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_NE(bad[0].find("includes <ext/x.h>"), std::string::npos) << bad[0];
}

TEST(Layers, CheckerFailsOnAFileInNoLayer) {
  Tree t(Files{{"src/stray/s.cpp", ""}});
  std::vector<std::string> bad = check_layers(t.root, three_layers());
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_NE(bad[0].find("src/stray/s.cpp is in no layer"), std::string::npos) << bad[0];
}

TEST(Layers, ExceptionsAllowTheirCrossingAndMustStayInUse) {
  Tree used(Files{{"src/low/a.cpp", "#include \"high/h.h\"\n"}, {"src/high/h.h", ""}});
  std::istringstream in("low | | src/low | | | high:being removed;\nhigh | | src/high | | |\n");
  std::vector<Layer> layers = parse_layers(in);
  EXPECT_EQ(joined(check_layers(used.root, layers)), "");
  Tree unused(Files{{"src/low/a.cpp", ""}, {"src/high/h.h", ""}});
  std::vector<std::string> bad = check_layers(unused.root, layers);
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_NE(bad[0].find("exception low -> high is no longer used"), std::string::npos) << bad[0];
}

}  // namespace
