// Op definitions (arity, attributes, shape inference) of the strings family: StringConcat, StringSplit,
// StringNormalizer, RegexFullMatch. Their tensors hold DType::str elements (Tensor::strings); the reference
// kernels (src/kernels/ref/strings.cpp) are the only ones that run them.
#include <re2/re2.h>

#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

void expect_strings(const InferContext& c, size_t i) { infer::expect_dtype(c, i, {DType::str}); }

}  // namespace

CUVIL_DEFINE_OP(StringConcat) {
  s.inputs(2, 2).outputs(1, 1).infer_with([](InferContext& c) {
    expect_strings(c, 0);
    expect_strings(c, 1);
    infer::broadcast_inputs(c);
  });
}

// Outputs: the pieces, [X's dims..., the most pieces any element splits into] (padded with empty strings), and
// each element's number of pieces (i64, X's shape). No delimiter (or an empty one) splits at runs of whitespace,
// as Python's str.split() does (ONNX Runtime: at spaces only); `maxsplit` (absent: no limit) caps the splits per
// element. An empty string splits into no pieces (ONNX Runtime's count; Python's str.split(sep) gives one).
CUVIL_DEFINE_OP(StringSplit) {
  s.attr("delimiter", AttrKind::String, "");
  s.attr("maxsplit", AttrKind::Int, int64_t(-1));  // Cuvil's absent: -1
  s.inputs(1, 1).outputs(1, 2).infer_with([](InferContext& c) {
    expect_strings(c, 0);
    const Shape& x = c.input_shape(0);
    if (!x.rank_known()) {
      c.set_output(0, DType::str, Shape::unknown_rank());
      if (c.num_outputs() > 1) c.set_output(1, DType::i64, Shape::unknown_rank());
      return;
    }
    std::vector<Dim> dims = x.dims();
    dims.push_back(c.fresh_dim());
    c.set_output(0, DType::str, Shape(dims));
    if (c.num_outputs() > 1) c.set_output(1, DType::i64, x);
  });
}

// X is [C] or [1, C]; the stop words go first, then the case changes. Removing every element leaves one empty
// string ([1] or [1, 1]), as ONNX says.
CUVIL_DEFINE_OP(StringNormalizer) {
  s.attr("case_change_action", AttrKind::String, "NONE");
  s.attr("is_case_sensitive", AttrKind::Int, int64_t(0));
  s.attr("locale", AttrKind::String, "");
  s.attr("stopwords", AttrKind::Strings, std::vector<std::string>{});
  s.inputs(1, 1).outputs(1, 1).infer_with([](InferContext& c) {
    expect_strings(c, 0);
    const std::string& action = c.s("case_change_action");
    if (action != "NONE" && action != "LOWER" && action != "UPPER")
      c.error("attribute 'case_change_action' must be NONE, LOWER or UPPER, got '", action, "'");
    const std::string& locale = c.s("locale");
    if (!locale.empty() && locale != "en_US" && locale != "en_US.UTF-8" && locale != "C" && locale != "C.UTF-8")
      c.error("attribute 'locale' '", locale, "' is not supported: Cuvil changes case by Unicode's simple case "
              "mappings (en_US, C)");
    const Shape& x = c.input_shape(0);
    if (!x.rank_known()) {
      c.set_output(0, DType::str, Shape::unknown_rank());
      return;
    }
    if (x.rank() == 1) {
      c.set_output(0, DType::str, Shape(std::vector<Dim>{c.fresh_dim()}));
    } else if (x.rank() == 2 && x[0] == Dim(1)) {
      c.set_output(0, DType::str, Shape(std::vector<Dim>{Dim(1), c.fresh_dim()}));
    } else {
      c.error("input must be [C] or [1, C], got shape ", x.str());
    }
  });
}

CUVIL_DEFINE_OP(RegexFullMatch) {
  s.required_attr("pattern", AttrKind::String);
  s.inputs(1, 1).outputs(1, 1).infer_with([](InferContext& c) {
    expect_strings(c, 0);
    RE2 re(c.s("pattern"), RE2::Quiet);
    if (!re.ok()) c.error("attribute 'pattern' is not a valid RE2 expression: ", re.error());
    c.set_output(0, DType::boolean, c.input_shape(0));
  });
}

}  // namespace cuvil
