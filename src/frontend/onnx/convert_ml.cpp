// The ai.onnx.ml ops that scikit-learn pipelines exported to ONNX put around a model, written as Cuvil ops with
// ONNX-ML's semantics (onnx/defs/traditionalml/defs.cc), for numeric tensors:
//
//   Scaler             (x - offset) * scale
//   Normalizer         rows divided by their MAX, L1 or L2 norm
//   Binarizer          x > threshold ? 1 : 0, in x's type
//   Imputer            NaN (or replaced_value_float) -> imputed_value_floats (one, or one per feature)
//   ArrayFeatureExtractor  the columns the index tensor names (last axis)
//   FeatureVectorizer  inputs concatenated along axis 1 (inputdimensions as given)
//   LinearRegressor    x W^T + intercepts (post_transform NONE)
//   LinearClassifier   scores = x W^T + intercepts, post_transform NONE/LOGISTIC/SOFTMAX, labels = the class
//                      labels (integers or strings) of the best score (a single class: the score's sign, as ONNX
//                      Runtime)
//   LabelEncoder       Cuvil's LabelEncoder (src/ir/ops/lookup.cpp): every version's keys, values and default as
//                      three tensors
//
// Tree ensembles are in convert_trees.cpp. ZipMap's maps and SVMs are refused.
#include <cmath>
#include <optional>
#include <type_traits>

#include "frontend/onnx/convert_ml_util.h"

namespace cuvil {

namespace {

using onnx_ml::as_f32;
using onnx_ml::no_more_attrs;
using onnx_ml::string_attr;
using onnx_ml::temp;

Value* required(ConvertContext& c, size_t i) {
  Value* v = c.input(i);
  if (!v) c.error("input ", i, " is required");
  return v;
}

std::vector<float> floats_attr(ConvertContext& c, const char* name) {
  auto a = c.take_attr(name);
  if (!a) return {};
  if (a->kind() != AttrKind::Floats) c.error("attribute '", name, "' must be floats");
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

Value* f32_row(ConvertContext& c, const std::vector<float>& v, const char* hint) {
  return c.const_tensor(Tensor::from_vector<float>(v, {int64_t(v.size())}), hint);
}

void convert_scaler(ConvertContext& c) {
  Value* x = as_f32(c, required(c, 0));
  std::vector<float> offset = floats_attr(c, "offset"), scale = floats_attr(c, "scale");
  no_more_attrs(c);
  Value* y = offset.empty() ? x : temp(c, OpKind::Sub, {x, f32_row(c, offset, "offset")});
  c.emit_final(scale.empty() ? OpKind::Identity : OpKind::Mul,
               scale.empty() ? std::vector<Value*>{y} : std::vector<Value*>{y, f32_row(c, scale, "scale")}, {});
}

void convert_normalizer(ConvertContext& c) {
  Value* x = as_f32(c, required(c, 0));
  std::string norm = string_attr(c, "norm", "MAX");
  no_more_attrs(c);
  OpKind reduce = norm == "MAX" ? OpKind::ReduceMax : norm == "L1" ? OpKind::ReduceL1 : OpKind::ReduceL2;
  if (norm != "MAX" && norm != "L1" && norm != "L2") c.error("norm '", norm, "' must be MAX, L1 or L2");
  Value* by = temp(c, reduce, {x, c.const_i64({-1}, "axis")}, {{"keepdims", Attribute(int64_t(1))}});
  c.emit_final(OpKind::Div, {x, by}, {});
}

void convert_binarizer(ConvertContext& c) {
  Value* x = required(c, 0);
  double threshold = 0;
  if (auto t = c.take_attr("threshold")) threshold = t->kind() == AttrKind::Float ? t->f() : double(t->i());
  no_more_attrs(c);
  Value* th = temp(c, OpKind::CastLike, {c.const_tensor(Tensor::scalar<float>(float(threshold)), "threshold"), x});
  c.emit_final(OpKind::CastLike, {temp(c, OpKind::Greater, {x, th}), x}, {});
}

void convert_imputer(ConvertContext& c) {
  Value* x = required(c, 0);
  std::vector<float> imputed = floats_attr(c, "imputed_value_floats");
  std::vector<float> replaced;
  if (auto r = c.take_attr("replaced_value_float"))
    replaced = {float(r->kind() == AttrKind::Float ? r->f() : double(r->i()))};
  if (c.take_attr("imputed_value_int64s") || c.take_attr("replaced_value_int64"))
    c.error("integer imputation is not supported");
  no_more_attrs(c);
  if (imputed.empty()) c.error("imputed_value_floats is required");
  Value* fill = f32_row(c, imputed, "imputed");
  Value* hit = replaced.empty() || std::isnan(replaced[0])
                   ? temp(c, OpKind::IsNaN, {x})
                   : temp(c, OpKind::Equal, {x, c.const_tensor(Tensor::scalar<float>(replaced[0]), "replaced")});
  c.emit_final(OpKind::Where, {hit, fill, x}, {});
}

void convert_array_feature_extractor(ConvertContext& c) {
  Value* x = required(c, 0);
  Value* idx = required(c, 1);
  no_more_attrs(c);
  // Gather along the last axis: an ellipsis-free Gather needs the axis number, -1 is accepted by Gather.
  Value* flat = temp(c, OpKind::Reshape, {idx, c.const_i64({-1}, "flat")});
  c.emit_final(OpKind::Gather, {x, flat}, {{"axis", Attribute(int64_t(-1))}});
}

void convert_feature_vectorizer(ConvertContext& c) {
  c.take_attr("inputdimensions");
  no_more_attrs(c);
  std::vector<Value*> parts;
  for (Value* v : c.inputs()) {
    if (!v) c.error("inputs may not be omitted");
    parts.push_back(as_f32(c, v));
  }
  c.emit_final(OpKind::Concat, parts, {{"axis", Attribute(int64_t(1))}});
}

// x [N, F] @ W^T [F, targets] + b
Value* linear(ConvertContext& c, Value* x, const std::vector<float>& coef, const std::vector<float>& intercepts,
              int64_t targets) {
  if (targets < 1 || coef.size() % size_t(targets) != 0)
    c.error(coef.size(), " coefficients do not divide into ", targets, " rows");
  int64_t features = int64_t(coef.size()) / targets;
  Value* w = c.const_tensor(Tensor::from_vector<float>(coef, {targets, features}), "coefficients");
  Value* y = temp(c, OpKind::Gemm, {x, w}, {{"transB", Attribute(int64_t(1))}});
  if (intercepts.empty()) return y;
  if (int64_t(intercepts.size()) != targets) c.error(intercepts.size(), " intercepts for ", targets, " targets");
  return temp(c, OpKind::Add, {y, f32_row(c, intercepts, "intercepts")});
}

void convert_linear_regressor(ConvertContext& c) {
  Value* x = as_f32(c, required(c, 0));
  std::vector<float> coef = floats_attr(c, "coefficients"), intercepts = floats_attr(c, "intercepts");
  int64_t targets = 1;
  if (auto t = c.take_attr("targets")) targets = t->i();
  if (string_attr(c, "post_transform", "NONE") != "NONE") c.error("post_transform other than NONE is not supported");
  no_more_attrs(c);
  c.emit_final(OpKind::Identity, {linear(c, x, coef, intercepts, targets)}, {});
}

void convert_linear_classifier(ConvertContext& c) {
  Value* x = as_f32(c, required(c, 0));
  std::vector<float> coef = floats_attr(c, "coefficients"), intercepts = floats_attr(c, "intercepts");
  std::string post = string_attr(c, "post_transform", "NONE");
  auto label_ints = c.take_attr("classlabels_ints");
  auto label_strings = c.take_attr("classlabels_strings");
  c.take_attr("multi_class");
  no_more_attrs(c);
  if (!label_ints && !label_strings) c.error("classlabels_ints or classlabels_strings is required");
  int64_t classes = int64_t(label_strings ? label_strings->strings().size() : label_ints->ints().size());
  int64_t rows = int64_t(intercepts.empty() ? 0 : intercepts.size());
  if (rows == 0) rows = classes;
  Value* scores = linear(c, x, coef, intercepts, rows);
  Value* label_table = c.const_tensor(label_strings ? Tensor::strings(label_strings->strings(), {classes})
                                                    : Tensor::from_vector<int64_t>(label_ints->ints(), {classes}),
                                      "labels");
  Value* label;
  if (rows == 1 && classes == 2) {
    // One score for two classes: the second label where the score is positive; scores become [-s, s].
    Value* pos = temp(c, OpKind::Greater, {scores, c.const_tensor(Tensor::scalar<float>(0.f), "zero")});
    Value* which = temp(c, OpKind::Cast, {pos}, {{"to", Attribute(int64_t(dtype_onnx_id(DType::i64)))}});
    label = temp(c, OpKind::Gather, {label_table, temp(c, OpKind::Reshape, {which, c.const_i64({-1}, "flat")})});
    scores = temp(c, OpKind::Concat, {temp(c, OpKind::Neg, {scores}), scores}, {{"axis", Attribute(int64_t(1))}});
  } else {
    Value* best = temp(c, OpKind::ArgMax, {scores}, {{"axis", Attribute(int64_t(1))}, {"keepdims", Attribute(int64_t(0))}});
    label = temp(c, OpKind::Gather, {label_table, best});
  }
  if (post == "LOGISTIC") scores = temp(c, OpKind::Sigmoid, {scores});
  else if (post == "SOFTMAX") scores = temp(c, OpKind::Softmax, {scores}, {{"axis", Attribute(int64_t(1))}});
  else if (post != "NONE") c.error("post_transform '", post, "' is not supported");
  const auto& outs = c.output_names();
  c.graph().add_node(OpKind::Identity, {label}, {outs.at(0)}, {}, c.loc());
  if (outs.size() > 1) c.graph().add_node(OpKind::Identity, {scores}, {outs[1]}, {}, c.loc());
}

// LabelEncoder, every version: v1's classes_strings (strings to their index, or back), v2-v3's keys_* / values_*
// / default_*, v4's keys_tensor / values_tensor / default_tensor.
void convert_label_encoder(ConvertContext& c) {
  Value* x = required(c, 0);
  auto list = [&](const std::string& prefix) -> std::optional<Tensor> {
    std::optional<Tensor> t;
    auto one = [&](std::optional<Tensor> made) {
      if (!made) return;
      if (t) c.error("more than one of the attributes ", prefix, "* is set");
      t = std::move(made);
    };
    if (auto a = c.take_attr(prefix + "floats")) {
      std::vector<float> v(a->floats().begin(), a->floats().end());
      one(Tensor::from_vector<float>(v, {int64_t(v.size())}));
    }
    if (auto a = c.take_attr(prefix + "int64s")) one(Tensor::from_vector<int64_t>(a->ints(), {int64_t(a->ints().size())}));
    if (auto a = c.take_attr(prefix + "strings")) one(Tensor::strings(a->strings(), {int64_t(a->strings().size())}));
    if (auto a = c.take_attr(prefix + "tensor")) {
      if (a->kind() != AttrKind::Tensor) c.error("attribute '", prefix, "tensor' must be a tensor");
      one(a->t().reshaped({a->t().numel()}));
    }
    return t;
  };
  std::optional<Tensor> keys, values;
  if (auto classes = c.take_attr("classes_strings")) {  // v1: the class names, by index
    const std::vector<std::string>& names = classes->strings();
    std::vector<int64_t> index(names.size());
    for (size_t k = 0; k < names.size(); ++k) index[k] = int64_t(k);
    Tensor n = Tensor::strings(names, {int64_t(names.size())});
    Tensor i = Tensor::from_vector<int64_t>(index, {int64_t(names.size())});
    bool from_strings = x->dtype() == DType::str;
    keys = from_strings ? n : i;
    values = from_strings ? i : n;
  } else {
    keys = list("keys_");
    values = list("values_");
  }
  if (!keys || !values) c.error("the keys and the values (keys_* and values_*, or classes_strings) are required");
  Tensor fallback;
  auto default_float = c.take_attr("default_float");
  auto default_int = c.take_attr("default_int64");
  auto default_string = c.take_attr("default_string");
  if (auto t = c.take_attr("default_tensor")) {
    fallback = t->t();
  } else if (values->dtype() == DType::str) {
    fallback = Tensor::strings({default_string ? default_string->s() : "_Unused"}, {});
  } else if (is_integer(values->dtype())) {
    fallback = Tensor::zeros(values->dtype(), {});
    int64_t v = default_int ? default_int->i() : -1;
    visit_dtype(values->dtype(), [&]<class T>() {
      if constexpr (std::is_integral_v<T>) fallback.data<T>()[0] = T(v);
    });
  } else {
    fallback = Tensor::zeros(values->dtype(), {});
    double v = default_float ? default_float->f() : -0.0;
    visit_dtype(values->dtype(), [&]<class T>() {
      if constexpr (is_float_v<T>) fallback.data<T>()[0] = T(v);
    });
  }
  no_more_attrs(c);
  c.emit_final(OpKind::LabelEncoder, {x},
               {{"keys", Attribute(*keys)}, {"values", Attribute(*values)}, {"default", Attribute(fallback)}});
}

}  // namespace

void register_onnx_ml(OnnxConverterTable& t) {
  const std::string ml = "ai.onnx.ml:";
  t[ml + "Scaler"] = convert_scaler;
  t[ml + "Normalizer"] = convert_normalizer;
  t[ml + "Binarizer"] = convert_binarizer;
  t[ml + "Imputer"] = convert_imputer;
  t[ml + "ArrayFeatureExtractor"] = convert_array_feature_extractor;
  t[ml + "FeatureVectorizer"] = convert_feature_vectorizer;
  t[ml + "LinearRegressor"] = convert_linear_regressor;
  t[ml + "LinearClassifier"] = convert_linear_classifier;
  t[ml + "LabelEncoder"] = convert_label_encoder;
}

}  // namespace cuvil
