#include "frontend/onnx/static_sequences.h"

#include <onnx/onnx_pb.h>

#include <set>

#include "ir/shape_inference.h"

namespace cuvil {

namespace {

// The longest unrolled Loop: each iteration copies the body into the graph.
constexpr int64_t kMaxUnrolledIterations = 4096;

class SequenceConverter {
 public:
  explicit SequenceConverter(SequenceImportContext& ctx) : c_(ctx), g_(ctx.graph), n_(ctx.node) {}

  bool run() {
    const std::string& op = n_.op_type();
    if (op == "SequenceEmpty") return set_seq(out(0), {});
    if (op == "SequenceConstruct") return construct();
    if (op == "SequenceInsert") return insert();
    if (op == "SequenceErase") return erase();
    if (op == "SequenceAt") return at();
    if (op == "SequenceLength") return length();
    if (op == "ConcatFromSequence") return concat();
    if (op == "SplitToSequence") return split();
    if (op == "SequenceMap") return map();
    if (op == "Optional") return optional();
    if (op == "OptionalHasElement") return has_element();
    if (op == "OptionalGetElement") return get_element();
    if (op == "Identity" && reads_static(0)) return copy_static(in(0), out(0));
    if (op == "Loop" && reads_static_any(2)) return unroll_loop();
    for (int i = 0; i < n_.input_size(); ++i)
      if (reads_static(i))
        unresolved("input ", i, " ('", in(i), "') is ", kind_of(in(i)), ", which this op cannot take");
    return false;
  }

 private:
  SequenceImportContext& c_;
  Graph& g_;
  const onnx::NodeProto& n_;

  std::string where() const { return "ONNX " + n_.op_type() + " " + c_.loc.str(); }
  template <class... Args>
  [[noreturn]] void unresolved(const Args&... args) const {
    throw StaticSequenceError(str_cat(where(), ": ", args...,
                                      " (Cuvil resolves sequence and optional values when the graph is built)"));
  }
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(where(), ": ", args...);
  }

  std::string in(int i) const { return i < n_.input_size() ? n_.input(i) : std::string(); }
  std::string out(int i) const {
    if (i >= n_.output_size() || n_.output(i).empty()) error("output ", i, " is required");
    return n_.output(i);
  }
  bool reads_static(int i) const { return !in(i).empty() && c_.values.count(in(i)); }
  bool reads_static_any(int from) const {
    for (int i = from; i < n_.input_size(); ++i)
      if (reads_static(i)) return true;
    return false;
  }
  std::string kind_of(const std::string& name) const {
    auto it = c_.values.find(name);
    if (it == c_.values.end()) return "a tensor";
    if (it->second.kind == StaticValue::Kind::Stacked) return "a sequence (of run-time length)";
    return it->second.kind == StaticValue::Kind::None ? "an empty optional" : "a sequence";
  }

  const onnx::AttributeProto* attr(const std::string& name) const {
    for (const auto& a : n_.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t int_attr(const std::string& name, std::optional<int64_t> dflt) const {
    const auto* a = attr(name);
    if (!a) {
      if (!dflt) error("attribute '", name, "' is required");
      return *dflt;
    }
    if (a->type() != onnx::AttributeProto::INT) error("attribute '", name, "' must be an int");
    return a->i();
  }

  const std::vector<Value*>& seq(int i) const {
    std::string name = in(i);
    if (name.empty()) error("input ", i, " (a sequence) is required");
    auto it = c_.values.find(name);
    if (it == c_.values.end()) {
      if (g_.lookup(name)) error("input ", i, " ('", name, "') must be a sequence, not a tensor");
      error("input ", i, " ('", name, "') is not defined before this node");
    }
    if (it->second.kind == StaticValue::Kind::Stacked)
      unresolved("input ", i, " ('", name, "') is a sequence whose length is known only at run time (a Loop's ",
                 "appended list), which only ConcatFromSequence, SequenceAt and SequenceLength can read");
    if (it->second.kind != StaticValue::Kind::Sequence) error("input ", i, " ('", name, "') is an empty optional");
    return it->second.elems;
  }
  Value* tensor(int i) const {
    std::string name = in(i);
    if (name.empty()) error("input ", i, " is required");
    if (c_.values.count(name)) error("input ", i, " ('", name, "') must be a tensor, not ", kind_of(name));
    Value* v = g_.lookup(name);
    if (!v) error("input ", i, " ('", name, "') is not defined before this node");
    return v;
  }

  // The stacked tensor of input i when it is a sequence of run-time length, else null.
  Value* stacked_input(int i) const {
    if (!reads_static(i)) return nullptr;
    const StaticValue& v = c_.values.at(in(i));
    return v.kind == StaticValue::Kind::Stacked ? v.stacked : nullptr;
  }
  bool set_seq(const std::string& name, std::vector<Value*> elems) {
    c_.values[name] = StaticValue{StaticValue::Kind::Sequence, std::move(elems)};
    return true;
  }
  bool copy_static(const std::string& from, const std::string& to) {
    StaticValue v = c_.values.at(from);
    c_.values[to] = std::move(v);
    return true;
  }
  Value* node1(OpKind op, std::vector<Value*> inputs, const std::string& out_name, AttrMap attrs = {}) {
    return g_.add_node(op, std::move(inputs), {out_name}, std::move(attrs), c_.loc)->output(0);
  }
  Value* temp(OpKind op, std::vector<Value*> inputs, const std::string& hint, AttrMap attrs = {}) {
    return node1(op, std::move(inputs), g_.unique_name(hint), std::move(attrs));
  }
  Value* const_i64(const std::vector<int64_t>& v, const std::string& hint) {
    return g_.add_constant(g_.unique_name(hint), Tensor::from_vector<int64_t>(v, {int64_t(v.size())}));
  }

  // The value of a one-element integer or bool tensor known when the graph is built: a constant, or one reached
  // from a constant through ops that only retype or reshape it.
  static std::optional<int64_t> static_int(const Value* v) {
    for (int depth = 0; v && depth < 16; ++depth) {
      if (v->is_constant()) {
        const Tensor& t = v->constant();
        if (t.numel() != 1 || is_float(t.dtype())) return std::nullopt;
        return t.get_i64(0);
      }
      const Node* p = v->producer();
      if (!p) return std::nullopt;
      switch (p->op()) {
        case OpKind::Identity:
        case OpKind::Squeeze:
        case OpKind::Unsqueeze:
        case OpKind::Reshape:
        case OpKind::Flatten: v = p->input(0); break;
        case OpKind::Cast: {
          if (p->input(0) && is_float(p->input(0)->dtype()) && p->input(0)->is_constant()) return std::nullopt;
          v = p->input(0);
          break;
        }
        default: return std::nullopt;
      }
    }
    return std::nullopt;
  }
  // A position input: a constant in [-n, hi] (hi = n - 1 to read, n to insert), made non-negative.
  int64_t position(int i, int64_t n, int64_t hi, int64_t dflt) const {
    if (in(i).empty()) return dflt;
    auto p = static_int(tensor(i));
    if (!p) unresolved("position '", in(i), "' is computed at run time");
    if (*p < -n || *p > hi) error("position ", *p, " is out of range [", -n, ", ", hi, "] for a sequence of ", n);
    return *p < 0 ? *p + n : *p;
  }

  // ---- positions computed at run time: the sequence's length is still static, so the result is a fixed list of
  // elements, each picked at run time from the elements stacked on a new axis 0 (Gather). Stacking needs equal
  // element shapes, which Concat checks; a position out of range fails the run (Assert), as in ONNX Runtime.

  bool runtime_position(int i) const { return !in(i).empty() && !static_int(tensor(i)); }
  // The position input as an int64 scalar in [0, n + extra), checked at run time to lie in [-n, n - 1 + extra].
  Value* position_at_run_time(int i, int64_t n, int64_t extra) {
    const std::string base = out(0) + "_pos";
    Value* p = temp(OpKind::Cast, {tensor(i)}, base, {{"to", Attribute(int64_t(dtype_onnx_id(DType::i64)))}});
    p = temp(OpKind::Reshape, {p, const_i64({}, base + "_shape")}, base);
    Value* lo = g_.add_constant(g_.unique_name(base + "_lo"), Tensor::scalar<int64_t>(-n));
    Value* hi = g_.add_constant(g_.unique_name(base + "_hi"), Tensor::scalar<int64_t>(n - 1 + extra));
    Value* ok = temp(OpKind::And, {temp(OpKind::GreaterOrEqual, {p, lo}, base + "_ge"),
                                   temp(OpKind::LessOrEqual, {p, hi}, base + "_le")}, base + "_ok");
    g_.add_node(OpKind::Assert, {ok}, {},
                {{"message", Attribute(str_cat(where(), ": position '", in(i), "' is out of range [", -n, ", ",
                                               n - 1 + extra, "] for a sequence of ", n))}},
                c_.loc);
    Value* zero = g_.add_constant(g_.unique_name(base + "_zero"), Tensor::scalar<int64_t>(0));
    Value* len = g_.add_constant(g_.unique_name(base + "_n"), Tensor::scalar<int64_t>(n));
    return temp(OpKind::Where, {temp(OpKind::Less, {p, zero}, base + "_neg"), temp(OpKind::Add, {p, len}, base),
                                p}, base);
  }
  Value* stacked(const std::vector<Value*>& elems) {
    bool inferred = false;
    for (Value* e : elems) {
      if (e->producer() && !inferred) inferred = infer_so_far();
      if ((e->producer() && !inferred) || !e->shape().rank_known() || !(e->shape() == elems[0]->shape()))
        unresolved("the position '", in(n_.op_type() == "SequenceInsert" ? 2 : 1), "' is computed at run time, ",
                   "and the elements' shapes are not known to be equal (", elems[0]->type().str(), " and ",
                   e->type().str(), "), so the result's element shapes depend on it");
    }
    Value* axes = const_i64({0}, out(0) + "_axes");
    std::vector<Value*> parts;
    for (Value* e : elems) parts.push_back(temp(OpKind::Unsqueeze, {e, axes}, out(0) + "_part"));
    return temp(OpKind::Concat, parts, out(0) + "_stack", {{"axis", Attribute(int64_t(0))}});
  }
  Value* scalar_i64(int64_t v) {
    return g_.add_constant(g_.unique_name(out(0) + "_i"), Tensor::scalar<int64_t>(v));
  }
  // Element k of the result: stack[where(p > k, k, where(p == k, at_p, k_after))].
  Value* pick(Value* stack, Value* p, int64_t k, int64_t at_p, int64_t after) {
    Value* kv = scalar_i64(k);
    Value* idx = temp(OpKind::Where, {temp(OpKind::Greater, {p, kv}, out(0) + "_gt"), kv,
                                      temp(OpKind::Where, {temp(OpKind::Equal, {p, kv}, out(0) + "_eq"),
                                                           scalar_i64(at_p), scalar_i64(after)}, out(0) + "_idx")},
                      out(0) + "_idx");
    return temp(OpKind::Gather, {stack, idx}, out(0) + "_" + std::to_string(k), {{"axis", Attribute(int64_t(0))}});
  }

  bool construct() {
    std::vector<Value*> elems;
    for (int i = 0; i < n_.input_size(); ++i) elems.push_back(tensor(i));
    return set_seq(out(0), std::move(elems));
  }
  bool insert() {
    std::vector<Value*> elems = seq(0);
    Value* t = tensor(1);
    int64_t n = int64_t(elems.size());
    if (runtime_position(2)) {
      // Stacked as (s_0 .. s_n-1, t): element k is s_k before p, t at p, s_k-1 after.
      Value* p = position_at_run_time(2, n, 1);
      std::vector<Value*> all = elems;
      all.push_back(t);
      Value* stack = stacked(all);
      std::vector<Value*> result;
      for (int64_t k = 0; k <= n; ++k) result.push_back(pick(stack, p, k, n, k - 1));
      return set_seq(out(0), std::move(result));
    }
    int64_t p = position(2, n, n, n);
    elems.insert(elems.begin() + p, t);
    return set_seq(out(0), std::move(elems));
  }
  bool erase() {
    std::vector<Value*> elems = seq(0);
    int64_t n = int64_t(elems.size());
    if (n == 0) error("cannot erase from an empty sequence");
    if (runtime_position(1)) {
      // Element k is s_k before p, s_k+1 from p on.
      Value* p = position_at_run_time(1, n, 0);
      Value* stack = stacked(elems);
      std::vector<Value*> result;
      for (int64_t k = 0; k + 1 < n; ++k) result.push_back(pick(stack, p, k, k + 1, k + 1));
      return set_seq(out(0), std::move(result));
    }
    int64_t p = position(1, n, n - 1, n - 1);
    elems.erase(elems.begin() + p);
    return set_seq(out(0), std::move(elems));
  }
  bool at() {
    if (in(1).empty()) error("input 1 (position) is required");
    if (Value* st = stacked_input(0)) {
      Value* p = temp(OpKind::Cast, {tensor(1)}, out(0) + "_pos", {{"to", Attribute(int64_t(dtype_onnx_id(DType::i64)))}});
      p = temp(OpKind::Reshape, {p, const_i64({}, out(0) + "_scalar")}, out(0) + "_pos");
      node1(OpKind::Gather, {st, p}, out(0), {{"axis", Attribute(int64_t(0))}});
      return true;
    }
    const std::vector<Value*>& elems = seq(0);
    int64_t n = int64_t(elems.size());
    if (runtime_position(1)) {
      if (n == 0) error("cannot read from an empty sequence");
      Value* p = position_at_run_time(1, n, 0);
      node1(OpKind::Gather, {stacked(elems), p}, out(0), {{"axis", Attribute(int64_t(0))}});
      return true;
    }
    int64_t p = position(1, n, n - 1, 0);
    node1(OpKind::Identity, {elems[size_t(p)]}, out(0));
    return true;
  }
  bool length() {
    if (Value* st = stacked_input(0)) {
      Value* zero = g_.add_constant(g_.unique_name(out(0) + "_axis0"), Tensor::scalar<int64_t>(0));
      node1(OpKind::Gather, {temp(OpKind::Shape, {st}, out(0) + "_shape"), zero}, out(0),
            {{"axis", Attribute(int64_t(0))}});
      return true;
    }
    g_.add_constant(out(0), Tensor::scalar<int64_t>(int64_t(seq(0).size())));
    return true;
  }
  bool concat() {
    if (Value* st = stacked_input(0)) return concat_stacked(st);
    const std::vector<Value*>& elems = seq(0);
    if (elems.empty()) error("cannot concatenate an empty sequence");
    int64_t axis = int_attr("axis", std::nullopt);
    bool new_axis = int_attr("new_axis", 0) != 0;
    std::vector<Value*> parts = elems;
    if (new_axis) {
      Value* axes = const_i64({axis}, out(0) + "_axes");
      for (Value*& p : parts) p = temp(OpKind::Unsqueeze, {p, axes}, out(0) + "_part");
    }
    node1(OpKind::Concat, parts, out(0), {{"axis", Attribute(axis)}});
    return true;
  }

  // ConcatFromSequence of a stacked sequence [T, e_0 .. e_r-1]: with new_axis the stack with axis 0 moved to
  // `axis`; without, that with the moved axis merged into the next (a Reshape whose shape is computed in the graph).
  bool concat_stacked(Value* st) {
    int64_t axis = int_attr("axis", std::nullopt);
    bool new_axis = int_attr("new_axis", 0) != 0;
    if (st->producer() && !infer_so_far()) unresolved("the rank of the appended elements is not known");
    if (!st->shape().rank_known()) unresolved("the rank of the appended elements is not known");
    int64_t r = int64_t(st->shape().rank()) - 1;  // the elements' rank
    int64_t lim = new_axis ? r + 1 : r;
    if (axis < -lim || axis >= lim || (!new_axis && r == 0))
      error("axis ", axis, " is out of range for elements of rank ", r, new_axis ? " (new_axis)" : "");
    if (axis < 0) axis += lim;
    if (new_axis && axis == 0) {
      node1(OpKind::Identity, {st}, out(0));
      return true;
    }
    std::vector<int64_t> perm;  // axis 0 moved to `axis`
    for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
    perm.push_back(0);
    for (int64_t i = axis + 1; i <= r; ++i) perm.push_back(i);
    if (new_axis) {
      node1(OpKind::Transpose, {st}, out(0), {{"perm", Attribute(perm)}});
      return true;
    }
    Value* moved = axis == 0 ? st : temp(OpKind::Transpose, {st}, out(0) + "_moved", {{"perm", Attribute(perm)}});
    Value* sh = temp(OpKind::Shape, {moved}, out(0) + "_shape");
    auto slice = [&](int64_t b, int64_t e) {
      return temp(OpKind::Slice, {sh, const_i64({b}, out(0) + "_b"), const_i64({e}, out(0) + "_e")},
                  out(0) + "_dims");
    };
    std::vector<Value*> dims;
    if (axis > 0) dims.push_back(slice(0, axis));
    dims.push_back(temp(OpKind::Mul, {slice(axis, axis + 1), slice(axis + 1, axis + 2)}, out(0) + "_merged"));
    if (axis + 2 <= r) dims.push_back(slice(axis + 2, r + 1));
    Value* shape = dims.size() == 1 ? dims[0]
                                    : temp(OpKind::Concat, dims, out(0) + "_dims", {{"axis", Attribute(int64_t(0))}});
    node1(OpKind::Reshape, {moved, shape}, out(0));
    return true;
  }

  // The size of `v`'s dim `axis` when the graph is built (from declared shapes and shape inference so far).
  std::optional<int64_t> static_dim(Value* v, int64_t axis) {
    auto from_type = [&]() -> std::optional<int64_t> {
      const Shape& s = v->shape();
      if (!s.rank_known()) return std::nullopt;
      int64_t r = int64_t(s.rank());
      if (axis < -r || axis >= r) error("axis ", axis, " is out of range for rank ", r);
      const Dim& d = s.dims()[size_t(axis < 0 ? axis + r : axis)];
      return d.is_const() ? std::optional<int64_t>(d.value()) : std::nullopt;
    };
    if (!v->producer()) return from_type();
    if (!infer_so_far()) return std::nullopt;
    return from_type();
  }
  // Node outputs get their types from inference, which runs after import: runs it over what is built so far.
  // Regions being built are not attached to their node yet, so each graph from the root down to this one is
  // inferred in turn (each sees the types of the values it captures).
  bool infer_so_far() {
    std::vector<Graph*> chain;
    for (Graph* g = &g_; g; g = g->parent()) chain.insert(chain.begin(), g);
    try {
      for (Graph* g : chain) infer_shapes(*g);
    } catch (const Error&) {
      return false;
    }
    return true;
  }
  bool split() {
    Value* x = tensor(0);
    int64_t axis = int_attr("axis", 0);
    bool keepdims = int_attr("keepdims", 1) != 0;
    std::vector<int64_t> sizes;
    bool squeeze = false;
    // A scalar split of 1 is the form without split: slices of 1, squeezed unless keepdims (torch's unbind
    // exports so; ONNX Runtime honours keepdims with a scalar split, which only a split of 1 allows).
    bool unit_split = false;
    if (!in(1).empty()) {
      Value* s = tensor(1);
      if (!s->is_constant()) unresolved("split '", in(1), "' is computed at run time");
      const Tensor& t = s->constant();
      if (t.shape().size() == 0 && t.get_i64(0) == 1) unit_split = true;
      else if (t.shape().size() == 0 && !keepdims) error("keepdims = 0 needs a split of 1, got ", t.get_i64(0));
    }
    if (!in(1).empty() && !unit_split) {
      const Tensor& t = tensor(1)->constant();
      if (t.shape().size() == 0) {
        int64_t chunk = t.get_i64(0);
        if (chunk <= 0) error("split ", chunk, " must be positive");
        auto d = static_dim(x, axis);
        if (!d) unresolved("the split axis of '", in(0), "' has a size known only at run time");
        for (int64_t at = 0; at < *d; at += chunk) sizes.push_back(std::min(chunk, *d - at));
      } else if (t.shape().size() == 1) {
        for (int64_t i = 0; i < t.numel(); ++i) sizes.push_back(t.get_i64(i));
      } else {
        error("split must be a scalar or 1-D, got ", t.type_str());
      }
    } else {
      auto d = static_dim(x, axis);
      if (!d) return unbind_stacked(x, axis, keepdims);
      sizes.assign(size_t(*d), 1);
      squeeze = !keepdims;
    }
    if (sizes.empty()) return set_seq(out(0), {});
    std::vector<std::string> names;
    for (size_t i = 0; i < sizes.size(); ++i) names.push_back(g_.unique_name(out(0) + "_" + std::to_string(i)));
    Node* sp = g_.add_node(OpKind::Split, {x, const_i64(sizes, out(0) + "_split")}, names,
                           {{"axis", Attribute(axis)}}, c_.loc);
    std::vector<Value*> elems = sp->outputs();
    if (squeeze) {
      Value* axes = const_i64({axis}, out(0) + "_axes");
      for (Value*& e : elems) e = temp(OpKind::Squeeze, {e, axes}, e->name() + "_sq");
    }
    return set_seq(out(0), std::move(elems));
  }

  // SplitToSequence into slices of 1 along an axis of run-time size (torch's unbind): a sequence of run-time
  // length, stacked: x with `axis` moved to the front (and kept as a dim of 1 with keepdims).
  bool unbind_stacked(Value* x, int64_t axis, bool keepdims) {
    if (x->producer()) infer_so_far();
    if (!x->shape().rank_known())
      unresolved("the split axis of '", in(0), "' has a size known only at run time, and its rank is not known");
    int64_t r = int64_t(x->shape().rank());
    if (axis < -r || axis >= r) error("axis ", axis, " is out of range for rank ", r);
    if (axis < 0) axis += r;
    Value* st = x;
    if (axis != 0) {
      std::vector<int64_t> perm{axis};
      for (int64_t i = 0; i < r; ++i)
        if (i != axis) perm.push_back(i);
      st = temp(OpKind::Transpose, {x}, out(0) + "_stacked", {{"perm", Attribute(perm)}});
    }
    if (keepdims) st = temp(OpKind::Unsqueeze, {st, const_i64({axis + 1}, out(0) + "_axes")}, out(0) + "_stacked");
    else if (st == x) st = temp(OpKind::Identity, {x}, out(0) + "_stacked");
    c_.values[out(0)] = StaticValue{StaticValue::Kind::Stacked, {}, st};
    return true;
  }

  const onnx::GraphProto& body_attr() const {
    const auto* a = attr("body");
    if (!a || a->type() != onnx::AttributeProto::GRAPH) error("attribute 'body' (a graph) is required");
    return a->g();
  }
  // A body output after inlining: the tensor it names (bodies that yield sequences are not unrolled).
  Value* body_tensor(const std::string& name, const char* what) const {
    if (c_.values.count(name)) unresolved("the body's ", what, " '", name, "' is ", kind_of(name));
    Value* v = g_.lookup(name);
    if (!v) error("the body's ", what, " '", name, "' is not defined");
    return v;
  }

  // SequenceMap: the body once per element; sequence inputs give their i-th element, tensor inputs themselves.
  bool map() {
    const onnx::GraphProto& body = body_attr();
    int64_t n = int64_t(seq(0).size());
    for (int i = 1; i < n_.input_size(); ++i)
      if (reads_static(i) && int64_t(seq(i).size()) != n)
        error("input ", i, " has ", seq(i).size(), " elements, input 0 has ", n);
    if (body.input_size() != n_.input_size() || body.output_size() != n_.output_size())
      error("the body has ", body.input_size(), " inputs and ", body.output_size(), " outputs; the node has ",
            n_.input_size(), " and ", n_.output_size());
    std::vector<std::vector<Value*>> results(static_cast<size_t>(n_.output_size()));
    for (int64_t k = 0; k < n; ++k) {
      std::vector<std::string> args;
      for (int i = 0; i < n_.input_size(); ++i)
        args.push_back(reads_static(i) ? seq(i)[size_t(k)]->name() : tensor(i)->name());
      std::vector<std::string> outs = c_.inline_body(body, args);
      for (size_t j = 0; j < outs.size(); ++j) results[j].push_back(body_tensor(outs[j], "output"));
    }
    for (int j = 0; j < n_.output_size(); ++j) set_seq(out(j), results[size_t(j)]);
    return true;
  }

  // A Loop carrying a sequence or optional, unrolled: its trip count must be a constant and its condition
  // constant true, so that the number of iterations (and each sequence's length) is known.
  bool unroll_loop() {
    const onnx::GraphProto& body = body_attr();
    if (in(0).empty()) return append_loop("a Loop carrying a sequence needs a trip count (M) to be unrolled");
    auto trips = static_int(tensor(0));
    if (!trips)
      return append_loop("a Loop carrying a sequence needs a trip count known when the graph is built to be "
                         "unrolled; '" + in(0) + "' is computed at run time");
    bool run = true;
    if (!in(1).empty()) {
      auto c = static_int(tensor(1));
      if (!c) return append_loop("a Loop carrying a sequence needs a condition known when the graph is built");
      run = *c != 0;
    }
    int64_t m = run ? std::max<int64_t>(*trips, 0) : 0;
    if (m > kMaxUnrolledIterations)
      return append_loop(str_cat("a Loop carrying a sequence is unrolled, and ", m,
                                 " iterations are more than the limit of ", kMaxUnrolledIterations));
    int num_carried = n_.input_size() - 2;
    int num_scan = body.output_size() - 1 - num_carried;
    if (num_carried < 0 || num_scan < 0 || body.input_size() != 2 + num_carried)
      error("the body has ", body.input_size(), " inputs and ", body.output_size(), " outputs for ", num_carried,
            " loop-carried values");
    std::vector<std::string> carried;
    for (int i = 2; i < n_.input_size(); ++i) {
      if (in(i).empty()) unresolved("loop-carried input ", i, " is omitted (an empty optional of unknown type)");
      if (!reads_static(i)) tensor(i);  // checks it is defined
      carried.push_back(in(i));
    }
    Value* cond_true = g_.add_constant(g_.unique_name(out(0) + "_cond"), Tensor::scalar<bool>(true));
    std::vector<std::vector<Value*>> scans(static_cast<size_t>(num_scan));
    for (int64_t k = 0; k < m; ++k) {
      Value* iter = g_.add_constant(g_.unique_name(out(0) + "_iter" + std::to_string(k)), Tensor::scalar<int64_t>(k));
      std::vector<std::string> args{iter->name(), cond_true->name()};
      args.insert(args.end(), carried.begin(), carried.end());
      std::vector<std::string> outs = c_.inline_body(body, args);
      auto cond = static_int(body_tensor(outs[0], "condition"));
      if (!cond) unresolved("the body's condition is computed at run time, so the number of iterations is not "
                            "known when the graph is built");
      if (*cond == 0 && k + 1 < m) unresolved("the body ends the loop early (its condition is false)");
      for (int i = 0; i < num_carried; ++i) carried[size_t(i)] = outs[size_t(1 + i)];
      for (int j = 0; j < num_scan; ++j) scans[size_t(j)].push_back(body_tensor(outs[size_t(1 + num_carried + j)],
                                                                                "scan output"));
    }
    for (int i = 0; i < num_carried && i < n_.output_size(); ++i) {
      if (n_.output(i).empty()) continue;
      if (c_.values.count(carried[size_t(i)])) copy_static(carried[size_t(i)], n_.output(i));
      else node1(OpKind::Identity, {g_.lookup(carried[size_t(i)])}, n_.output(i));
    }
    for (int j = 0; j < num_scan && num_carried + j < n_.output_size(); ++j) {
      std::string name = n_.output(num_carried + j);
      if (name.empty()) continue;
      if (m == 0) unresolved("a Loop of zero iterations has scan outputs of unknown shape");
      Value* axes = const_i64({0}, name + "_axes");
      std::vector<Value*> parts;
      for (Value* v : scans[size_t(j)]) parts.push_back(temp(OpKind::Unsqueeze, {v, axes}, name + "_part"));
      node1(OpKind::Concat, parts, name, {{"axis", Attribute(int64_t(0))}});
    }
    return true;
  }

  // How often `name` is read in `g` (node inputs, here and in nested regions, and graph outputs).
  static int count_uses(const onnx::GraphProto& g, const std::string& name) {
    int n = 0;
    for (const auto& o : g.output()) n += o.name() == name;
    for (const auto& node : g.node()) {
      for (const auto& i : node.input()) n += i == name;
      for (const auto& a : node.attribute()) {
        if (a.has_g()) n += count_uses(a.g(), name);
        for (const auto& sg : a.graphs()) n += count_uses(sg, name);
      }
    }
    return n;
  }

  // A Loop that cannot be unrolled, whose carried sequences start empty and get one tensor appended per iteration
  // (SequenceInsert(seq_in, v) the only use of seq_in, its result only the body's output): each such sequence
  // becomes a scan output of the Loop, a Stacked value (its elements must then share one shape, which the Loop
  // checks at run time as it stacks them).
  bool append_loop(const std::string& why_not_unrolled) {
    const onnx::GraphProto& body = body_attr();
    int num_carried = n_.input_size() - 2;
    if (num_carried < 0 || body.input_size() != 2 + num_carried || body.output_size() < 1 + num_carried)
      error("the body has ", body.input_size(), " inputs and ", body.output_size(), " outputs for ", num_carried,
            " loop-carried values");
    int num_scan = body.output_size() - 1 - num_carried;
    std::vector<bool> appended(static_cast<size_t>(num_carried), false);
    std::vector<std::string> elems(static_cast<size_t>(num_carried));  // the tensor appended per iteration
    std::set<const onnx::NodeProto*> inserts;
    for (int k = 0; k < num_carried; ++k) {
      if (!reads_static(2 + k)) continue;
      const StaticValue& init = c_.values.at(in(2 + k));
      if (init.kind != StaticValue::Kind::Sequence || !init.elems.empty())
        unresolved(why_not_unrolled, "; nor is '", in(2 + k), "' an empty sequence that the body appends to");
      const std::string& bi = body.input(2 + k).name();
      const std::string& bo = body.output(1 + k).name();
      const onnx::NodeProto* ins = nullptr;
      for (const auto& node : body.node())
        for (const auto& o : node.output())
          if (o == bo) ins = &node;
      if (!ins || ins->op_type() != "SequenceInsert" || ins->input_size() != 2 || ins->input(0) != bi ||
          count_uses(body, bi) != 1 || count_uses(body, bo) != 1)
        unresolved(why_not_unrolled, "; nor does the body only append one tensor per iteration to '", bi, "'");
      appended[size_t(k)] = true;
      elems[size_t(k)] = ins->input(1);
      inserts.insert(ins);
    }
    // The rewritten Loop: appended sequences leave the carried values and join the scan outputs, last.
    onnx::NodeProto loop = n_;
    onnx::GraphProto* nb = nullptr;
    for (auto& a : *loop.mutable_attribute())
      if (a.name() == "body") nb = a.mutable_g();
    nb->clear_input();
    nb->clear_output();
    nb->clear_node();
    loop.clear_input();
    loop.clear_output();
    for (int i = 0; i < 2; ++i) {
      *nb->add_input() = body.input(i);
      loop.add_input(in(i));
    }
    *nb->add_output() = body.output(0);
    std::vector<std::string> stacked_names;
    for (int k = 0; k < num_carried; ++k) {
      std::string out_k = k < n_.output_size() ? n_.output(k) : "";
      if (appended[size_t(k)]) continue;
      *nb->add_input() = body.input(2 + k);
      *nb->add_output() = body.output(1 + k);
      loop.add_input(in(2 + k));
      loop.add_output(out_k);
    }
    for (int j = 0; j < num_scan; ++j) {
      *nb->add_output() = body.output(1 + num_carried + j);
      loop.add_output(num_carried + j < n_.output_size() ? n_.output(num_carried + j) : "");
    }
    for (const auto& node : body.node())
      if (!inserts.count(&node)) *nb->add_node() = node;
    for (int k = 0; k < num_carried; ++k) {
      if (!appended[size_t(k)]) continue;
      // (an Identity, so that the scan output is the body's own value even when it appends an outer one)
      std::string scan = body.output(1 + k).name() + "_appended";
      auto* id = nb->add_node();
      id->set_op_type("Identity");
      id->add_input(elems[size_t(k)]);
      id->add_output(scan);
      nb->add_output()->set_name(scan);
      std::string out_k = k < n_.output_size() ? n_.output(k) : "";
      std::string name = g_.unique_name((out_k.empty() ? scan : out_k) + "_stacked");
      loop.add_output(name);
      stacked_names.push_back(out_k.empty() ? "" : name);
    }
    c_.convert_node(loop);
    size_t at = 0;
    for (int k = 0; k < num_carried; ++k) {
      if (!appended[size_t(k)]) continue;
      const std::string& name = stacked_names[at++];
      if (!name.empty())
        c_.values[n_.output(k)] = StaticValue{StaticValue::Kind::Stacked, {}, g_.lookup(name)};
    }
    return true;
  }

  bool optional() {
    if (in(0).empty()) {
      c_.values[out(0)] = StaticValue{StaticValue::Kind::None, {}};
      return true;
    }
    if (reads_static(0)) return copy_static(in(0), out(0));
    node1(OpKind::Identity, {tensor(0)}, out(0));
    return true;
  }
  bool has_element() {
    bool has = !in(0).empty();
    if (has && reads_static(0)) has = c_.values.at(in(0)).kind != StaticValue::Kind::None;
    else if (has) tensor(0);
    g_.add_constant(out(0), Tensor::scalar<bool>(has));
    return true;
  }
  bool get_element() {
    if (in(0).empty()) error("input 0 is required (an empty optional has no element)");
    if (reads_static(0)) {
      if (c_.values.at(in(0)).kind == StaticValue::Kind::None) error("the optional '", in(0), "' is empty");
      return copy_static(in(0), out(0));
    }
    node1(OpKind::Identity, {tensor(0)}, out(0));
    return true;
  }
};

}  // namespace

bool is_sequence_op(const std::string& op) {
  return op.rfind("Sequence", 0) == 0 || op == "SplitToSequence" || op == "ConcatFromSequence" ||
         op.rfind("Optional", 0) == 0;
}

bool convert_static_sequence_node(SequenceImportContext& ctx) { return SequenceConverter(ctx).run(); }

}  // namespace cuvil
