// Reference kernels of the strings family (semantics in src/ir/ops/strings.cpp). Kernels that make new text
// return Tensor::strings, which owns it; the ONNX reference implementation and ONNX Runtime agree on every case
// of onnx's node suite.
#include <clocale>
#include <cwctype>
#include <locale.h>
#include <unordered_set>

#include <re2/re2.h>

#include "kernels/ref/indexing.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// ---- UTF-8 and case

// Decodes the code point at s[i] and advances i; a malformed byte decodes as itself (returned negative, so the
// caller copies it unchanged).
int32_t next_code_point(const std::string& s, size_t& i) {
  auto byte = [&](size_t k) { return uint8_t(s[k]); };
  uint8_t b = byte(i);
  int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + size_t(len) > s.size()) return -int32_t(byte(i++)) - 1;
  if (len == 1) return int32_t(byte(i++));
  int32_t cp = b & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    uint8_t c = byte(i + size_t(k));
    if ((c >> 6) != 0x2) return -int32_t(byte(i++)) - 1;
    cp = (cp << 6) | (c & 0x3F);
  }
  i += size_t(len);
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

enum class CaseChange { none, lower, upper };

// Unicode's simple case mappings, as glibc's C.UTF-8 locale has them (a locale of its own, so the process's
// locale stays as it is); ASCII only where that locale is missing.
std::string change_case(const std::string& s, CaseChange change) {
  if (change == CaseChange::none) return s;
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    int32_t cp = next_code_point(s, i);
    if (cp < 0) {
      out += char(-(cp + 1));
      continue;
    }
    uint32_t mapped = uint32_t(cp);
    if (utf8) mapped = change == CaseChange::lower ? towlower_l(wint_t(cp), utf8) : towupper_l(wint_t(cp), utf8);
    else if (cp < 0x80) mapped = uint32_t(change == CaseChange::lower ? std::tolower(cp) : std::toupper(cp));
    append_utf8(out, mapped);
  }
  return out;
}

// Python's str.isspace() over ASCII (str.split() with no separator splits at runs of these).
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

// Python's str.split(sep, maxsplit) (maxsplit < 0: no limit); an empty `sep` splits at whitespace runs. An
// empty string has no pieces with any separator, as in ONNX Runtime (Python gives [""] for a separator).
std::vector<std::string> split(const std::string& s, const std::string& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (s.empty()) return parts;
  if (sep.empty()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
        parts.push_back(s.substr(i));  // the rest, trailing whitespace and all
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
    size_t at = s.find(sep, start);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

}  // namespace

CUVIL_REF_KERNEL(StringConcat) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const std::vector<int64_t>& shape = ctx.output(0).shape();
  int64_t n = shape_numel(shape);
  std::vector<std::string> out(static_cast<size_t>(n));
  ref::MultiIndex it(shape, {ref::broadcast_strides(a.shape(), shape), ref::broadcast_strides(b.shape(), shape)});
  for (int64_t i = 0; i < n; ++i, it.next()) out[size_t(i)] = a.str(it.offset(0)) + b.str(it.offset(1));
  ctx.set_output(0, Tensor::strings(std::move(out), shape));
}

CUVIL_REF_KERNEL(StringSplit) {
  const Tensor& x = ctx.input(0);
  const std::string& sep = ctx.s("delimiter");
  int64_t maxsplit = ctx.i("maxsplit");
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
  size_t widest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    parts[size_t(i)] = split(x.str(i), sep, maxsplit);
    widest = std::max(widest, parts[size_t(i)].size());
  }
  std::vector<int64_t> shape = x.shape();
  shape.push_back(int64_t(widest));
  std::vector<std::string> out(static_cast<size_t>(x.numel()) * widest);
  for (size_t i = 0; i < parts.size(); ++i)
    for (size_t k = 0; k < parts[i].size(); ++k) out[i * widest + k] = std::move(parts[i][k]);
  ctx.set_output(0, Tensor::strings(std::move(out), shape));
  if (ctx.num_outputs() > 1) {
    Tensor counts = Tensor::zeros(DType::i64, x.shape());
    for (size_t i = 0; i < parts.size(); ++i) counts.data<int64_t>()[i] = int64_t(parts[i].size());
    ctx.set_output(1, counts);
  }
}

CUVIL_REF_KERNEL(StringNormalizer) {
  const Tensor& x = ctx.input(0);
  const std::string& action = ctx.s("case_change_action");
  CaseChange change = action == "LOWER" ? CaseChange::lower : action == "UPPER" ? CaseChange::upper : CaseChange::none;
  bool sensitive = ctx.i("is_case_sensitive") != 0;
  std::unordered_set<std::string> stop;
  for (const std::string& w : ctx.strings("stopwords")) stop.insert(sensitive ? w : change_case(w, CaseChange::lower));
  std::vector<std::string> kept;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& s = x.str(i);
    if (!stop.empty() && stop.count(sensitive ? s : change_case(s, CaseChange::lower))) continue;
    kept.push_back(change_case(s, change));
  }
  if (kept.empty()) kept.emplace_back();
  std::vector<int64_t> shape = x.rank() == 2 ? std::vector<int64_t>{1, int64_t(kept.size())}
                                             : std::vector<int64_t>{int64_t(kept.size())};
  ctx.set_output(0, Tensor::strings(std::move(kept), shape));
}

CUVIL_REF_KERNEL(RegexFullMatch) {
  const Tensor& x = ctx.input(0);
  RE2 re(ctx.s("pattern"), RE2::Quiet);
  if (!re.ok()) ctx.error("attribute 'pattern' is not a valid RE2 expression: ", re.error());
  Tensor& y = ctx.output(0);
  bool* out = y.data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = RE2::FullMatch(x.str(i), re);
}

}  // namespace cuvil
