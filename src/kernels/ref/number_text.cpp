#include "kernels/ref/number_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace cuvil::ref {

namespace {

// NumPy's str() of a float: the shortest round-trip digits (to_chars), laid out as NumPy lays them out.
template <class F>
std::string float_text(F v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-INF" : "INF";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-9.767611e-01"
  bool negative = sci[0] == '-';
  size_t e = sci.find('e');
  std::string digits;
  for (size_t k = negative ? 1 : 0; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  F a = std::fabs(v);
  if (a == 0 || (a >= F(1e-4) && a < F(1e16))) {
    if (exp10 >= 0) {
      std::string whole = digits.substr(0, std::min(digits.size(), size_t(exp10) + 1));
      whole.append(size_t(exp10) + 1 - whole.size(), '0');
      std::string frac = digits.size() > size_t(exp10) + 1 ? digits.substr(size_t(exp10) + 1) : "0";
      return out + whole + "." + frac;
    }
    return out + "0." + std::string(size_t(-exp10 - 1), '0') + digits;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[8];
  std::snprintf(exp, sizeof exp, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + exp;
}

template <class T>
bool read_as(const std::string& text, T& value) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;
  if (first == last) return false;
  auto r = std::from_chars(first, last, value);
  return r.ec == std::errc() && r.ptr == last;
}

}  // namespace

std::string number_text(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f64: return float_text(static_cast<const double*>(t.raw())[i]);
    case DType::f32:
    case DType::f16:
    case DType::bf16: return float_text(float(t.get_f64(i)));
    case DType::u64: return std::to_string(static_cast<const uint64_t*>(t.raw())[i]);
    default: return std::to_string(t.get_i64(i));
  }
}

bool read_number(const std::string& text, Tensor& out, int64_t i) {
  return visit_dtype(out.dtype(), [&]<class T>() {
    T* dst = static_cast<T*>(out.raw()) + i;
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
      return read_as(text, *dst);
    } else if constexpr (is_float_v<T>) {  // f16, bf16: read as float, then rounded once
      float f;
      if (!read_as(text, f)) return false;
      *dst = T(f);
      return true;
    } else if constexpr (std::is_same_v<T, bool>) {
      int64_t v;
      if (!read_as(text, v)) return false;
      *dst = v != 0;
      return true;
    } else {
      T v;
      if (!read_as(text, v)) return false;
      *dst = v;
      return true;
    }
  });
}

}  // namespace cuvil::ref
