#include "ir/ops/infer_util.h"

namespace cuvil::infer {

int64_t normalize_axis(const InferContext& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) c.error("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

Shape broadcast(const InferContext& c, const Shape& a, const Shape& b) {
  if (!a.rank_known() || !b.rank_known()) return Shape::unknown_rank();
  size_t r = std::max(a.rank(), b.rank());
  std::vector<Dim> out(r);
  for (size_t i = 0; i < r; ++i) {
    bool has_a = i + a.rank() >= r, has_b = i + b.rank() >= r;
    Dim da = has_a ? a[i + a.rank() - r] : Dim(1);
    Dim db = has_b ? b[i + b.rank() - r] : Dim(1);
    if (da == db) out[i] = da;
    else if (da.is_const() && da.value() == 1) out[i] = db;
    else if (db.is_const() && db.value() == 1) out[i] = da;
    else if (da.is_const() && db.is_const())
      c.error("shapes ", a.str(), " and ", b.str(), " cannot be broadcast (dim ", i, ": ", da.value(), " vs ",
              db.value(), ")");
    else if (da.is_const()) out[i] = da;
    else if (db.is_const()) out[i] = db;
    else out[i] = Dim::max(da, db);
  }
  return Shape(out);
}

void same_as_input(InferContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); }

void broadcast_inputs(InferContext& c, std::optional<DType> dtype) {
  Shape s;
  bool first = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    s = first ? c.input_shape(i) : broadcast(c, s, c.input_shape(i));
    first = false;
  }
  c.set_output(0, dtype ? *dtype : c.input_dtype(0), s);
}

void expect_dtype(const InferContext& c, size_t i, std::initializer_list<DType> allowed) {
  DType t = c.input_dtype(i);
  for (DType a : allowed)
    if (a == t) return;
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  c.error("input ", i, " has dtype ", dtype_name(t), "; expected one of ", list);
}

void expect_same_dtype(const InferContext& c, size_t i, size_t j) {
  if (c.input_dtype(i) != c.input_dtype(j))
    c.error("inputs ", i, " and ", j, " must have the same dtype, got ", dtype_name(c.input_dtype(i)), " and ",
            dtype_name(c.input_dtype(j)));
}

std::optional<std::vector<int64_t>> const_ints(InferContext& c, size_t i) {
  const Tensor* t = c.input_value(i);
  if (!t) return std::nullopt;
  return t->to_i64_vector();
}

Shape fresh_shape(InferContext& c, size_t rank) {
  std::vector<Dim> d;
  for (size_t i = 0; i < rank; ++i) d.push_back(c.fresh_dim());
  return Shape(d);
}

}  // namespace cuvil::infer
