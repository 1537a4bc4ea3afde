#include "codegen/kernel_ir.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "support/error.h"

namespace cuvil::codegen {

const char* scalar_name(Scalar s) {
  switch (s) {
    case Scalar::f32: return "f32";
    case Scalar::i32: return "i32";
    case Scalar::i64: return "i64";
    case Scalar::i1: return "i1";
    case Scalar::f64: return "f64";
    case Scalar::u64: return "u64";
  }
  return "?";
}

const char* access_name(Access a) {
  switch (a) {
    case Access::contiguous: return "contiguous";
    case Access::broadcast: return "broadcast";
    case Access::strided: return "strided";
  }
  return "?";
}

namespace {

// What kernel_ops.def says of each op, indexed by Op.
enum class Kind : uint8_t { plain, math, libm, row, scan };
enum class Rule : uint8_t { same, floats, f64, f32, compare, logical, test, select, any, leaf, own };
struct OpInfo {
  const char* name;
  int arity;
  Kind kind;
  Rule rule;
};
constexpr OpInfo kOps[] = {
#define CUVIL_KERNEL_OP(name, arity, kind, rule) {#name, arity, Kind::kind, Rule::rule},
#include "codegen/kernel_ops.def"
#undef CUVIL_KERNEL_OP
};
const OpInfo& info(Op op) { return kOps[size_t(op)]; }

}  // namespace

const char* op_name(Op op) { return size_t(op) < std::size(kOps) ? info(op).name : "?"; }
int arity(Op op) { return info(op).arity; }
bool is_row_reduction(Op op) { return info(op).kind == Kind::row; }
bool is_transcendental(Op op) { return info(op).kind == Kind::math || info(op).kind == Kind::libm; }
bool f64_only(Op op) { return info(op).kind == Kind::libm; }

Scalar scalar_of(DType storage) {
  switch (storage) {
    case DType::f32: case DType::f16: case DType::bf16: return Scalar::f32;
    case DType::i32: case DType::i8: case DType::u8: case DType::i16: case DType::u16: return Scalar::i32;
    case DType::i64: case DType::u32: return Scalar::i64;
    case DType::boolean: return Scalar::i1;
    case DType::f64: return Scalar::f64;
    case DType::u64: return Scalar::u64;
    default: fail("generated kernels do not store dtype ", dtype_name(storage));
  }
}

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool Kernel::has_row_reductions() const {
  for (const Expr& e : exprs)
    if (is_row_reduction(e.op)) return true;
  return false;
}
bool Kernel::has_scans() const {
  for (const Expr& e : exprs)
    if (e.op == Op::scan_sum) return true;
  return false;
}
bool Kernel::has_shifted_loads() const {
  for (const Expr& e : exprs)
    if (e.op == Op::load && e.imm != 0) return true;
  return false;
}
bool Kernel::scans_reverse() const {
  for (const Expr& e : exprs)
    if (e.op == Op::scan_sum) return (int(e.imm) & kScanReverse) != 0;
  return false;
}

std::vector<bool> Kernel::row_uniform() const {
  std::vector<bool> u(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& e = exprs[i];
    if (e.op == Op::load) {
      const Operand& o = operands[size_t(e.operand)];
      u[i] = e.imm == 0 && (columns ? o.column_broadcast : o.inner == Access::broadcast);
    }
    else if (e.op == Op::constant || e.op == Op::row_size || is_row_reduction(e.op)) u[i] = true;
    else if (e.op == Op::row_index || e.op == Op::scan_sum) u[i] = false;
    else u[i] = (e.a < 0 || u[size_t(e.a)]) && (e.b < 0 || u[size_t(e.b)]) && (e.c < 0 || u[size_t(e.c)]);
  }
  return u;
}

namespace {

// Which expressions the element-level (not per-row) outputs need, walking back from the stores; the walk does
// not pass row-uniform expressions (computed once a row) nor `stop` (a value kept from an earlier pass).
std::vector<bool> needed_by_elements(const Kernel& k, const std::vector<bool>& uniform, int stop) {
  std::vector<bool> needed(k.exprs.size(), false);
  for (const Store& s : k.stores)
    if (!k.operands[size_t(s.operand)].per_row) needed[size_t(s.expr)] = true;
  for (size_t i = k.exprs.size(); i-- > 0;) {
    if (!needed[i] || uniform[i] || int(i) == stop) continue;
    for (int a : {k.exprs[i].a, k.exprs[i].b, k.exprs[i].c})
      if (a >= 0) needed[size_t(a)] = true;
  }
  return needed;
}

}  // namespace

int Kernel::row_cache_expr() const {
  if (columns) return -1;
  int last = -1;
  for (size_t i = 0; i < exprs.size(); ++i)
    if (is_row_reduction(exprs[i].op)) last = int(i);
  if (last < 0) return -1;
  int e = exprs[size_t(last)].a;
  std::vector<bool> uniform = row_uniform();
  if (uniform[size_t(e)] || exprs[size_t(e)].type != Scalar::f32) return -1;
  // Worth it only for transcendental work, and only if an element-level f32 output needs the value.
  std::vector<bool> heavy(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& x = exprs[i];
    heavy[i] = is_transcendental(x.op);
    for (int a : {x.a, x.b, x.c})
      if (a >= 0 && !uniform[size_t(a)]) heavy[i] = heavy[i] || heavy[size_t(a)];
  }
  bool f32_out = false;
  for (const Store& s : stores)
    f32_out = f32_out || (!operands[size_t(s.operand)].per_row && operands[size_t(s.operand)].dtype == DType::f32);
  return heavy[size_t(e)] && f32_out && needed_by_elements(*this, uniform, e)[size_t(e)] ? e : -1;
}

int64_t Kernel::output_pass_costly_exprs() const {
  std::vector<bool> uniform = row_uniform();
  int cached = row_cache_expr();
  std::vector<bool> needed = needed_by_elements(*this, uniform, cached);
  int64_t n = 0;
  for (size_t i = 0; i < exprs.size(); ++i)
    n += needed[i] && !uniform[i] && int(i) != cached && (is_transcendental(exprs[i].op) || exprs[i].op == Op::div);
  return n;
}

namespace {

// The checks of an expression whose rule in kernel_ops.def is `own`: ops where `imm` means something, or whose
// types follow a rule of their own.
void check_own_rule(const Kernel& k, size_t i) {
  const Expr& e = k.exprs[i];
  auto type_of = [&](int a) { return k.exprs[size_t(a)].type; };
  switch (e.op) {
    case Op::load: {
      CUVIL_CHECK(e.operand >= 0 && e.operand < int(k.operands.size()) && !k.operands[size_t(e.operand)].is_output,
                  "kernel IR: %", i, " loads operand ", e.operand, ", which is not an input");
      const Operand& o = k.operands[size_t(e.operand)];
      CUVIL_CHECK(scalar_of(o.dtype) == e.type, "kernel IR: %", i, " loads as ", scalar_name(e.type),
                  " an operand stored as ", dtype_name(o.dtype));
      if (e.imm != 0)
        CUVIL_CHECK(e.imm == double(int64_t(e.imm)) && (k.columns ? !o.column_broadcast : o.inner != Access::broadcast),
                    "kernel IR: %", i, " shifts along a row its operand does not run along, or not by a whole number");
      break;
    }
    case Op::row_size: CUVIL_CHECK(is_float(e.type), "kernel IR: row_size is a float"); break;
    case Op::idiv: case Op::irem:
      CUVIL_CHECK(is_integer(e.type) && type_of(e.a) == e.type && type_of(e.b) == e.type, "kernel IR: %", i,
                  " divides non-integers");
      CUVIL_CHECK(k.exprs[size_t(e.b)].op != Op::constant || k.exprs[size_t(e.b)].imm != 0, "kernel IR: %", i,
                  " divides by the constant 0");
      break;
    case Op::shl: case Op::lshr:
      CUVIL_CHECK(is_integer(e.type) && type_of(e.a) == e.type && type_of(e.b) == e.type, "kernel IR: %", i,
                  " shifts non-integers");
      break;
    case Op::wrap_s: case Op::wrap_u: {
      int bits = e.type == Scalar::i32 ? 32 : 64;
      CUVIL_CHECK((e.type == Scalar::i32 || e.type == Scalar::i64) && type_of(e.a) == e.type &&
                      (e.imm == 8 || e.imm == 16 || e.imm == 32) && e.imm < bits,
                  "kernel IR: %", i, " wraps to ", e.imm, " bits of ", scalar_name(e.type));
      break;
    }
    case Op::row_index:
      CUVIL_CHECK(e.type == Scalar::i64 && k.has_rows(), "kernel IR: row_index is i64, in a row kernel");
      break;
    case Op::row_topk:
      CUVIL_CHECK(e.type == type_of(e.a) && e.type != Scalar::i1 && e.imm != 0 && e.imm == double(int64_t(e.imm)),
                  "kernel IR: %", i, " (row_topk) needs a number and a count");
      break;
    case Op::row_topk_index:
      CUVIL_CHECK(e.type == Scalar::i64 && k.exprs[size_t(e.a)].op == Op::row_topk, "kernel IR: %", i,
                  " takes the positions of a row_topk");
      break;
    case Op::scan_sum:
      CUVIL_CHECK(e.type != Scalar::i1 && type_of(e.a) == e.type && e.imm >= 0 && e.imm <= 3, "kernel IR: %", i,
                  " scans a non-number or has unknown flags");
      CUVIL_CHECK(((int(e.imm) & kScanReverse) != 0) == k.scans_reverse(), "kernel IR: %", i,
                  " scans in another direction than the kernel's first scan");
      break;
    case Op::row_argmax: case Op::row_argmin:
      CUVIL_CHECK(e.type == Scalar::i64 && type_of(e.a) != Scalar::i1, "kernel IR: %", i,
                  " takes the position of a number and is i64");
      break;
    default: fail_internal("kernel IR op ", op_name(e.op), " has no rule of its own");
  }
}

// The types expression i must have by its op's rule in kernel_ops.def.
void check_types(const Kernel& k, size_t i) {
  const Expr& e = k.exprs[i];
  int n = arity(e.op);
  const int args[3] = {e.a, e.b, e.c};
  auto type_of = [&](int a) { return k.exprs[size_t(args[a])].type; };
  auto all_operands = [&](Scalar t) {
    for (int a = 0; a < n; ++a)
      if (type_of(a) != t) return false;
    return true;
  };
  switch (info(e.op).rule) {
    case Rule::own: check_own_rule(k, i); break;
    case Rule::leaf: case Rule::any: break;
    case Rule::compare:
      CUVIL_CHECK(e.type == Scalar::i1 && type_of(0) == type_of(1), "kernel IR: %", i, " compares mixed types");
      break;
    case Rule::logical:
      CUVIL_CHECK(e.type == Scalar::i1 && all_operands(Scalar::i1), "kernel IR: %", i,
                  " is a logical op on non-i1 values");
      break;
    case Rule::test:
      CUVIL_CHECK(e.type == Scalar::i1 && is_float(type_of(0)), "kernel IR: %", i, " tests a non-float");
      break;
    case Rule::select:
      CUVIL_CHECK(type_of(0) == Scalar::i1 && type_of(1) == e.type && type_of(2) == e.type, "kernel IR: %", i,
                  " selects between mismatched types");
      break;
    case Rule::floats:
      CUVIL_CHECK(is_float(e.type) && all_operands(e.type), "kernel IR: %", i, " (", op_name(e.op),
                  ") is only defined on floats of one type");
      break;
    case Rule::f64:
      CUVIL_CHECK(e.type == Scalar::f64 && all_operands(Scalar::f64), "kernel IR: %", i, " (", op_name(e.op),
                  ") is only defined on f64");
      break;
    case Rule::f32:
      CUVIL_CHECK(e.type == Scalar::f32 && all_operands(Scalar::f32), "kernel IR: %", i, " (", op_name(e.op),
                  ") is only defined on f32");
      break;
    case Rule::same:
      CUVIL_CHECK(all_operands(e.type), "kernel IR: %", i, " (", op_name(e.op), ") mixes operand types");
      CUVIL_CHECK(e.type != Scalar::i1, "kernel IR: %", i, " does arithmetic on i1");
      break;
  }
}

}  // namespace

void Kernel::validate() const {
  CUVIL_CHECK(rank >= 1, "kernel IR: rank must be >= 1, got ", rank);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& e = exprs[i];
    int n = arity(e.op);
    const int args[3] = {e.a, e.b, e.c};
    for (int k = 0; k < 3; ++k) {
      bool want = k < n;
      CUVIL_CHECK(want == (args[k] >= 0), "kernel IR: %", i, " (", op_name(e.op), ") has a wrong operand count");
      if (want) CUVIL_CHECK(args[k] < int(i), "kernel IR: %", i, " uses %", args[k], ", which does not precede it");
    }
    check_types(*this, i);
  }
  // No row reduction may read a scan: the reductions' passes carry no running sums.
  std::vector<bool> scanned(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& e = exprs[i];
    scanned[i] = e.op == Op::scan_sum;
    for (int a : {e.a, e.b, e.c})
      if (a >= 0 && scanned[size_t(a)]) {
        CUVIL_CHECK(!is_row_reduction(e.op), "kernel IR: %", i, " reduces a scan");
        scanned[i] = true;
      }
  }
  bool rows = has_rows();
  CUVIL_CHECK(!columns || (rows && rank >= 2), "kernel IR: a columns kernel needs row reductions or scans and rank >= 2");
  for (const Operand& o : operands)
    CUVIL_CHECK(!o.column_broadcast || columns, "kernel IR: column_broadcast outside a columns kernel");
  std::vector<bool> uniform = row_uniform();
  for (const Store& s : stores) {
    CUVIL_CHECK(s.operand >= 0 && s.operand < int(operands.size()) && operands[size_t(s.operand)].is_output,
                "kernel IR: a store targets operand ", s.operand, ", which is not an output");
    CUVIL_CHECK(s.expr >= 0 && s.expr < int(exprs.size()), "kernel IR: a store reads a missing expression");
    const Operand& o = operands[size_t(s.operand)];
    CUVIL_CHECK(scalar_of(o.dtype) == exprs[size_t(s.expr)].type, "kernel IR: a store of ",
                scalar_name(exprs[size_t(s.expr)].type), " into ", dtype_name(o.dtype));
    bool topk = exprs[size_t(s.expr)].op == Op::row_topk || exprs[size_t(s.expr)].op == Op::row_topk_index;
    if (topk || o.entries > 0) {
      const Expr& t = exprs[size_t(exprs[size_t(s.expr)].op == Op::row_topk ? s.expr : exprs[size_t(s.expr)].a)];
      CUVIL_CHECK(topk && o.per_row && o.entries == std::abs(int64_t(t.imm)), "kernel IR: TopK results go to an output of ",
                  "as many entries per row, and only they");
    }
    if (o.per_row) {
      CUVIL_CHECK(rows && uniform[size_t(s.expr)], "kernel IR: a per-row output must hold a row-uniform value");
      CUVIL_CHECK(o.inner == (columns ? Access::contiguous : Access::broadcast),
                  "kernel IR: a per-row output's inner access must be ", columns ? "contiguous" : "broadcast");
    } else if (o.is_output) {
      CUVIL_CHECK(o.inner == Access::contiguous, "kernel IR: outputs are contiguous along the innermost dim");
    }
  }
}

std::string Kernel::str() const {
  std::string s = "kernel rank=" + std::to_string(rank) +
                  (has_rows() ? (columns ? " columns" : " rows") : " elements") + "\n";
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    s += std::string(o.is_output ? "  out" : "  in") + std::to_string(i) + ": " + std::string(dtype_name(o.dtype)) + " " +
         access_name(o.inner) + (o.per_row ? " per_row" : "") + (o.column_broadcast ? " column_broadcast" : "") +
         (o.entries ? " entries " + std::to_string(o.entries) : "") + "\n";
  }
  char buf[64];
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& e = exprs[i];
    s += "  %" + std::to_string(i) + " = " + op_name(e.op) + "." + scalar_name(e.type);
    if (e.op == Op::load) s += " @" + std::to_string(e.operand);
    if (e.op == Op::load && e.imm != 0) s += " shift " + std::to_string(int64_t(e.imm));
    if (e.op == Op::constant) {
      std::snprintf(buf, sizeof buf, " %.17g", e.imm);
      s += buf;
    }
    if ((e.op == Op::row_argmax || e.op == Op::row_argmin) && e.imm != 0) s += " last";
    if (e.op == Op::scan_sum && (int(e.imm) & kScanExclusive)) s += " exclusive";
    if (e.op == Op::row_topk) s += (e.imm > 0 ? " largest " : " smallest ") + std::to_string(std::abs(int64_t(e.imm)));
    if (e.op == Op::scan_sum && (int(e.imm) & kScanReverse)) s += " reverse";
    if (e.op == Op::wrap_s || e.op == Op::wrap_u) s += " " + std::to_string(int(e.imm));
    for (int a : {e.a, e.b, e.c})
      if (a >= 0) s += " %" + std::to_string(a);
    s += "\n";
  }
  for (const Store& st : stores) s += "  store @" + std::to_string(st.operand) + " %" + std::to_string(st.expr) + "\n";
  return s;
}

uint64_t Kernel::hash() const {
  std::string s = str();
  return fnv1a64(s.data(), s.size());
}

}  // namespace cuvil::codegen
