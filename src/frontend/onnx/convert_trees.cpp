// The ai.onnx.ml tree ops — TreeEnsembleRegressor and TreeEnsembleClassifier (opsets 1 and 3: nodes named by
// (tree id, node id) pairs, leaves as LEAF nodes with weights listed beside) and TreeEnsemble (opset 5: nodes by
// index, leaves apart) — as Cuvil's one TreeEnsemble op (src/ir/ops/trees.cpp), which compares every input type in
// double against double thresholds, so each compares as ONNX's reference does; a classifier's binary case, post
// transform and labels (integers or strings)
// follow as ordinary ops (onnx/reference/ops/aionnxml/op_tree_ensemble_classifier.py). Refused with the reason:
// PROBIT, a single string class label, malformed trees (named by tree and node id).
#include <algorithm>
#include <cmath>
#include <map>

#include "frontend/onnx/convert_ml_util.h"

namespace cuvil {

namespace {

using onnx_ml::as_f32;
using onnx_ml::no_more_attrs;
using onnx_ml::string_attr;
using onnx_ml::temp;

Attribute ints(std::vector<int64_t> v) { return Attribute(std::move(v)); }
Attribute doubles(std::vector<double> v) { return Attribute(std::move(v)); }

std::vector<int64_t> ints_attr(ConvertContext& c, const char* name) {
  auto a = c.take_attr(name);
  if (!a) return {};
  if (a->kind() != AttrKind::Ints) c.error("attribute '", name, "' must be ints");
  return a->ints();
}

std::vector<std::string> strings_attr(ConvertContext& c, const char* name) {
  auto a = c.take_attr(name);
  if (!a) return {};
  if (a->kind() != AttrKind::Strings) c.error("attribute '", name, "' must be strings");
  return a->strings();
}

// A tensor attribute's values as doubles (float, double or float16 elements).
std::vector<double> tensor_values(ConvertContext& c, const Tensor& t, const std::string& name) {
  std::vector<double> out;
  out.reserve(size_t(t.numel()));
  switch (t.dtype()) {
    case DType::f32: for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<float>()[i]); break;
    case DType::f64: for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<double>()[i]); break;
    case DType::u8: for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<uint8_t>()[i]); break;
    case DType::f16: for (int64_t i = 0; i < t.numel(); ++i) out.push_back(float(t.data<f16_t>()[i])); break;
    case DType::bf16: for (int64_t i = 0; i < t.numel(); ++i) out.push_back(float(t.data<bf16_t>()[i])); break;
    default: c.error("attribute '", name, "' is ", dtype_name(t.dtype()), ", not a float tensor");
  }
  return out;
}

// `name` (floats) or `name`_as_tensor (a double tensor): the values, empty when neither is given.
std::vector<double> doubles_attr(ConvertContext& c, const std::string& name) {
  auto a = c.take_attr(name);
  auto t = c.take_attr(name + "_as_tensor");
  if (a && t) c.error("attributes '", name, "' and '", name, "_as_tensor' are both given");
  if (a) {
    if (a->kind() != AttrKind::Floats) c.error("attribute '", name, "' must be floats");
    return a->floats();
  }
  if (t) {
    if (t->kind() != AttrKind::Tensor) c.error("attribute '", name, "_as_tensor' must be a tensor");
    return tensor_values(c, t->t(), name + "_as_tensor");
  }
  return {};
}

// The TreeEnsemble op's attributes, being filled.
struct Ensemble {
  std::vector<int64_t> roots, feature, mode, on_true, on_false, missing, leaf_start{0}, weight_target,
      member_start;
  std::vector<double> threshold, weight_value, member_values, base;
  int64_t n_targets = 1;
  std::string aggregate = "SUM";

  AttrMap attrs() const {
    AttrMap a{{"roots", ints(roots)},           {"node_feature", ints(feature)},
              {"node_mode", ints(mode)},        {"node_threshold", doubles(threshold)},
              {"node_true", ints(on_true)},     {"node_false", ints(on_false)},
              {"node_missing_true", ints(missing)}, {"leaf_start", ints(leaf_start)},
              {"weight_target", ints(weight_target)}, {"weight_value", doubles(weight_value)},
              {"n_targets", Attribute(n_targets)}, {"aggregate", Attribute(aggregate)},
              {"base", doubles(base)}};
    if (!member_start.empty()) {
      a["member_start"] = ints(member_start);
      a["member_values"] = doubles(member_values);
    }
    return a;
  }
};

// Opsets 1 and 3: the nodes_* tuples and the leaf weights' (prefix)_treeids/_nodeids/_ids/weights tuples.
Ensemble ensemble_v3(ConvertContext& c, const std::string& prefix) {
  std::vector<int64_t> tree = ints_attr(c, "nodes_treeids"), id = ints_attr(c, "nodes_nodeids");
  std::vector<int64_t> feature = ints_attr(c, "nodes_featureids"), yes = ints_attr(c, "nodes_truenodeids");
  std::vector<int64_t> no = ints_attr(c, "nodes_falsenodeids");
  std::vector<int64_t> missing = ints_attr(c, "nodes_missing_value_tracks_true");
  std::vector<std::string> modes = strings_attr(c, "nodes_modes");
  std::vector<double> values = doubles_attr(c, "nodes_values");
  doubles_attr(c, "nodes_hitrates");  // (a hint for ordering; not needed to evaluate)
  const size_t n = tree.size();
  if (n == 0) c.error("the ensemble has no nodes");
  if (id.size() != n || modes.size() != n || feature.size() != n || yes.size() != n || no.size() != n ||
      (!values.empty() && values.size() != n) || (!missing.empty() && missing.size() != n))
    c.error("the nodes_* attributes must have one entry per node (", n, " tree ids)");

  // (tree, node) -> internal node index or leaf reference, in attribute order.
  std::map<std::pair<int64_t, int64_t>, int64_t> ref;
  Ensemble e;
  int64_t leaves = 0;
  for (size_t i = 0; i < n; ++i) {
    auto key = std::make_pair(tree[i], id[i]);
    if (ref.count(key)) c.error("tree ", tree[i], " lists node ", id[i], " twice");
    if (modes[i] == "LEAF") {
      ref[key] = -(++leaves);
      continue;
    }
    static const std::map<std::string, int64_t> kModes{{"BRANCH_LEQ", 0}, {"BRANCH_LT", 1}, {"BRANCH_GTE", 2},
                                                       {"BRANCH_GT", 3},  {"BRANCH_EQ", 4}, {"BRANCH_NEQ", 5}};
    auto m = kModes.find(modes[i]);
    if (m == kModes.end()) c.error("tree ", tree[i], " node ", id[i], " has mode '", modes[i], "'");
    ref[key] = int64_t(e.feature.size());
    e.feature.push_back(feature[i]);
    e.mode.push_back(m->second);
    e.threshold.push_back(values.empty() ? 0.0 : values[i]);
    e.missing.push_back(missing.empty() ? 0 : missing[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (modes[i] == "LEAF") continue;
    for (auto [child, side] : {std::make_pair(yes[i], "true"), std::make_pair(no[i], "false")}) {
      auto r = ref.find({tree[i], child});
      if (r == ref.end())
        c.error("tree ", tree[i], " node ", id[i], "'s ", side, " branch names node ", child, ", which the tree lacks");
      (std::string(side) == "true" ? e.on_true : e.on_false).push_back(r->second);
    }
  }
  // Trees in order of their ids; each tree's root is its first node in the lists (as ONNX's reference).
  std::map<int64_t, int64_t> root;
  for (size_t i = 0; i < n; ++i) root.emplace(tree[i], ref[{tree[i], id[i]}]);
  for (auto [t, r] : root) e.roots.push_back(r);

  // The leaves' weights, in the order listed.
  std::vector<int64_t> w_tree = ints_attr(c, (prefix + "_treeids").c_str());
  std::vector<int64_t> w_node = ints_attr(c, (prefix + "_nodeids").c_str());
  std::vector<int64_t> w_id = ints_attr(c, (prefix + "_ids").c_str());
  std::vector<double> w_value = doubles_attr(c, prefix + "_weights");
  if (w_node.size() != w_tree.size() || w_id.size() != w_tree.size() || w_value.size() != w_tree.size())
    c.error("the ", prefix, "_* attributes must have one entry per weight (", w_tree.size(), " tree ids)");
  std::vector<std::vector<std::pair<int64_t, double>>> per_leaf(static_cast<size_t>(leaves));
  for (size_t k = 0; k < w_tree.size(); ++k) {
    auto r = ref.find({w_tree[k], w_node[k]});
    if (r == ref.end() || r->second >= 0)
      c.error("weight ", k, " is for tree ", w_tree[k], " node ", w_node[k], ", which is not a leaf of the ensemble");
    if (w_id[k] < 0) c.error("weight ", k, " is for ", prefix, " ", w_id[k]);
    per_leaf[size_t(-(r->second + 1))].emplace_back(w_id[k], w_value[k]);
    e.n_targets = std::max(e.n_targets, w_id[k] + 1);
  }
  for (const auto& ws : per_leaf) {
    for (auto [t, w] : ws) {
      e.weight_target.push_back(t);
      e.weight_value.push_back(w);
    }
    e.leaf_start.push_back(int64_t(e.weight_target.size()));
  }
  return e;
}

// post_transform on scores [N, C]: NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO (ONNX-ML's, where entries within 1e-7 of
// zero stay near zero and an all-zero row gives 0.5 everywhere).
Value* post_transform(ConvertContext& c, Value* scores, const std::string& post) {
  if (post == "NONE") return scores;
  if (post == "LOGISTIC") return temp(c, OpKind::Sigmoid, {scores});
  if (post == "SOFTMAX") return temp(c, OpKind::Softmax, {scores}, {{"axis", Attribute(int64_t(1))}});
  if (post == "SOFTMAX_ZERO") {
    Value* axis = c.const_i64({1}, "axis");
    AttrMap keep{{"keepdims", Attribute(int64_t(1))}};
    Value* max = temp(c, OpKind::ReduceMax, {scores, axis}, keep);
    Value* e = temp(c, OpKind::Exp, {temp(c, OpKind::Sub, {scores, max})});
    Value* small = temp(c, OpKind::Mul, {scores, temp(c, OpKind::Exp, {temp(c, OpKind::Neg, {max})})});
    Value* nonzero = temp(c, OpKind::Greater, {temp(c, OpKind::Abs, {scores}),
                                               c.const_tensor(Tensor::scalar<float>(1e-7f), "tiny")});
    Value* v = temp(c, OpKind::Where, {nonzero, e, small});
    Value* sum = temp(c, OpKind::ReduceSum, {v, axis}, keep);
    Value* zero = temp(c, OpKind::Equal, {sum, c.const_tensor(Tensor::scalar<float>(0.f), "zero")});
    return temp(c, OpKind::Where, {zero, c.const_tensor(Tensor::scalar<float>(0.5f), "half"),
                                   temp(c, OpKind::Div, {v, sum})});
  }
  if (post == "PROBIT") c.error("post_transform PROBIT is not supported");
  c.error("post_transform '", post, "' is not one of NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT");
}

Value* input_x(ConvertContext& c) {
  Value* x = c.input(0);
  if (!x) c.error("input X is required");
  return x;
}

void convert_tree_ensemble_regressor(ConvertContext& c) {
  Ensemble e = ensemble_v3(c, "target");
  if (auto t = c.take_attr("n_targets")) e.n_targets = std::max(e.n_targets, t->i());
  e.aggregate = string_attr(c, "aggregate_function", "SUM");
  e.base = doubles_attr(c, "base_values");
  std::string post = string_attr(c, "post_transform", "NONE");
  no_more_attrs(c);
  Value* y = as_f32(c, temp(c, OpKind::TreeEnsemble, {input_x(c)}, e.attrs()));  // (ONNX-ML's Y is float)
  c.emit_final(OpKind::Identity, {post_transform(c, y, post)}, {});
}

void convert_tree_ensemble_classifier(ConvertContext& c) {
  Ensemble e = ensemble_v3(c, "class");
  std::vector<std::string> label_names;
  if (auto a = c.take_attr("classlabels_strings")) label_names = a->strings();
  std::vector<int64_t> labels = ints_attr(c, "classlabels_int64s");
  if (!label_names.empty() && !labels.empty()) c.error("classlabels_int64s and classlabels_strings are both set");
  if (!label_names.empty()) labels.assign(label_names.size(), 0);  // (only their count matters below)
  e.base = doubles_attr(c, "base_values");
  std::string post = string_attr(c, "post_transform", "NONE");
  no_more_attrs(c);
  if (labels.empty()) c.error("classlabels_int64s or classlabels_strings is required");
  const int64_t classes = int64_t(labels.size());
  if (e.n_targets > classes && !(classes == 1 && e.n_targets <= 2))
    c.error("a leaf weight is for class ", e.n_targets - 1, ", but there are ", classes, " class labels");
  e.n_targets = std::max<int64_t>(classes, 1);
  if (e.base.size() == 1) e.base.assign(size_t(e.n_targets), e.base[0]);  // (one base value for every class)
  if (!e.base.empty() && int64_t(e.base.size()) != e.n_targets)
    c.error("base_values has ", e.base.size(), " values for ", e.n_targets, " classes");
  Value* scores = as_f32(c, temp(c, OpKind::TreeEnsemble, {input_x(c)}, e.attrs()));

  // One class with weights: its score s is column 0's, and the scores become [1 - s, s] (NONE) or [-s, s]
  // before the post transform (ONNX's reference); with more classes the rest of the columns stay.
  std::vector<int64_t> used = e.weight_target;
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  if (used.size() == 1) {
    auto slice = [&](int64_t b, int64_t en) {
      return temp(c, OpKind::Slice, {scores, c.const_i64({b}, "starts"), c.const_i64({en}, "ends"),
                                     c.const_i64({1}, "axes")});
    };
    Value* s = slice(0, 1);
    Value* other = post == "NONE" || post == "PROBIT"
                       ? temp(c, OpKind::Sub, {c.const_tensor(Tensor::scalar<float>(1.f), "one"), s})
                       : temp(c, OpKind::Neg, {s});
    std::vector<Value*> parts{other, s};
    if (classes > 2) parts.push_back(slice(2, classes));
    scores = temp(c, OpKind::Concat, parts, {{"axis", Attribute(int64_t(1))}});
  }
  scores = post_transform(c, scores, post);
  Value* best = temp(c, OpKind::ArgMax, {scores}, {{"axis", Attribute(int64_t(1))}, {"keepdims", Attribute(int64_t(0))}});
  Value* label;
  if (classes == 1) {  // (the reference's one case: a single label 1, read as "class 1 or not")
    if (!label_names.empty()) c.error("a single string class label is not supported");
    if (labels[0] != 1) c.error("a single class label must be 1, got ", labels[0]);
    label = best;
  } else {
    Tensor table = label_names.empty() ? Tensor::from_vector<int64_t>(labels, {classes})
                                       : Tensor::strings(label_names, {classes});
    label = temp(c, OpKind::Gather, {c.const_tensor(table, "labels"), best});
  }
  const auto& outs = c.output_names();
  c.graph().add_node(OpKind::Identity, {label}, {outs.at(0)}, {}, c.loc());
  if (outs.size() > 1 && !outs[1].empty()) c.graph().add_node(OpKind::Identity, {scores}, {outs[1]}, {}, c.loc());
}

// Opset 5: node i's branches are node indices or, where nodes_trueleafs/falseleafs say so, leaf indices.
void convert_tree_ensemble(ConvertContext& c) {
  std::vector<int64_t> feature = ints_attr(c, "nodes_featureids");
  std::vector<int64_t> yes = ints_attr(c, "nodes_truenodeids"), yes_leaf = ints_attr(c, "nodes_trueleafs");
  std::vector<int64_t> no = ints_attr(c, "nodes_falsenodeids"), no_leaf = ints_attr(c, "nodes_falseleafs");
  std::vector<int64_t> missing = ints_attr(c, "nodes_missing_value_tracks_true");
  std::vector<int64_t> roots = ints_attr(c, "tree_roots"), leaf_target = ints_attr(c, "leaf_targetids");
  auto tensor = [&](const char* name, bool required) -> std::vector<double> {
    auto a = c.take_attr(name);
    if (!a) {
      if (required) c.error("attribute '", name, "' is required");
      return {};
    }
    if (a->kind() != AttrKind::Tensor) c.error("attribute '", name, "' must be a tensor");
    return tensor_values(c, a->t(), name);
  };
  std::vector<double> splits = tensor("nodes_splits", true), modes = tensor("nodes_modes", true);
  std::vector<double> weights = tensor("leaf_weights", true), members = tensor("membership_values", false);
  tensor("nodes_hitrates", false);
  Ensemble e;
  if (auto t = c.take_attr("n_targets")) e.n_targets = t->i();
  int64_t aggregate = 1, post = 0;
  if (auto a = c.take_attr("aggregate_function")) aggregate = a->i();
  if (auto p = c.take_attr("post_transform")) post = p->i();
  no_more_attrs(c);
  const size_t n = feature.size();
  if (yes.size() != n || no.size() != n || yes_leaf.size() != n || no_leaf.size() != n || splits.size() != n ||
      modes.size() != n || (!missing.empty() && missing.size() != n))
    c.error("the nodes_* attributes must have one entry per node (", n, " feature ids)");
  if (weights.size() != leaf_target.size()) c.error("leaf_targetids and leaf_weights differ in length");
  if (aggregate < 0 || aggregate > 3) c.error("aggregate_function ", aggregate, " is not 0..3");
  e.aggregate = std::vector<std::string>{"AVERAGE", "SUM", "MIN", "MAX"}[size_t(aggregate)];
  auto leaf_ref = [&](int64_t l) {
    if (l < 0 || l >= int64_t(weights.size())) c.error("a branch names leaf ", l, " of ", weights.size());
    return -(l + 1);
  };
  auto node_ref = [&](int64_t k) {
    if (k < 0 || k >= int64_t(n)) c.error("a branch names node ", k, " of ", n);
    return k;
  };
  for (size_t i = 0; i < n; ++i) {
    e.feature.push_back(feature[i]);
    e.mode.push_back(int64_t(modes[i]));
    e.threshold.push_back(splits[i]);
    e.missing.push_back(missing.empty() ? 0 : missing[i]);
    e.on_true.push_back(yes_leaf[i] ? leaf_ref(yes[i]) : node_ref(yes[i]));
    e.on_false.push_back(no_leaf[i] ? leaf_ref(no[i]) : node_ref(no[i]));
  }
  for (int64_t r : roots) {  // (a tree that is one leaf: a root whose two branches are the same leaf)
    node_ref(r);
    bool leaf = yes_leaf[size_t(r)] && no_leaf[size_t(r)] && yes[size_t(r)] == no[size_t(r)];
    e.roots.push_back(leaf ? leaf_ref(yes[size_t(r)]) : r);
  }
  // Each set-membership node's members, in node order, end at a NaN.
  bool any_member = false;
  size_t m = 0;
  e.member_start.push_back(0);
  for (size_t i = 0; i < n; ++i) {
    if (e.mode[i] == 6) {
      any_member = true;
      while (m < members.size() && !std::isnan(members[m])) e.member_values.push_back(members[m++]);
      if (m == members.size()) c.error("membership_values has no NaN ending node ", i, "'s set");
      ++m;
    }
    e.member_start.push_back(int64_t(e.member_values.size()));
  }
  if (!any_member) e.member_start.clear();
  for (size_t l = 0; l < weights.size(); ++l) {
    e.weight_target.push_back(leaf_target[l]);
    e.weight_value.push_back(weights[l]);
    e.leaf_start.push_back(int64_t(l) + 1);
  }
  Value* y = temp(c, OpKind::TreeEnsemble, {input_x(c)}, e.attrs());
  static const char* kPost[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
  if (post < 0 || post > 4) c.error("post_transform ", post, " is not 0..4");
  if (post != 0) y = post_transform(c, as_f32(c, y), kPost[post]);
  c.emit_final(OpKind::CastLike, {y, c.input(0)}, {});  // (Y has X's type)
}

}  // namespace

void register_onnx_trees(OnnxConverterTable& t) {
  t["ai.onnx.ml:TreeEnsembleRegressor"] = convert_tree_ensemble_regressor;
  t["ai.onnx.ml:TreeEnsembleClassifier"] = convert_tree_ensemble_classifier;
  t["ai.onnx.ml:TreeEnsemble"] = convert_tree_ensemble;
}

}  // namespace cuvil
