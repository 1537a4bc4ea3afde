// Cases of the strings family (src/ir/ops/strings.cpp), and the ops that take strings beside numbers (Equal,
// Where, Gather, Concat, Transpose, Cast): multi-byte UTF-8, empty strings, broadcasting. Only the reference
// kernels take strings; the other backends must decline every case (a kernel that read the elements as 8-byte
// integers would compare pointers), which the `auto` backend's agreement checks end to end.
#include "harness.h"

namespace cuvil::optest {

namespace {

Tensor text(std::vector<std::string> v, Ints shape) { return Tensor::strings(std::move(v), std::move(shape)); }

const std::vector<std::string> kWords = {"Hello world", "", "  two  spaces ", "a,b,,c", "ÉCOLE straße", "b",
                                         "日本語 テキスト", "tab\tand\nnewline", "émile@gmail.com", "b", "x.y.z", "-7.5"};

}  // namespace

void add_strings_cases(Cases& cs) {
  Tensor words = text(kWords, {3, 4});
  cs.add(OpKind::StringConcat, "broadcast rows").in(val(words)).in(val(text({"!", "", "ü", "-"}, {4})));
  cs.add(OpKind::StringConcat, "scalars").in(val(text({"ab"}, {}))).in(val(text({"çd"}, {})));
  for (const char* sep : {"", " ", ",", "--"})
    for (int64_t maxsplit : {int64_t(-1), int64_t(1)})
      cs.add(OpKind::StringSplit, std::string("delimiter '") + sep + "', maxsplit " + std::to_string(maxsplit))
          .in(val(words))
          .attr("delimiter", sep)
          .attr("maxsplit", maxsplit)
          .outs(2);
  cs.add(OpKind::StringSplit, "empty input").in(val(text({}, {0, 2}))).outs(2);
  for (const char* action : {"NONE", "LOWER", "UPPER"})
    for (int64_t sensitive : {0, 1})
      cs.add(OpKind::StringNormalizer, std::string(action) + (sensitive ? ", case-sensitive" : ""))
          .in(val(text({"Monday", "monday", "ÉCOLE", "straße", "Tuesday", "ǅ"}, {1, 6})))
          .attr("case_change_action", action)
          .attr("is_case_sensitive", sensitive)
          .attr("stopwords", std::vector<std::string>{"monday", "TUESDAY"});
  cs.add(OpKind::StringNormalizer, "every word stopped")
      .in(val(text({"a", "A"}, {2})))
      .attr("stopwords", std::vector<std::string>{"a"});
  for (const char* pattern : {R"(\w+)", R"([^@]+@\w+\.com)", "(?i)B", "", R"(\p{Han}+.*)"})
    cs.add(OpKind::RegexFullMatch, std::string("pattern ") + pattern).in(val(words)).attr("pattern", pattern);

  // Ops that take strings beside numbers.
  cs.add(OpKind::Equal, "strings, broadcast").in(val(words)).in(val(text({"b", "", "x.y.z", "B"}, {4})));
  cs.add(OpKind::Where, "strings")
      .in(rnd(DType::boolean, {3, 4}, -1, 1))
      .in(val(words))
      .in(val(text({"else"}, {1})));
  cs.add(OpKind::Gather, "strings").in(val(words)).in(val(vec<int64_t>({2, 0, -1, 2}))).attr("axis", int64_t(0));
  cs.add(OpKind::Concat, "strings").in(val(words)).in(val(text({"p", "q", "r"}, {3, 1}))).attr("axis", int64_t(1));
  cs.add(OpKind::Transpose, "strings").in(val(words)).attr("perm", Ints{1, 0});
  cs.add(OpKind::Cast, "strings to f32")
      .in(val(text({"1.5", "-0.25", "1e-3", "+4", "INF", "nan"}, {2, 3})))
      .attr("to", int64_t(1));
  cs.add(OpKind::Cast, "f32 to strings").in(f32({5, 3}, -1e3, 1e3)).attr("to", int64_t(8));
  cs.add(OpKind::Cast, "i64 to strings").in(i64({7}, -1e6, 1e6)).attr("to", int64_t(8));
}

}  // namespace cuvil::optest
