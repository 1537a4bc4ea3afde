// assign-layouts: 2-D convolutions and pools run channels-last ([N, H, W, C]), the layout oneDNN's fast fp32
// kernels use; the rest of the graph keeps ONNX's [N, C, H, W]. The change is explicit in the IR:
//   1. every f32 FusedConv / MaxPool (one output) / AveragePool / GlobalAveragePool / GlobalMaxPool on 4-D data
//      becomes Transpose(to NHWC) -> op(channels_last = 1) -> Transpose(back to NCHW); so does a 1-D FusedConv
//      on 3-D data ([N, W, C]: on [N, C, W] oneDNN 2.6 runs it as im2col + gemm, 4-8x slower; Whisper's
//      front-end convolutions), and a 2-D QLinearConv or MaxPool of u8/s8 data (a QOperator model's);
//   2. a Transpose whose input is another Transpose merges with it (and vanishes when the two cancel), so
//      back-to-back convolutions exchange NHWC tensors directly;
//   3. element-wise ops whose inputs are all transposed the same way (Relu, Add of two branches, the Mul of a
//      squeeze-excitation block by its per-channel scale, ...) run on the untransposed data, moving the Transpose
//      past them so that step 2 can cancel it; constant inputs are permuted once at compile time instead (the
//      per-channel scale and shift of a DenseNet block). A Concat of inputs transposed alike concatenates them
//      untransposed on the permuted axis (SqueezeNet's fire modules, DenseNet's dense blocks, ShuffleNet), and an
//      inference BatchNormalization of a transposed input becomes a Mul and an Add by its per-channel constants,
//      which then move as above (DenseNet's pre-activations between channels-last convolutions); per-tensor
//      QuantizeLinear / DequantizeLinear move likewise (a QOperator model's QLinearAdd between QLinearConvs).
//   4. a ReduceMean/Sum/Max/Min of a transposed input reduces the untransposed data over the permuted axes (a
//      squeeze-excitation block's mean over H and W), the transpose moving onto its small result.
// What remains are the reorders at the edges of channels-last regions; `cuvil inspect` counts them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/op_schema.h"
#include "ir/ops/layout.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// 2-D (4-D tensor) channels-last permutations; other ranks use layout::perm_to_channels_last/first.
const std::vector<int64_t> kToNchw{0, 3, 1, 2};

bool is_q8(DType t) { return t == DType::u8 || t == DType::i8; }

bool layout_capable(const Node& n) {
  bool op_ok = n.op() == OpKind::FusedConv || n.op() == OpKind::AveragePool || n.op() == OpKind::GlobalAveragePool ||
               n.op() == OpKind::GlobalMaxPool || (n.op() == OpKind::MaxPool && n.num_outputs() == 1);
  // 8-bit integers: a QOperator model's QLinearConvs and the MaxPool between them (oneDNN's int8 kernels are
  // channels-last; channels-first they reorder in and out).
  bool q8_op = n.op() == OpKind::QLinearConv || (n.op() == OpKind::MaxPool && n.num_outputs() == 1);
  const Value* x = n.input(0);
  if (!(op_ok || q8_op) || !x || !x->shape().rank_known() || n.attr("channels_last").i() != 0) return false;
  if (!(op_ok && x->dtype() == DType::f32) && !(q8_op && is_q8(x->dtype()) && x->shape().rank() == 4)) return false;
  return x->shape().rank() == 4 || (x->shape().rank() == 3 && n.op() == OpKind::FusedConv);
}

// Element-wise ops that commute with a transpose of all their inputs (same shape in, same shape out).
bool commutes_with_transpose(const Node& n) {
  switch (n.op()) {
    case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Sigmoid: case OpKind::Tanh: case OpKind::HardSwish:
    case OpKind::HardSigmoid: case OpKind::Gelu: case OpKind::Elu: case OpKind::Neg: case OpKind::Abs:
    case OpKind::Exp: case OpKind::Erf: case OpKind::Sqrt: case OpKind::Identity: case OpKind::Reciprocal:
    case OpKind::Clip:  // its min and max: scalars or absent (checked by the caller)
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
      return n.num_outputs() == 1;
    default: return false;
  }
}

const std::vector<int64_t>* transpose_perm(const Value* v) {
  const Node* p = v ? v->producer() : nullptr;
  if (!p || p->op() != OpKind::Transpose || !p->has_attr("perm")) return nullptr;
  return &p->attrs().at("perm").ints();
}

Value* add_transpose(Graph& g, size_t pos, Value* x, const std::vector<int64_t>& perm, const Location& loc) {
  Node* t = g.insert_node(pos, OpKind::Transpose, {x}, {g.unique_name(x->name() + "_t")}, {{"perm", Attribute(perm)}},
                          loc);
  std::vector<Dim> dims;
  for (int64_t p : perm) dims.push_back(x->shape()[size_t(p)]);
  t->output(0)->set_type({x->dtype(), Shape(dims)});
  return t->output(0);
}

// A constant read through y = T(c') for a permutation `perm` of y's rank: c' is c broadcast to that rank (ONNX
// aligns trailing dims) and permuted so that c'[perm[k]] is c's dim k, the same bytes moved once.
Value* permuted_constant(Graph& g, const Value* c, const std::vector<int64_t>& perm) {
  const Tensor& t = c->constant();
  size_t r = perm.size();
  std::vector<int64_t> dims(r - t.rank(), 1);  // c's dims at y's rank
  dims.insert(dims.end(), t.shape().begin(), t.shape().end());
  std::vector<int64_t> src_dims(r);
  for (size_t k = 0; k < r; ++k) src_dims[size_t(perm[k])] = dims[k];
  Tensor out = Tensor::zeros(t.dtype(), src_dims);
  std::vector<int64_t> out_strides(r, 1);  // strides of the permuted tensor, indexed by y's dims
  {
    std::vector<int64_t> s(r, 1);
    for (size_t k = r; k-- > 1;) s[k - 1] = s[k] * src_dims[k];
    for (size_t k = 0; k < r; ++k) out_strides[k] = s[size_t(perm[k])];
  }
  size_t es = dtype_size(t.dtype());
  const auto* src = static_cast<const char*>(t.raw());
  auto* dst = static_cast<char*>(out.raw());
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < r; ++k) off += idx[k] * out_strides[k];
    std::memcpy(dst + size_t(off) * es, src + size_t(i) * es, es);
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
  return g.add_constant(g.unique_name(c->name() + "_perm"), std::move(out));
}

bool small_constant(const Value* v, size_t rank) {
  return v && v->is_constant() && v->constant().rank() <= rank && v->constant().numel() <= (int64_t(1) << 20);
}

// An inference BatchNormalization of a transposed f32 input with constant [C] parameters, as y = x * s + t with
// s = scale / sqrt(var + eps) and t = bias - mean * s per channel (computed in double, rounded once): element-wise
// ops that step 3 then moves below the transpose. Returns the Add's output, or null when the node does not qualify.
Value* batch_norm_as_scale_shift(Graph& g, size_t pos, Node& bn) {
  if (bn.op() != OpKind::BatchNormalization || bn.num_outputs() != 1 || AttrReader(bn).i("training_mode") != 0)
    return nullptr;
  Value* x = bn.input(0);
  if (!transpose_perm(x) || x->dtype() != DType::f32 || !x->shape().rank_known() || x->shape().rank() < 2)
    return nullptr;
  const Dim& c_dim = x->shape()[1];
  if (!c_dim.is_const()) return nullptr;
  int64_t c = c_dim.value();
  for (size_t k = 1; k < 5; ++k) {
    const Value* v = bn.input(k);
    if (!v || !v->is_constant() || v->dtype() != DType::f32 || v->constant().shape() != std::vector<int64_t>{c})
      return nullptr;
  }
  double eps = AttrReader(bn).f("epsilon");
  std::vector<int64_t> pdims(x->shape().rank(), 1);
  pdims[1] = c;  // [1, C, 1, ...]: broadcast along the channel axis of the NCHW-order input
  Tensor s = Tensor::zeros(DType::f32, pdims), t = Tensor::zeros(DType::f32, pdims);
  const float *scale = bn.input(1)->constant().data<float>(), *bias = bn.input(2)->constant().data<float>(),
              *mean = bn.input(3)->constant().data<float>(), *var = bn.input(4)->constant().data<float>();
  for (int64_t i = 0; i < c; ++i) {
    double si = double(scale[i]) / std::sqrt(double(var[i]) + eps);
    s.data<float>()[i] = float(si);
    t.data<float>()[i] = float(double(bias[i]) - double(mean[i]) * si);
  }
  Value* sv = g.add_constant(g.unique_name(bn.output(0)->name() + "_scale"), std::move(s));
  Value* tv = g.add_constant(g.unique_name(bn.output(0)->name() + "_shift"), std::move(t));
  Value* y = bn.output(0);
  Node* mul = g.insert_node(pos + 1, OpKind::Mul, {x, sv}, {g.unique_name(y->name() + "_mul")}, {}, bn.loc());
  mul->output(0)->set_type(x->type());
  Node* add = g.insert_node(pos + 2, OpKind::Add, {mul->output(0), tv}, {g.unique_name(y->name() + "_add")}, {},
                            bn.loc());
  add->output(0)->set_type(y->type());
  return add->output(0);
}

// Concat(T(a), T(b), ...) with one permutation -> T(Concat(a, b, ...)) on the permuted axis; true when done.
bool sink_below_concat(Graph& g, size_t i, Node& n) {
  if (n.op() != OpKind::Concat || n.num_inputs() == 0 || n.num_outputs() != 1) return false;
  const Value* y = n.output(0);
  if (!y->shape().rank_known()) return false;
  const std::vector<int64_t>* perm = nullptr;
  for (Value* v : n.inputs()) {
    const std::vector<int64_t>* p = transpose_perm(v);
    if (!p || (perm && *p != *perm) || !v->shape().rank_known() || v->shape().rank() != y->shape().rank()) return false;
    perm = p;
  }
  int64_t r = int64_t(perm->size()), axis = AttrReader(n).i("axis");
  if (r != int64_t(y->shape().rank()) || axis < -r || axis >= r) return false;
  if (axis < 0) axis += r;
  std::vector<Value*> srcs;
  for (Value* v : n.inputs()) srcs.push_back(v->producer()->input(0));
  AttrMap attrs = n.attrs();
  attrs["axis"] = Attribute((*perm)[size_t(axis)]);
  Value* out = n.output(0);
  Node* moved = g.insert_node(i + 1, OpKind::Concat, srcs, {g.unique_name(out->name() + "_src")}, attrs, n.loc());
  std::vector<Dim> src_dims(perm->size());
  for (size_t k = 0; k < perm->size(); ++k) src_dims[size_t((*perm)[k])] = out->shape()[k];
  moved->output(0)->set_type({out->dtype(), Shape(src_dims)});
  std::string name = rewrite::free_name(g, out);
  Value* back = add_transpose(g, i + 2, moved->output(0), *perm, n.loc());
  g.rename_value(back, name);
  g.replace_all_uses(out, back);
  return true;
}

// Dims that are all known, positive constants.
bool known_dims(const Shape& s, std::vector<int64_t>* out) {
  if (!s.rank_known()) return false;
  out->clear();
  for (size_t k = 0; k < s.rank(); ++k) {
    if (!s[k].is_const() || s[k].value() <= 0) return false;
    out->push_back(s[k].value());
  }
  return true;
}

// How `fine` dims group into `coarse` ones, in order: runs[j] fine dims multiply to coarse[j] (at least one each).
bool runs_of(const std::vector<int64_t>& coarse, const std::vector<int64_t>& fine, std::vector<size_t>* runs) {
  size_t f = 0;
  runs->clear();
  for (int64_t c : coarse) {
    if (f >= fine.size()) return false;
    int64_t prod = fine[f++];
    size_t n = 1;
    while (prod < c && f < fine.size()) prod *= fine[f++], ++n;
    if (prod != c) return false;
    runs->push_back(n);
  }
  return f == fine.size();
}

Value* shape_constant(Graph& g, const std::string& name, const std::vector<int64_t>& dims) {
  return g.add_constant(g.unique_name(name), Tensor::from_vector<int64_t>(dims, {int64_t(dims.size())}));
}

Value* add_reshape(Graph& g, size_t pos, Value* x, const std::vector<int64_t>& dims, const Location& loc) {
  Node* r = g.insert_node(pos, OpKind::Reshape, {x, shape_constant(g, x->name() + "_shape", dims)},
                          {g.unique_name(x->name() + "_r")}, {}, loc);
  std::vector<Dim> d(dims.begin(), dims.end());
  r->output(0)->set_type({x->dtype(), Shape(d)});
  return r->output(0);
}

// Reshape(T(x)) -> T'(Reshape'(x)) when the reshape only splits dims (ShuffleNet's [N, C, H, W] -> [N, g, C/g, H,
// W]: x's channel dim splits where it lies) or only merges them (its [N, C/g, g, H, W] -> [N, C, H, W]). A merge of
// dims that are not adjacent and in order in x first gathers them with a transpose of x: the channel shuffle's one
// real data movement, [.., g, C/g] -> [.., C/g, g] per pixel. That is done only where the result goes back to NHWC
// order (T' = to NCHW); a merge in x's order needs no transpose and is always done (ViT's flattened patches).
// Returns the value replacing the Reshape's output, or null.
Value* sink_below_reshape(Graph& g, size_t i, Node& n) {
  const std::vector<int64_t>* perm = transpose_perm(n.input(0));
  std::vector<int64_t> in, out;
  if (n.op() != OpKind::Reshape || !perm || !known_dims(n.input(0)->shape(), &in) ||
      !known_dims(n.output(0)->shape(), &out) || perm->size() != in.size())
    return nullptr;
  Value* x = n.input(0)->producer()->input(0);
  size_t r = in.size();
  std::vector<size_t> runs;
  if (runs_of(in, out, &runs)) {  // splits: in dim k (x's dim perm[k]) becomes runs[k] dims
    std::vector<size_t> first(r, 0);  // where in dim k's run starts in y
    for (size_t k = 1; k < r; ++k) first[k] = first[k - 1] + runs[k - 1];
    std::vector<size_t> inv(r);
    for (size_t k = 0; k < r; ++k) inv[size_t((*perm)[k])] = k;
    std::vector<int64_t> xs_dims, start(r);  // x split, and where in dim k's run starts in it
    for (size_t xi = 0; xi < r; ++xi) {
      size_t k = inv[xi];
      start[k] = int64_t(xs_dims.size());
      xs_dims.insert(xs_dims.end(), out.begin() + long(first[k]), out.begin() + long(first[k] + runs[k]));
    }
    std::vector<int64_t> q;
    for (size_t k = 0; k < r; ++k)
      for (size_t t = 0; t < runs[k]; ++t) q.push_back(start[k] + int64_t(t));
    Value* xs = add_reshape(g, i + 1, x, xs_dims, n.loc());
    return add_transpose(g, i + 2, xs, q, n.loc());
  }
  if (!runs_of(out, in, &runs)) return nullptr;
  // Merges: out dim j is in dims [first_j, first_j + runs[j]), from x's dims perm[...]. Groups go in the order of
  // their first dim in x; within a group, in y's order.
  size_t m = out.size();
  std::vector<size_t> first(m, 0);
  for (size_t j = 1; j < m; ++j) first[j] = first[j - 1] + runs[j - 1];
  std::vector<int64_t> lowest(m);
  for (size_t j = 0; j < m; ++j)
    lowest[j] = *std::min_element(perm->begin() + long(first[j]), perm->begin() + long(first[j] + runs[j]));
  std::vector<size_t> order(m);
  for (size_t j = 0; j < m; ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lowest[a] < lowest[b]; });
  std::vector<int64_t> sigma, zm_dims, tau(m);
  for (size_t pos = 0; pos < m; ++pos) {
    size_t j = order[pos];
    tau[j] = int64_t(pos);
    zm_dims.push_back(out[j]);
    for (size_t t = 0; t < runs[j]; ++t) sigma.push_back((*perm)[first[j] + t]);
  }
  bool in_order = true;
  for (size_t k = 0; k < r; ++k) in_order = in_order && sigma[k] == int64_t(k);
  if (!in_order && tau != kToNchw) return nullptr;
  size_t pos = i + 1;
  Value* z = in_order ? x : add_transpose(g, pos++, x, sigma, n.loc());
  Value* zm = add_reshape(g, pos++, z, zm_dims, n.loc());
  return add_transpose(g, pos, zm, tau, n.loc());
}

// Slice(T(x), starts, ends, axes, steps) -> T(Slice(x, starts, ends, perm[axes], steps)) for constant axes (or
// none, with constant starts); returns the value replacing the Slice's output, or null.
Value* sink_below_slice(Graph& g, size_t i, Node& n) {
  const std::vector<int64_t>* perm = transpose_perm(n.input(0));
  if (n.op() != OpKind::Slice || !perm || n.num_outputs() != 1 || !n.output(0)->shape().rank_known() ||
      n.output(0)->shape().rank() != perm->size())
    return nullptr;
  int64_t r = int64_t(perm->size());
  std::vector<int64_t> axes;
  const Value* a = n.num_inputs() > 3 ? n.input(3) : nullptr;
  if (a) {
    if (!a->is_constant() || (a->dtype() != DType::i64 && a->dtype() != DType::i32)) return nullptr;
    for (int64_t k = 0; k < a->constant().numel(); ++k) axes.push_back(a->constant().get_i64(k));
  } else {
    const Value* st = n.input(1);
    if (!st || !st->is_constant()) return nullptr;
    for (int64_t k = 0; k < st->constant().numel(); ++k) axes.push_back(k);
  }
  for (int64_t& ax : axes) {
    if (ax < -r || ax >= r) return nullptr;
    ax = (*perm)[size_t(ax < 0 ? ax + r : ax)];
  }
  std::vector<Value*> ins = n.inputs();
  ins[0] = n.input(0)->producer()->input(0);
  Value* na = g.add_constant(g.unique_name(n.output(0)->name() + "_axes"),
                             Tensor::from_vector<int64_t>(axes, {int64_t(axes.size())}));
  if (ins.size() > 3) ins[3] = na;
  else ins.push_back(na);
  Value* y = n.output(0);
  Node* moved = g.insert_node(i + 1, OpKind::Slice, ins, {g.unique_name(y->name() + "_src")}, n.attrs(), n.loc());
  std::vector<Dim> src_dims(perm->size());
  for (size_t k = 0; k < perm->size(); ++k) src_dims[size_t((*perm)[k])] = y->shape()[k];
  moved->output(0)->set_type({y->dtype(), Shape(src_dims)});
  return add_transpose(g, i + 2, moved->output(0), *perm, n.loc());
}

// ReduceMean / ReduceSum / ReduceMax / ReduceMin(T(x), axes) -> T(Reduce(x, perm[axes])) for constant, non-empty
// axes: a squeeze-excitation block's mean over H and W (`x.mean((2, 3), keepdim=True)`, timm's MobileNetV3,
// RegNet, EfficientNet) then reads the channels-last data in place, where the transpose back to [N, C, H, W] copied
// the whole activation first; the transpose moves onto the [N, 1, 1, C] result, and the block's Mul by it then
// stays channels-last (step 3). Without keepdims only where the kept dims stay in order (no transpose left).
// Returns the value replacing the Reduce's output, or null.
Value* sink_below_reduce(Graph& g, size_t i, Node& n) {
  const std::vector<int64_t>* perm = transpose_perm(n.input(0));
  bool op = n.op() == OpKind::ReduceMean || n.op() == OpKind::ReduceSum || n.op() == OpKind::ReduceMax ||
            n.op() == OpKind::ReduceMin;
  if (!op || !perm || n.num_outputs() != 1 || n.num_inputs() < 2 || !n.input(1) || !n.input(1)->is_constant() ||
      !n.output(0)->shape().rank_known() || n.attr("noop_with_empty_axes").i() != 0)
    return nullptr;
  const Tensor& a = n.input(1)->constant();
  int64_t r = int64_t(perm->size());
  if (a.numel() == 0 || (a.dtype() != DType::i64 && a.dtype() != DType::i32)) return nullptr;
  std::vector<bool> reduced(size_t(r), false);
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < a.numel(); ++k) {
    int64_t ax = a.get_i64(k);
    if (ax < -r || ax >= r) return nullptr;
    ax = ax < 0 ? ax + r : ax;
    if (reduced[size_t(ax)]) return nullptr;
    reduced[size_t(ax)] = true;
    axes.push_back((*perm)[size_t(ax)]);
  }
  bool keep = n.attr("keepdims").i() != 0;
  Value* y = n.output(0);
  if (y->shape().rank() != size_t(keep ? r : r - int64_t(axes.size()))) return nullptr;
  if (!keep) {  // the kept dims of y, in order, must be kept dims of x in order
    int64_t last = -1;
    for (int64_t k = 0; k < r; ++k) {
      if (reduced[size_t(k)]) continue;
      if ((*perm)[size_t(k)] < last) return nullptr;
      last = (*perm)[size_t(k)];
    }
  }
  Value* na = g.add_constant(g.unique_name(y->name() + "_axes"),
                             Tensor::from_vector<int64_t>(axes, {int64_t(axes.size())}));
  Node* moved = g.insert_node(i + 1, n.op(), {n.input(0)->producer()->input(0), na}, {g.unique_name(y->name() + "_src")},
                              n.attrs(), n.loc());
  if (!keep) {
    moved->output(0)->set_type(y->type());
    return moved->output(0);
  }
  std::vector<Dim> src_dims(perm->size());
  for (size_t k = 0; k < perm->size(); ++k) src_dims[size_t((*perm)[k])] = y->shape()[k];
  moved->output(0)->set_type({y->dtype(), Shape(src_dims)});
  return add_transpose(g, i + 2, moved->output(0), *perm, n.loc());
}

// n (at position i) run on `srcs`, the untransposed inputs, followed by the transpose `perm`, which replaces n's
// output (keeping its name); n itself is left unread.
void sink_transpose(Graph& g, size_t i, Node& n, const std::vector<int64_t>& perm, const std::vector<Value*>& srcs) {
  Value* y = n.output(0);
  Node* moved = g.insert_node(i + 1, n.op(), srcs, {g.unique_name(y->name() + "_src")}, n.attrs(), n.loc());
  std::vector<Dim> src_dims(perm.size());  // y = T(moved): y's dim k is moved's dim perm[k]
  for (size_t k = 0; k < perm.size(); ++k) src_dims[size_t(perm[k])] = y->shape()[k];
  moved->output(0)->set_type({y->dtype(), Shape(src_dims)});
  std::string name = rewrite::free_name(g, y);
  Value* back = add_transpose(g, i + 2, moved->output(0), perm, n.loc());
  g.rename_value(back, name);
  g.replace_all_uses(y, back);
}

// A per-tensor QuantizeLinear / DequantizeLinear (scalar scale and zero point) of a transpose: element-wise, so it
// commutes with the transpose, whose permutation is returned (null otherwise). Its input and output types differ,
// which the generic element-wise case below does not allow. (A QOperator model's QLinearAdd imports as
// DequantizeLinear -> Add -> QuantizeLinear between channels-last QLinearConvs.)
const std::vector<int64_t>* per_tensor_quantization_of_transpose(const Node& n) {
  if ((n.op() != OpKind::QuantizeLinear && n.op() != OpKind::DequantizeLinear) || n.num_outputs() != 1) return nullptr;
  const std::vector<int64_t>* perm = transpose_perm(n.input(0));
  if (!perm || !n.output(0)->shape().rank_known() || perm->size() != n.output(0)->shape().rank()) return nullptr;
  for (size_t k = 1; k < n.num_inputs(); ++k) {
    const Value* v = n.input(k);
    if (v && !(v->is_constant() && v->shape().rank_known() && v->shape().rank() == 0)) return nullptr;
  }
  return perm;
}

// Step 1.
bool convert_nodes(Graph& g) {
  std::vector<Node*> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    if (!layout_capable(*n)) continue;
    std::vector<Value*> ins = n->inputs();
    size_t pos = i, rank = ins[0]->shape().rank();
    const std::vector<int64_t> to_last = layout::perm_to_channels_last(rank);
    ins[0] = add_transpose(g, pos++, ins[0], to_last, n->loc());
    if (n->op() == OpKind::FusedConv && ins.size() > 3 && ins[3]) ins[3] = add_transpose(g, pos++, ins[3], to_last, n->loc());
    AttrMap attrs = n->attrs();
    attrs["channels_last"] = Attribute(int64_t(1));
    Value* y = n->output(0);
    Node* cl = g.insert_node(pos + 1, n->op(), ins, {g.unique_name(y->name() + "_nhwc")}, attrs, n->loc());
    cl->output(0)->set_type({y->dtype(), Shape(layout::to_channels_last(y->shape().dims()))});
    std::string name = rewrite::free_name(g, y);
    Value* back = add_transpose(g, pos + 2, cl->output(0), layout::perm_to_channels_first(rank), n->loc());
    g.rename_value(back, name);
    g.replace_all_uses(y, back);
    dead.push_back(n);
    i = pos + 2;
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

// Steps 2 and 3, once over the graph; true when something changed.
bool merge_and_sink(Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    if (n->op() == OpKind::Transpose && n->has_attr("perm")) {
      const std::vector<int64_t>* inner = transpose_perm(n->input(0));
      if (!inner) continue;
      const std::vector<int64_t>& outer = n->attrs().at("perm").ints();
      std::vector<int64_t> composed;
      bool identity = true;
      for (size_t k = 0; k < outer.size(); ++k) {
        composed.push_back((*inner)[size_t(outer[k])]);
        identity = identity && composed.back() == int64_t(k);
      }
      Value* src = n->input(0)->producer()->input(0);
      if (identity) {
        changed |= rewrite::replace_value(g, n->output(0), src);
      } else {
        n->set_input(0, src);
        n->attrs()["perm"] = Attribute(composed);
        changed = true;
      }
      continue;
    }
    if (sink_below_concat(g, i, *n)) {
      changed = true;
      i += 2;
      continue;
    }
    Value* sunk = sink_below_reshape(g, i, *n);
    if (!sunk) sunk = sink_below_slice(g, i, *n);
    if (!sunk) sunk = sink_below_reduce(g, i, *n);
    if (sunk) {
      std::string name = rewrite::free_name(g, n->output(0));
      g.rename_value(sunk, name);
      g.replace_all_uses(n->output(0), sunk);
      changed = true;
      continue;
    }
    if (Value* ss = batch_norm_as_scale_shift(g, i, *n)) {
      // The Mul and Add follow it; the next sweep moves the transpose below them.
      std::string name = rewrite::free_name(g, n->output(0));
      g.rename_value(ss, name);
      g.replace_all_uses(n->output(0), ss);
      changed = true;
      continue;
    }
    if (const std::vector<int64_t>* p = per_tensor_quantization_of_transpose(*n)) {
      std::vector<Value*> srcs = n->inputs();
      srcs[0] = n->input(0)->producer()->input(0);
      sink_transpose(g, i, *n, *p, srcs);
      changed = true;
      i += 2;
      continue;
    }
    if (!commutes_with_transpose(*n)) continue;
    const std::vector<int64_t>* perm = nullptr;
    bool all = n->num_inputs() > 0;
    const Value* y0 = n->output(0);
    // Inputs of the output's dtype and rank: broadcasting is per axis, so it commutes with one permutation of
    // every input's axes (a squeeze-excitation block's Mul of [1, C, H, W] by [1, C, 1, 1]). Constants of that
    // dtype and at most that rank are permuted instead; at least one input must be a transpose.
    // Scalar constants (Clip's bounds, PaddlePaddle's hard-swish `x * Clip(x + 3, 0, 6) / 6`) stay as they are.
    bool clip = n->op() == OpKind::Clip;
    for (size_t k = 0; k < n->num_inputs(); ++k) {
      Value* v = n->input(k);
      if (!v) {  // an absent optional input: Clip's bound
        all = all && clip;
        continue;
      }
      const std::vector<int64_t>* p = transpose_perm(v);
      bool scalar = !p && v->is_constant() && v->shape().rank_known() && v->shape().rank() == 0;
      bool constant = !p && !scalar && !clip && small_constant(v, y0->shape().rank_known() ? y0->shape().rank() : 0);
      all = all && (p || constant || scalar) && (!p || !perm || *p == *perm) && (!clip || (k == 0) == bool(p)) &&
            v->dtype() == y0->dtype() && v->shape().rank_known() && y0->shape().rank_known() &&
            (constant || scalar || v->shape().rank() == y0->shape().rank());
      perm = p ? p : perm;
    }
    if (!all || !perm || perm->size() != y0->shape().rank()) continue;
    // op(T(a), T(b)) -> T(op(a, b)): the op runs in the source layout, the transpose moves below it.
    std::vector<Value*> srcs;
    for (Value* v : n->inputs()) {
      bool scalar = v && !transpose_perm(v) && v->is_constant() && v->shape().rank() == 0;
      srcs.push_back(!v || scalar ? v : transpose_perm(v) ? v->producer()->input(0) : permuted_constant(g, v, *perm));
    }
    sink_transpose(g, i, *n, *perm, srcs);
    changed = true;
    i += 2;
  }
  return changed;
}

bool assign(Graph& g) {
  if (!convert_nodes(g)) return false;
  // Each sweep sees the previous one's result through sole producers; erasing unread nodes (old transposes, ops
  // moved below a transpose) keeps them sole.
  while (merge_and_sink(g)) rewrite::erase_dead_nodes(g, nullptr);
  rewrite::erase_dead_nodes(g, nullptr);
  return true;
}

}  // namespace

bool AssignLayoutsPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, assign); }

}  // namespace cuvil
