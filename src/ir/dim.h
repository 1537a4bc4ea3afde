// A tensor dimension: a constant, or a symbolic expression over named dims ("batch", "seq").
//
// Expressions are kept in a canonical polynomial form (sum of coefficient * product-of-atoms), so equal
// expressions compare equal structurally: batch*2 + 1 == 1 + 2*batch. Atoms are symbols or the operations a
// polynomial cannot absorb: floordiv, ceildiv, mod, max, min. Reshape/Concat/Slice produce such expressions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace cuvil {

using SymbolBindings = std::unordered_map<std::string, int64_t>;

struct DimPoly;

class Dim {
 public:
  Dim(int64_t v = 0) : value_(v) {}  // NOLINT: a constant converts implicitly
  static Dim symbol(const std::string& name);

  bool is_const() const { return !poly_; }
  int64_t value() const;  // requires is_const()
  bool is_symbol() const;             // a bare symbol, e.g. "batch"
  const std::string& symbol_name() const;  // requires is_symbol()

  // The value under `b`, or nullopt when a symbol is unbound (or a division by zero happens).
  std::optional<int64_t> eval(const SymbolBindings& b) const;
  void collect_symbols(std::set<std::string>& out) const;
  std::string str() const;

  bool operator==(const Dim& o) const;
  bool operator!=(const Dim& o) const { return !(*this == o); }

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  static Dim floordiv(const Dim& a, const Dim& b);
  static Dim ceildiv(const Dim& a, const Dim& b);
  static Dim mod(const Dim& a, const Dim& b);
  static Dim max(const Dim& a, const Dim& b);
  static Dim min(const Dim& a, const Dim& b);

  // Parses the text form str() produces (integers, symbols, + - *, parentheses, floordiv/ceildiv/mod/max/min
  // calls). Throws cuvil::Error on malformed text.
  static Dim parse(const std::string& text);

  // Internal: builds a Dim from its canonical polynomial (used by dim.cpp).
  static Dim from_poly(DimPoly p);

 private:
  friend struct DimPoly;
  int64_t value_ = 0;
  std::shared_ptr<const DimPoly> poly_;  // null for constants
};

std::string dims_str(const std::vector<Dim>& dims);  // "[batch, 3, 224]"

// Product of dims (element count of a shape).
Dim dims_product(const std::vector<Dim>& dims);

}  // namespace cuvil
