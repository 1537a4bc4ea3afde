// Error reporting. Every failure a user can cause (bad model, bad input, unsupported op) is a cuvil::Error with a
// message that names what went wrong and where; internal invariants use CUVIL_ASSERT, which throws InternalError
// (a bug of Cuvil's, never the user's input), so a bug surfaces as a clear message instead of a crash.
//
// The kinds (Python maps each to its own class under cuvil.Error; see python/cuvil/errors.py):
//   Error          what the user's model or call cannot do (compile-time by default)
//   InputError     a call's inputs do not match the model
//   RunError       a run-time failure inside the model (runtime/run_error.h: names the node, kernel, source)
//   InternalError  a broken invariant of Cuvil's own (CUVIL_ASSERT, fail_internal)
//
// Messages are one line of text that is safe to print: names in them come from untrusted files (node, value,
// tensor and file names may hold any bytes), so every Error escapes what would break the line or drive a terminal
// (escape_for_message below). The escaping is done once, where the Error is made, so no call site can forget it;
// it is idempotent, so a message re-wrapped with more context (`throw Error(path + ": " + e.what())`) stays as it is.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cuvil {

// `s` with control characters escaped: \n, \r, \t, and \xNN for the other C0 bytes and DEL; \xNN for bytes that
// are not valid UTF-8; \uXXXX for C1 controls (U+0080..U+009F) and the bidirectional-text controls (U+061C,
// U+200E/F, U+202A..U+202E, U+2066..U+2069), which reorder what a terminal shows. Everything else (printable
// ASCII, other valid UTF-8) is kept. The result holds no control character, so escaping it again changes nothing.
inline std::string escape_for_message(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string r;
  r.reserve(s.size());
  auto hex_byte = [&](unsigned char c) {
    r += "\\x";
    r += kHex[c >> 4];
    r += kHex[c & 15];
  };
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '\n') r += "\\n";
      else if (c == '\r') r += "\\r";
      else if (c == '\t') r += "\\t";
      else if (c < 0x20 || c == 0x7f) hex_byte(c);
      else r += char(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length, then each continuation byte; overlong forms, surrogates and code points past
    // U+10FFFF are invalid.
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    uint32_t cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    bool ok = n != 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = cp << 6 | (cc & 0x3f);
    }
    if (ok) ok = !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!ok) {
      hex_byte(c);
      ++i;
      continue;
    }
    bool control = (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
                   (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
    if (control) {
      r += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) r += kHex[(cp >> shift) & 15];
    } else {
      r.append(s.substr(i, n));
    }
    i += n;
  }
  return r;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(escape_for_message(what)) {}
  explicit Error(const char* what) : Error(std::string(what)) {}
};

// A run's inputs do not match the model (count, names, dtypes, ranks, dims). Python maps it to ValueError.
class InputError : public Error {
 public:
  using Error::Error;
};

// A broken invariant of Cuvil's own: a bug to report, never a problem with the user's model or inputs. Its
// message starts with "internal error: ".
class InternalError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str_cat(args...));
}

// Throws InternalError("internal error: <args>").
template <class... Args>
[[noreturn]] void fail_internal(const Args&... args) {
  throw InternalError(str_cat("internal error: ", args...));
}

// CUVIL_ASSERT's failure: the message (or the condition's text when none is given) and where the check is.
template <class... Args>
[[noreturn]] void assert_failed(const char* cond, const char* file, int line, const Args&... args) {
  std::string_view f(file);
  if (size_t at = f.rfind("/src/"); at != std::string_view::npos) f.remove_prefix(at + 1);  // "src/ir/graph.cpp"
  if constexpr (sizeof...(args) > 0) fail_internal(str_cat(args...), " (", f, ":", line, ")");
  else fail_internal(cond, " failed (", f, ":", line, ")");
}

}  // namespace cuvil

#define CUVIL_CHECK(cond, ...)                   \
  do {                                           \
    if (!(cond)) ::cuvil::fail(__VA_ARGS__);     \
  } while (0)

// An invariant of Cuvil's own, with an optional message: CUVIL_ASSERT(p, "output ", k, " unset") throws
// InternalError "internal error: output 2 unset (src/runtime/executor.cpp:499)".
#define CUVIL_ASSERT(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) ::cuvil::assert_failed(#cond, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__);    \
  } while (0)
