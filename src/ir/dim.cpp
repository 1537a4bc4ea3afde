#include "ir/dim.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "ir/dim_overflow.h"
#include "support/error.h"

namespace cuvil {

namespace {

enum class AtomKind { Symbol, FloorDiv, CeilDiv, Mod, Max, Min };

const char* atom_fn_name(AtomKind k) {
  switch (k) {
    case AtomKind::FloorDiv: return "floordiv";
    case AtomKind::CeilDiv: return "ceildiv";
    case AtomKind::Mod: return "mod";
    case AtomKind::Max: return "max";
    case AtomKind::Min: return "min";
    case AtomKind::Symbol: break;
  }
  return "";
}

// Dims come from untrusted models: arithmetic that leaves int64 is an error, never undefined behaviour.
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw DimOverflow(str_cat("dimension arithmetic overflows int64 (", a, " + ", b, ")"));
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw DimOverflow(str_cat("dimension arithmetic overflows int64 (", a, " * ", b, ")"));
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) return checked_mul(a, -1);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

struct DimAtom {
  AtomKind kind;
  std::string name;       // symbol name
  std::vector<Dim> args;  // operands of a function atom
  std::string key;        // canonical text, used for ordering and equality
};
using AtomPtr = std::shared_ptr<const DimAtom>;

// sum of coeff * (product of atoms); an empty product is the constant term.
struct DimPoly {
  struct Term {
    int64_t coeff;
    std::vector<AtomPtr> factors;  // sorted by key
  };
  std::vector<Term> terms;

  static std::string monomial_key(const std::vector<AtomPtr>& f) {
    std::string k;
    for (auto& a : f) k += a->key + "*";
    return k;
  }
  static const DimPoly* of_ptr(const Dim& d) { return d.poly_.get(); }
  static DimPoly of(const Dim& d) {
    DimPoly p;
    if (d.is_const()) {
      if (d.value_ != 0) p.terms.push_back({d.value_, {}});
    } else {
      p = *d.poly_;
    }
    return p;
  }
  void canonicalize() {
    std::map<std::string, Term> merged;
    for (auto& t : terms) {
      auto k = monomial_key(t.factors);
      auto it = merged.find(k);
      if (it == merged.end()) merged.emplace(k, t);
      else it->second.coeff = checked_add(it->second.coeff, t.coeff);
    }
    terms.clear();
    for (auto& [k, t] : merged)
      if (t.coeff != 0) terms.push_back(t);
  }
  bool is_const() const { return terms.empty() || (terms.size() == 1 && terms[0].factors.empty()); }
  int64_t const_value() const { return terms.empty() ? 0 : terms[0].coeff; }
};

Dim Dim::from_poly(DimPoly p) {
  p.canonicalize();
  if (p.is_const()) return Dim(p.const_value());
  Dim d;
  d.poly_ = std::make_shared<const DimPoly>(std::move(p));
  return d;
}

static Dim atom_dim(AtomPtr a) {
  DimPoly p;
  p.terms.push_back({1, {std::move(a)}});
  return Dim::from_poly(std::move(p));
}

Dim Dim::symbol(const std::string& name) {
  auto a = std::make_shared<DimAtom>();
  a->kind = AtomKind::Symbol;
  a->name = name;
  a->key = name;
  return atom_dim(a);
}

int64_t Dim::value() const {
  CUVIL_ASSERT(is_const(), "dim ", str(), " is not a constant");
  return value_;
}

bool Dim::is_symbol() const {
  return poly_ && poly_->terms.size() == 1 && poly_->terms[0].coeff == 1 &&
         poly_->terms[0].factors.size() == 1 && poly_->terms[0].factors[0]->kind == AtomKind::Symbol;
}

const std::string& Dim::symbol_name() const {
  CUVIL_ASSERT(is_symbol());
  return poly_->terms[0].factors[0]->name;
}

static std::optional<int64_t> eval_atom(const DimAtom& a, const SymbolBindings& b) {
  if (a.kind == AtomKind::Symbol) {
    auto it = b.find(a.name);
    if (it == b.end()) return std::nullopt;
    return it->second;
  }
  auto x = a.args[0].eval(b), y = a.args[1].eval(b);
  if (!x || !y) return std::nullopt;
  switch (a.kind) {
    case AtomKind::FloorDiv:
      if (*y == 0) return std::nullopt;
      return floor_div(*x, *y);
    case AtomKind::CeilDiv:
      if (*y == 0) return std::nullopt;
      return checked_mul(floor_div(checked_mul(*x, -1), *y), -1);
    case AtomKind::Mod:
      if (*y == 0) return std::nullopt;
      return checked_add(*x, -checked_mul(floor_div(*x, *y), *y));
    case AtomKind::Max: return std::max(*x, *y);
    case AtomKind::Min: return std::min(*x, *y);
    case AtomKind::Symbol: break;
  }
  return std::nullopt;
}

std::optional<int64_t> Dim::eval(const SymbolBindings& b) const {
  if (is_const()) return value_;
  int64_t sum = 0;
  for (auto& t : poly_->terms) {
    int64_t prod = t.coeff;
    for (auto& f : t.factors) {
      auto v = eval_atom(*f, b);
      if (!v) return std::nullopt;
      prod = checked_mul(prod, *v);
    }
    sum = checked_add(sum, prod);
  }
  return sum;
}

void Dim::collect_symbols(std::set<std::string>& out) const {
  if (is_const()) return;
  for (auto& t : poly_->terms)
    for (auto& f : t.factors) {
      if (f->kind == AtomKind::Symbol) out.insert(f->name);
      for (auto& a : f->args) a.collect_symbols(out);
    }
}

std::string Dim::str() const {
  if (is_const()) return std::to_string(value_);
  std::string s;
  bool first = true;
  // constant term last reads more naturally: "2*batch + 1"
  std::vector<const DimPoly::Term*> order;
  for (auto& t : poly_->terms)
    if (!t.factors.empty()) order.push_back(&t);
  for (auto& t : poly_->terms)
    if (t.factors.empty()) order.push_back(&t);
  for (auto* t : order) {
    int64_t c = t->coeff;
    if (first) {
      if (c < 0) s += "-";
    } else {
      s += c < 0 ? " - " : " + ";
    }
    first = false;
    int64_t mag = c < 0 ? -c : c;
    std::string mono;
    for (auto& f : t->factors) mono += (mono.empty() ? "" : "*") + f->key;
    if (mono.empty()) s += std::to_string(mag);
    else if (mag == 1) s += mono;
    else s += std::to_string(mag) + "*" + mono;
  }
  return s;
}

bool Dim::operator==(const Dim& o) const {
  if (is_const() != o.is_const()) return false;
  if (is_const()) return value_ == o.value_;
  return poly_ == o.poly_ || str() == o.str();
}

Dim operator+(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return Dim(checked_add(a.value_, b.value_));
  DimPoly p = DimPoly::of(a), q = DimPoly::of(b);
  p.terms.insert(p.terms.end(), q.terms.begin(), q.terms.end());
  return Dim::from_poly(std::move(p));
}

Dim operator-(const Dim& a, const Dim& b) { return a + Dim(-1) * b; }

Dim operator*(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return Dim(checked_mul(a.value_, b.value_));
  DimPoly p = DimPoly::of(a), q = DimPoly::of(b), r;
  for (auto& x : p.terms)
    for (auto& y : q.terms) {
      DimPoly::Term t{checked_mul(x.coeff, y.coeff), x.factors};
      t.factors.insert(t.factors.end(), y.factors.begin(), y.factors.end());
      std::sort(t.factors.begin(), t.factors.end(), [](auto& l, auto& r) { return l->key < r->key; });
      r.terms.push_back(std::move(t));
    }
  return Dim::from_poly(std::move(r));
}

static Dim make_fn_atom(AtomKind k, const Dim& a, const Dim& b) {
  auto at = std::make_shared<DimAtom>();
  at->kind = k;
  at->args = {a, b};
  at->key = std::string(atom_fn_name(k)) + "(" + a.str() + ", " + b.str() + ")";
  return atom_dim(at);
}

// True when every coefficient of a is divisible by the constant c (so a / c is exact).
static bool divisible(const Dim& a, int64_t c) {
  if (c == 0) return false;
  if (a.is_const()) return a.value() % c == 0;
  DimPoly p = DimPoly::of(a);
  return std::all_of(p.terms.begin(), p.terms.end(), [&](auto& t) { return t.coeff % c == 0; });
}

static Dim divide_exact(const Dim& a, int64_t c) {
  DimPoly p = DimPoly::of(a);
  for (auto& t : p.terms) t.coeff /= c;
  return Dim::from_poly(std::move(p));
}

Dim Dim::floordiv(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const() && b.value_ != 0) return Dim(floor_div(a.value_, b.value_));
  if (b.is_const() && b.value_ == 1) return a;
  if (b.is_const() && b.value_ > 0 && divisible(a, b.value_)) return divide_exact(a, b.value_);
  if (a == b) return Dim(1);
  return make_fn_atom(AtomKind::FloorDiv, a, b);
}

Dim Dim::ceildiv(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const() && b.value_ != 0)
    return Dim(checked_mul(floor_div(checked_mul(a.value_, -1), b.value_), -1));
  if (b.is_const() && b.value_ == 1) return a;
  if (b.is_const() && b.value_ > 0 && divisible(a, b.value_)) return divide_exact(a, b.value_);
  if (a == b) return Dim(1);
  return make_fn_atom(AtomKind::CeilDiv, a, b);
}

Dim Dim::mod(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const() && b.value_ != 0)
    return Dim(checked_add(a.value_, -checked_mul(floor_div(a.value_, b.value_), b.value_)));
  if (b.is_const() && b.value_ > 0 && divisible(a, b.value_)) return Dim(0);
  if (a == b) return Dim(0);
  return make_fn_atom(AtomKind::Mod, a, b);
}

// The operands of `d` when it is exactly one min/max atom of kind k, else null.
static const std::vector<Dim>* fn_args(const Dim& d, AtomKind k) {
  if (d.is_const()) return nullptr;
  const DimPoly& p = *DimPoly::of_ptr(d);
  if (p.terms.size() != 1 || p.terms[0].coeff != 1 || p.terms[0].factors.size() != 1) return nullptr;
  const DimAtom& a = *p.terms[0].factors[0];
  return a.kind == k ? &a.args : nullptr;
}

// max(min(x, y), y) = y and min(max(x, y), y) = y: what clamping a slice bound and then broadcasting produce.
static std::optional<Dim> absorb(const Dim& a, const Dim& b, AtomKind inner) {
  for (auto [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}})
    if (auto* args = fn_args(*x, inner))
      if ((*args)[0] == *y || (*args)[1] == *y) return *y;
  return std::nullopt;
}

Dim Dim::max(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return Dim(std::max(a.value_, b.value_));
  if (a == b) return a;
  if (auto r = absorb(a, b, AtomKind::Min)) return *r;
  return a.str() < b.str() ? make_fn_atom(AtomKind::Max, a, b) : make_fn_atom(AtomKind::Max, b, a);
}

Dim Dim::min(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return Dim(std::min(a.value_, b.value_));
  if (a == b) return a;
  if (auto r = absorb(a, b, AtomKind::Max)) return *r;
  return a.str() < b.str() ? make_fn_atom(AtomKind::Min, a, b) : make_fn_atom(AtomKind::Min, b, a);
}

// ---- parser: expr := term (('+'|'-') term)* ; term := factor ('*' factor)* ; factor := int | ident | fn(expr,
// expr) | '(' expr ')' | '-' factor
namespace {
struct DimParser {
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  [[noreturn]] void error(const char* what) { fail("bad dim expression '", s, "': ", what, " at offset ", i); }
  Dim expr() {
    Dim d = term();
    for (;;) {
      if (eat('+')) d = d + term();
      else if (eat('-')) d = d - term();
      else return d;
    }
  }
  Dim term() {
    Dim d = factor();
    while (eat('*')) d = d * factor();
    return d;
  }
  Dim factor() {
    ws();
    if (i >= s.size()) error("unexpected end");
    if (eat('(')) {
      Dim d = expr();
      if (!eat(')')) error("expected ')'");
      return d;
    }
    if (eat('-')) return Dim(-1) * factor();
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j - i > 18) error("integer too large");
      int64_t v = std::stoll(s.substr(i, j - i));
      i = j;
      return Dim(v);
    }
    if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      std::string id = s.substr(i, j - i);
      i = j;
      ws();
      if (i < s.size() && s[i] == '(') {
        ++i;
        Dim a = expr();
        if (!eat(',')) error("expected ','");
        Dim b = expr();
        if (!eat(')')) error("expected ')'");
        if (id == "floordiv") return Dim::floordiv(a, b);
        if (id == "ceildiv") return Dim::ceildiv(a, b);
        if (id == "mod") return Dim::mod(a, b);
        if (id == "max") return Dim::max(a, b);
        if (id == "min") return Dim::min(a, b);
        error("unknown function");
      }
      return Dim::symbol(id);
    }
    error("unexpected character");
  }
};
}  // namespace

Dim Dim::parse(const std::string& text) {
  DimParser p{text};
  Dim d = p.expr();
  p.ws();
  if (p.i != text.size()) p.error("trailing characters");
  return d;
}

std::string dims_str(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

Dim dims_product(const std::vector<Dim>& dims) {
  Dim p(1);
  for (auto& d : dims) p = p * d;
  return p;
}

}  // namespace cuvil
