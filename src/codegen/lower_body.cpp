// lower_body: a FusedKernel's body at concrete input shapes -> a Kernel with its run-time dims and strides, in the
// named stages lower.h lists (block, space, operands, views, merge, exprs). What each op contributes comes from its
// lowering record (op_lowering.h): its block, the roles of its inputs and outputs, its formula.
//
// At the shapes of a call, operand strides are computed over the broadcast iteration space and dims merged
// wherever every operand allows, so [B, S, H] + [H] runs as [B*S, H]. Only the merged rank and each operand's
// innermost access kind enter the kernel: sizes and strides are run-time arguments, so other batch or sequence
// lengths reuse the compiled code.
#include <algorithm>

#include "codegen/op_lowering.h"
#include "ir/shape_inference.h"

namespace cuvil::codegen {

namespace {

std::vector<int64_t> without_ones(std::vector<int64_t> dims) {
  std::erase(dims, int64_t(1));
  return dims;
}

// Shapes: right-aligned broadcast of `s` into `acc`; false when they do not broadcast.
bool broadcast_into(std::vector<int64_t>& acc, const std::vector<int64_t>& s) {
  if (s.size() > acc.size()) acc.insert(acc.begin(), s.size() - acc.size(), 1);
  size_t off = acc.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t& d = acc[off + i];
    if (s[i] == d || s[i] == 1) continue;
    if (d != 1) return false;
    d = s[i];
  }
  return true;
}

// Strides (elements) of a contiguous tensor of `shape` placed right-aligned over `space`; 0 along broadcast dims.
std::vector<int64_t> strides_over(const std::vector<int64_t>& shape, const std::vector<int64_t>& space) {
  std::vector<int64_t> st(space.size(), 0);
  int64_t s = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t d = space.size() - 1 - i;
    size_t sd = shape.size() - 1 - i;
    st[d] = shape[sd] == 1 ? 0 : s;
    s *= shape[sd];
  }
  return st;
}

// Strides over `space` of a Transpose of a contiguous tensor of shape `in` by `perm`: the output's dim d is the
// input's dim perm[d], placed right-aligned over `space`; 0 along broadcast dims.
std::vector<int64_t> transposed_strides_over(const std::vector<int64_t>& in, const std::vector<int64_t>& perm,
                                             const std::vector<int64_t>& space) {
  std::vector<int64_t> contiguous(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * in[d];
  std::vector<int64_t> st(space.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) {
    size_t od = perm.size() - 1 - i, sd = space.size() - 1 - i;
    size_t id = size_t(perm[od]);
    st[sd] = in[id] == 1 ? 0 : contiguous[id];
  }
  return st;
}

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

template <class T, class V>
bool contains(const std::vector<T>& list, const V& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

// One lowering of one body at one set of input shapes; each stage a method, in order.
class BodyLowering {
 public:
  BodyLowering(const Graph& body, const std::vector<std::vector<int64_t>>& shapes, std::string* why,
               const StageObserver& observe)
      : body_(body), ins_(body.inputs()), shapes_(shapes), why_(why), observe_(observe) {
    CUVIL_CHECK(shapes.size() == ins_.size(), "fused body takes ", ins_.size(), " inputs, given ", shapes.size());
    std::vector<TensorType> in_types;
    for (size_t i = 0; i < ins_.size(); ++i) in_types.push_back({ins_[i]->dtype(), Shape::of(shapes[i])});
    types_ = infer_region_types(body, in_types);
  }

  std::optional<LoweredKernel> run() {
    if (!stage("block", &BodyLowering::find_block, &BodyLowering::describe_block)) return std::nullopt;
    if (!stage("space", &BodyLowering::find_space, &BodyLowering::describe_space)) return std::nullopt;
    if (!stage("operands", &BodyLowering::add_operands, &BodyLowering::describe_operands)) return std::nullopt;
    if (!stage("views", &BodyLowering::add_views, &BodyLowering::describe_views)) return std::nullopt;
    if (!stage("merge", &BodyLowering::merge_dims, &BodyLowering::describe_merge)) return std::nullopt;
    if (!stage("exprs", &BodyLowering::build_exprs, &BodyLowering::describe_exprs)) return std::nullopt;
    return std::move(lk_);
  }

 private:
  const Graph& body_;
  const std::vector<Value*>& ins_;
  const std::vector<std::vector<int64_t>>& shapes_;
  std::string* why_;
  const StageObserver& observe_;
  std::vector<TensorType> types_;

  // block
  ReducedBlock red_;                    // the same for every reduction of the body (count 0: none)
  std::vector<const Value*> row_only_;  // results without the reduced dims: no place in the full space
  std::vector<const Value*> entries_;   // K values per row (TopK's), where the row has its own length
  int64_t topk_ = 0;
  // space
  std::vector<bool> view_only_;  // inputs read only through views: their own shape does not enter the space
  std::vector<int64_t> space_;   // the full iteration space
  size_t lo_ = 0, hi_ = 0;       // the reduced dims [lo, hi); a row of the kernel runs over them
  std::vector<int64_t> row_shape_, row_keep_;  // the space without the reduced dims / with them at 1
  // operands, views
  LoweredKernel lk_;
  std::vector<std::vector<int64_t>> st_;  // per operand, its strides over the full space
  struct View {
    const Node* node;
    size_t slot;
    int operand;
  };
  std::vector<View> views_;

  bool no(const std::string& message) {
    if (why_) *why_ = message;
    return false;
  }
  std::vector<int64_t> dims_of(const Value* v) const { return types_[size_t(v->id())].shape.static_dims(); }
  bool is_entries(const Value* v) const { return contains(entries_, v); }
  bool is_row_only(const Value* v) const { return is_entries(v) || contains(row_only_, v); }
  int input_index(const Value* v) const {
    auto at = std::find(ins_.begin(), ins_.end(), v);
    return at == ins_.end() ? -1 : int(at - ins_.begin());
  }

  bool stage(const char* name, bool (BodyLowering::*step)(), std::string (BodyLowering::*describe)() const) {
    if (!(this->*step)()) return false;
    if (observe_) observe_(name, (this->*describe)());
    return true;
  }

  bool find_block();
  std::string describe_block() const;
  bool find_space();
  bool check_outputs_cover_space();
  std::string describe_space() const;
  bool add_operands();
  std::string describe_operands() const;
  bool add_views();
  bool add_view(const Node& n, size_t slot, std::vector<int64_t> strides);
  std::string describe_views() const;
  bool merge_dims();
  std::string describe_merge() const;
  bool build_exprs();
  bool lower_node(ExprBuilder& L, const Node& n, std::vector<int>& expr_of);
  bool checked_inputs(const Node& n);
  void store_results(ExprBuilder& L, const Node& n, std::vector<int>& out);
  std::string describe_exprs() const { return lk_.kernel.str(); }
};

// ---- block: every node generates; the reduced block (one for the whole body); the outputs without a place in
// the space (keepdims=0 reductions, TopK's K values per row)

bool BodyLowering::find_block() {
  for (const auto& n : body_.nodes()) {
    std::string w;
    if (!can_generate(*n, &w)) return no(n->describe() + ": " + w);
    for (const Value* v : n->inputs())
      if (is_entries(v)) return no(n->describe() + ": reads a TopK result, which is no element of the kernel's space");
    for (size_t o = 0; o < n->num_outputs(); ++o) {
      OutputUse use = output_use(*n, o);
      if (use.role != OutputRole::entries) continue;
      if (topk_ != 0 && use.entries != topk_) return no("TopKs of different K");
      topk_ = use.entries;
      entries_.push_back(n->output(o));
    }
    std::optional<ReducedBlock> rn = reduced_block(*n);
    if (!rn) return no(n->describe() + ": reduced axes are not one block");
    if (rn->count == 0) continue;
    if (red_.count != 0 && !(*rn == red_)) return no("reductions over different blocks of dims");
    red_ = *rn;
    for (size_t o = 0; o < n->num_outputs(); ++o)
      if (output_use(*n, o).role == OutputRole::row_dropped) row_only_.push_back(n->output(o));
  }
  return true;
}

std::string BodyLowering::describe_block() const {
  static const char* kKinds[] = {"reduce", "scan", "reverse scan", "window", "select"};
  std::string s = red_.count == 0 ? "element-wise" : str_cat(kKinds[int(red_.kind)], " over ", red_.count, " dims, ",
                                                             red_.after, " after (", red_.after ? "columns" : "rows", ")");
  for (const Value* v : row_only_) s += "\n  %" + v->name() + ": one value per row, without the reduced dims";
  for (const Value* v : entries_) s += str_cat("\n  %", v->name(), ": ", topk_, " values per row");
  return s;
}

// ---- space: the full iteration space, every input (but those read only through views) and every node output
// broadcast together, and the row within it

bool BodyLowering::find_space() {
  // Inputs that only views read (a Transpose's input, per-axis or per-row parameters): the kernel reads them
  // through other strides, never at their own shape, which therefore does not enter the space.
  view_only_.assign(ins_.size(), true);
  for (const auto& n : body_.nodes())
    for (size_t j = 0; j < n->num_inputs(); ++j) {
      InputRole role = input_use(*n, j).role;
      bool view = role == InputRole::permuted || role == InputRole::along_axis || role == InputRole::per_row;
      int i = view ? -1 : input_index(n->input(j));
      if (i >= 0) view_only_[size_t(i)] = false;
    }
  for (const Value* v : body_.outputs())
    if (int i = input_index(v); i >= 0) view_only_[size_t(i)] = false;
  for (size_t i = 0; i < ins_.size(); ++i)
    if (!view_only_[i] && !broadcast_into(space_, shapes_[i])) return no("inputs do not broadcast together");
  for (const auto& n : body_.nodes())
    for (const Value* v : n->outputs())
      if (!is_row_only(v) && !broadcast_into(space_, dims_of(v))) return no("values do not broadcast together");
  const size_t r = space_.size();
  if (size_t(red_.count + red_.after) > r) return no("reduction over more dims than the space has");
  hi_ = r - size_t(red_.after), lo_ = hi_ - size_t(red_.count);
  row_keep_ = space_;
  for (size_t d = 0; d < r; ++d) {
    if (d < lo_ || d >= hi_) row_shape_.push_back(space_[d]);
    else row_keep_[d] = 1;
  }
  return check_outputs_cover_space();
}

// Every node output has the full shape or (with reductions) one value per row; a reduction reduces a value of the
// full shape, and only it, or element-wise work on per-row values, gives one value per row.
bool BodyLowering::check_outputs_cover_space() {
  const int k = red_.count;
  for (const auto& n : body_.nodes()) {
    bool reduces = reduced_block(*n)->count > 0;
    if (reduces && dims_of(n->input(0)) != space_)
      return no(n->describe() + ": reduces a value narrower than the iteration space");
    bool row_inputs = true;  // element-wise work on per-row values (or scalars)
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (!v || is_axes_input(*n, i)) continue;
      if (v->is_constant() ? v->constant().numel() != 1 : dims_of(v) == space_ && space_ != row_keep_)
        row_inputs = false;
    }
    for (size_t o = 0; o < n->num_outputs(); ++o) {
      auto d = dims_of(n->output(o));
      if (is_entries(n->output(o))) {  // the space with K in place of the row
        std::vector<int64_t> want = space_;
        want[lo_] = topk_;
        if (d != want) return no(n->describe() + ": output shape does not match its input's with K along the axis");
        continue;
      }
      // (Without keepdims a reduction also drops the reduced axes of size 1 outside the block.)
      bool full = d == space_,
           row = k > 0 && (d == row_keep_ || (is_row_only(n->output(o)) && without_ones(d) == without_ones(row_shape_)));
      if (!full && !row) return no(n->describe() + ": output shape does not cover the iteration space");
      OutputRole role = output_use(*n, o).role;
      bool row_result = role == OutputRole::per_row || role == OutputRole::row_dropped;
      if (!full && !row_result && (reduces || !row_inputs))
        return no(n->describe() + ": one value per row from an op that does not reduce");
    }
  }
  return true;
}

std::string BodyLowering::describe_space() const {
  std::string s = ints_str(space_);
  if (red_.count > 0) s += str_cat(", rows over dims [", lo_, ", ", hi_, ")");
  for (size_t i = 0; i < ins_.size(); ++i)
    if (view_only_[i]) s += "\n  %" + ins_[i]->name() + ": read only through views";
  return s;
}

// ---- operands: the body's inputs, then its outputs, with strides over the full space

bool BodyLowering::add_operands() {
  Kernel& kern = lk_.kernel;
  const size_t r = space_.size();
  for (size_t i = 0; i < ins_.size(); ++i) {
    kern.operands.push_back({ins_[i]->dtype(), Access::contiguous, false, false});
    st_.push_back(view_only_[i] ? std::vector<int64_t>(space_.size(), 0) : strides_over(shapes_[i], space_));
  }
  for (const Value* v : body_.outputs()) {
    auto d = dims_of(v);
    if (is_entries(v)) {  // K entries per row: contiguous in its own shape, whose row has K elements
      kern.operands.push_back({v->dtype(), Access::contiguous, true, true, false, int(topk_)});
      std::vector<int64_t> s(r, 0);
      int64_t step = 1;
      for (size_t dd = r; dd-- > 0;) {
        s[dd] = step;
        step *= dd == lo_ ? topk_ : space_[dd];
      }
      st_.push_back(std::move(s));
      continue;
    }
    bool per_row = d != space_;
    kern.operands.push_back({v->dtype(), per_row ? Access::broadcast : Access::contiguous, true, per_row});
    st_.push_back(strides_over(per_row ? row_keep_ : space_, space_));
    if (per_row) {  // a row output's own dims are contiguous even where the space has size 1
      int64_t s = 1;
      for (size_t dd = r; dd-- > 0;) {
        if (dd >= lo_ && dd < hi_) continue;
        st_.back()[dd] = s;
        s *= space_[dd];
      }
    }
  }
  return true;
}

std::string BodyLowering::describe_operands() const {
  std::string s;
  const Kernel& kern = lk_.kernel;
  for (size_t o = 0; o < kern.operands.size(); ++o) {
    bool out = kern.operands[o].is_output;
    const Value* v = out ? body_.outputs()[o - ins_.size()] : ins_[o];
    s += str_cat(o ? "\n" : "", out ? "out" : "in", o, " %", v->name(), ": ", dtype_name(kern.operands[o].dtype),
                 " strides ", ints_str(st_[o]));
  }
  return s;
}

// ---- views: one more operand each on a kernel input's buffer, read through other strides. A Transpose reads its
// input permuted; parameters along an axis ([C]) are read along that dim of the node's input 0; per-row parameters
// (a loss's targets) in the shape of the space without the reduced dims.

bool BodyLowering::add_view(const Node& n, size_t slot, std::vector<int64_t> strides) {
  int src = input_index(n.input(slot));
  if (src < 0) return false;
  views_.push_back({&n, slot, int(lk_.kernel.operands.size())});
  lk_.views.push_back(src);
  lk_.kernel.operands.push_back({ins_[size_t(src)]->dtype(), Access::contiguous, false, false});
  st_.push_back(std::move(strides));
  return true;
}

bool BodyLowering::add_views() {
  const size_t r = space_.size();
  for (const auto& n : body_.nodes()) {
    for (size_t j = 0; j < n->num_inputs(); ++j) {
      const Value* pv = n->input(j);
      InputUse use = input_use(*n, j);
      if (use.role == InputRole::permuted) {
        int src = input_index(pv);
        if (src < 0) return no(n->describe() + ": only a Transpose of a kernel input is fused");
        add_view(*n, j, transposed_strides_over(shapes_[size_t(src)], use.perm, space_));
        continue;
      }
      if (!pv || (use.role != InputRole::along_axis && use.role != InputRole::per_row)) continue;
      if (pv->is_constant() && pv->constant().numel() == 1) continue;  // an immediate already
      if (use.role == InputRole::per_row) {  // contiguous in its own shape: the space's dims but the reduced ones
        if (dims_of(pv) != row_shape_) return no(str_cat(n->describe(), ": input ", j, " does not have one value per row"));
        std::vector<int64_t> strides(space_.size(), 0);
        int64_t step = 1;
        for (size_t dd = r; dd-- > 0;) {
          if (dd >= lo_ && dd < hi_) continue;
          strides[dd] = space_[dd] == 1 ? 0 : step;
          step *= space_[dd];
        }
        if (!add_view(*n, j, strides)) return no(str_cat(n->describe(), ": input ", j, " is computed in the kernel"));
        continue;
      }
      std::vector<int64_t> x = dims_of(n->input(0)), p = dims_of(pv);
      size_t axis = size_t(use.axis);
      if (axis >= x.size() || p.size() != 1 || (p[0] != x[axis] && p[0] != 1))
        return no(str_cat(n->describe(), ": input ", j, " is not one value per position of dim ", axis));
      std::vector<int64_t> strides(space_.size(), 0);
      strides[space_.size() - x.size() + axis] = p[0] == 1 ? 0 : 1;
      if (!add_view(*n, j, strides)) return no(str_cat(n->describe(), ": input ", j, " is computed in the kernel"));
    }
  }
  return true;
}

std::string BodyLowering::describe_views() const {
  if (views_.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < views_.size(); ++i) {
    const View& v = views_[i];
    s += str_cat(i ? "\n" : "", "in", v.operand, ": %", ins_[size_t(lk_.views[i])]->name(), " as input ", v.slot,
                 " of ", v.node->describe(), ", strides ", ints_str(st_[size_t(v.operand)]));
  }
  return s;
}

// ---- merge: dims merged within the outer block and within the reduced block (in element mode everything is one
// block) wherever every operand's strides allow; the kernel's rank, its run-time dims and strides, and each
// operand's access along the innermost dim

bool BodyLowering::merge_dims() {
  struct Dim1 {
    int64_t size;
    std::vector<int64_t> strides;
  };
  auto merge_block = [&](size_t lo, size_t hi) {
    std::vector<Dim1> out;
    for (size_t d = lo; d < hi; ++d) {
      if (space_[d] == 1) continue;
      Dim1 cur{space_[d], {}};
      for (auto& s : st_) cur.strides.push_back(s[d]);
      if (!out.empty()) {
        Dim1& prev = out.back();
        bool ok = true;
        for (size_t o = 0; o < st_.size(); ++o) ok = ok && prev.strides[o] == cur.strides[o] * cur.size;
        if (ok) {
          prev.size *= cur.size;
          prev.strides = cur.strides;
          continue;
        }
      }
      out.push_back(cur);
    }
    return out;
  };
  std::vector<Dim1> merged;
  const Dim1 unit{1, std::vector<int64_t>(st_.size(), 0)};
  bool columns = false;
  if (red_.count == 0) {
    merged = merge_block(0, space_.size());
    if (merged.empty()) merged.push_back(unit);
  } else {
    merged = merge_block(0, lo_);
    std::vector<Dim1> rows = merge_block(lo_, hi_), cols = merge_block(hi_, space_.size());
    if (rows.size() > 1) return no("the reduced dims cannot be merged into one row for every operand");
    if (cols.size() > 1) return no("the dims after the reduced ones cannot be merged into one for every operand");
    merged.push_back(rows.empty() ? unit : rows[0]);
    columns = !cols.empty();  // else every dim after the reduced ones has size 1: a row kernel
    if (columns) merged.push_back(cols[0]);
  }
  Kernel& kern = lk_.kernel;
  kern.rank = int(merged.size());
  kern.columns = columns;
  lk_.rows = 1;
  for (size_t d = 0; d < merged.size(); ++d) {
    lk_.dims.push_back(merged[d].size);
    if (d + (columns ? 2 : 1) < merged.size()) lk_.rows *= merged[d].size;
  }
  lk_.inner = merged.back().size;
  lk_.reduced = columns ? merged[merged.size() - 2].size : 1;
  if (red_.count > 0 && (columns ? lk_.reduced : lk_.inner) == 0) return no("reduction over an empty row");
  for (size_t o = 0; o < st_.size(); ++o) {
    for (auto& m : merged) lk_.strides.push_back(m.strides[o]);
    int64_t& inner = lk_.strides.back();
    Operand& op = kern.operands[o];
    if (op.is_output) {
      if (op.entries > 0 && !columns) {  // TopK's pairs go along the output's row, at its own stride
        op.inner = Access::broadcast;
        continue;
      }
      if (!op.per_row || columns) {
        if (lk_.inner == 1) inner = 1;
        if (inner != 1) return no(str_cat("internal: output ", o, " is not contiguous along the innermost dim"));
        op.inner = Access::contiguous;
      } else {
        inner = 0;
      }
      continue;
    }
    if (lk_.inner == 1) inner = 0;
    op.inner = inner == 0 ? Access::broadcast : inner == 1 ? Access::contiguous : Access::strided;
    op.column_broadcast = columns && lk_.strides[lk_.strides.size() - 2] == 0;
  }
  return true;
}

std::string BodyLowering::describe_merge() const {
  const Kernel& kern = lk_.kernel;
  std::string s = str_cat("rank ", kern.rank, " (", red_.count == 0 ? "elements" : kern.columns ? "columns" : "rows",
                          "), dims ", ints_str(lk_.dims));
  for (size_t o = 0; o < kern.operands.size(); ++o) {
    std::vector<int64_t> strides(lk_.strides.begin() + long(o * lk_.dims.size()),
                                 lk_.strides.begin() + long((o + 1) * lk_.dims.size()));
    s += str_cat("\n  ", kern.operands[o].is_output ? "out" : "in", o, ": ", access_name(kern.operands[o].inner),
                 kern.operands[o].column_broadcast ? " column_broadcast" : "", ", strides ", ints_str(strides));
  }
  return s;
}

// ---- exprs: loads of the inputs, then each node's formula from its record, in body order

bool BodyLowering::build_exprs() {
  ExprBuilder L;
  L.k.rank = lk_.kernel.rank;
  L.k.columns = lk_.kernel.columns;
  L.k.operands = lk_.kernel.operands;
  std::vector<int> expr_of(body_.num_values(), -1);
  for (size_t i = 0; i < ins_.size(); ++i) expr_of[size_t(ins_[i]->id())] = L.load(int(i), scalar_of(ins_[i]->dtype()));
  std::vector<std::string> names;
  for (const auto& n : body_.nodes()) {
    if (!lower_node(L, *n, expr_of)) return false;
    std::string nm(op_name(n->op()));
    if (names.empty() || names.back() != nm) names.push_back(nm);
  }
  for (size_t j = 0; j < body_.outputs().size(); ++j)
    L.k.stores.push_back({int(ins_.size() + j), expr_of[size_t(body_.outputs()[j]->id())]});
  lk_.kernel = std::move(L.k);
  lk_.kernel.validate();
  for (size_t i = 0; i < names.size(); ++i) lk_.ops += (i ? "+" : "") + names[i];
  return true;
}

// Node n's expressions: its inputs' (scalar constants become immediates, views their loads), its record's formula,
// and what storing each result in its dtype does to it.
bool BodyLowering::lower_node(ExprBuilder& L, const Node& n, std::vector<int>& expr_of) {
  std::vector<int> in;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (!v || is_axes_input(n, i)) {  // read at compile time
      in.push_back(-1);
      continue;
    }
    int& e = expr_of[size_t(v->id())];
    if (e < 0 && v->is_constant()) {  // scalar constants become immediates
      const Tensor& t = v->constant();
      std::optional<double> imm = t.numel() == 1 && storable_dtype(t.dtype()) ? immediate(t) : std::nullopt;
      if (!imm) return no("constant '" + v->name() + "' is not a scalar the kernel can hold");
      e = L.cst(*imm, scalar_of(t.dtype()));
    }
    if (e < 0) return no(str_cat(n.describe(), ": input ", i, " has no expression"));
    in.push_back(e);
  }
  // Views replace the inputs they read (a Transpose is its view).
  for (const View& v : views_)
    if (v.node == &n) in[v.slot] = L.load(v.operand, scalar_of(n.input(v.slot)->dtype()));
  if (!checked_inputs(n)) return false;
  std::vector<int> out(n.num_outputs(), -1);
  if (!op_lowering(n.op())->lower(L, n, in, out, why_)) return false;
  store_results(L, n, out);
  for (size_t o = 0; o < out.size(); ++o) expr_of[size_t(n.output(o)->id())] = out[o];
  return true;
}

// Inputs the prepared kernel checks before running: integer divisors (for zeros), signed integer exponents (for
// negative values), a loss's targets (each a class or the ignored index; a constant one here). Each must be a
// kernel input, listed once.
bool BodyLowering::checked_inputs(const Node& n) {
  auto add_once = [](auto& list, const auto& entry) {
    if (!contains(list, entry)) list.push_back(entry);
  };
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    InputRole role = input_use(n, i).role;
    if (role != InputRole::divisor && role != InputRole::exponent) continue;
    int idx = input_index(n.input(i));
    if (idx < 0) return no(str_cat(n.describe(), ": input ", i, " is checked before the run but computed in the kernel"));
    add_once(role == InputRole::divisor ? lk_.nonzero_inputs : lk_.nonnegative_inputs, idx);
  }
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    InputUse use = input_use(n, i);
    if (!use.class_targets) continue;
    LoweredKernel::ClassTargets ct{-1, dims_of(n.input(0))[size_t(use.axis)], use.ignore};
    const Value* tv = n.input(i);
    if (tv->is_constant()) {
      int64_t t = tv->constant().get_i64(0);
      if (!((t >= 0 && t < ct.classes) || (ct.ignore && t == *ct.ignore)))
        return no(n.describe() + ": its constant target is not a class");
    } else {
      ct.input = input_index(tv);
      if (ct.input < 0) return no(n.describe() + ": its targets are computed in the kernel");
      add_once(lk_.class_targets, ct);
    }
  }
  return true;
}

// Operands of mixed storage are unified by the op's dtype rules: a cast where a result is stored in another type;
// a 16-bit float result is what the reference stores, rounded to nearest even (Cast to bf16 truncates); a narrow
// integer result is its low bits (results that pick among the inputs' values need no wrap).
void BodyLowering::store_results(ExprBuilder& L, const Node& n, std::vector<int>& out) {
  const OpLowering& rec = *op_lowering(n.op());
  for (size_t o = 0; o < out.size(); ++o) {
    DType dt = n.output(o)->dtype();
    Scalar want = scalar_of(dt);
    if (L.type(out[o]) != want) out[o] = L.cast(out[o], want);
    bool passes = rec.stores == Stores::passed;
    bool truncates = rec.truncates_bf16 && AttrReader(n).i("round_bf16") == 0;
    if (dt == DType::bf16 && !passes) out[o] = L.un(truncates ? Op::trunc_bf16 : Op::round_bf16, out[o]);
    if (dt == DType::f16 && !passes) out[o] = L.un(Op::round_f16, out[o]);
    if (narrow_int(dt) && rec.stores == Stores::computed)
      out[o] = L.add(is_signed(dt) ? Op::wrap_s : Op::wrap_u, L.type(out[o]), out[o], -1, -1, double(dtype_size(dt) * 8));
  }
}

}  // namespace

std::optional<LoweredKernel> lower_body(const Graph& body, const std::vector<std::vector<int64_t>>& input_shapes,
                                        std::string* why, const StageObserver& observe) {
  return BodyLowering(body, input_shapes, why, observe).run();
}

}  // namespace cuvil::codegen
