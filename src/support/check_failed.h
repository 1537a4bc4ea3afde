// A run-time check of the model failed: an Assert node (a `raise` under a data-dependent condition in the model's
// source, an `assert`, a torch._check) met a false condition. It carries what the Python layer needs to raise
// the model's own exception: the exception's type (a Python qualified name, "builtins.ValueError"), its message and
// the source line of the check. Like every Error, the message is escaped to one safe line (a model file is
// untrusted); a message of printable text is kept as it is.
#pragma once

#include <string>

#include "support/error.h"

namespace cuvil {

class CheckFailed : public Error {
 public:
  CheckFailed(const std::string& exception_type, const std::string& message, const std::string& location)
      : Error(describe(exception_type, message, location)),
        exception_type_(escape_for_message(exception_type)),
        message_(escape_for_message(message)),
        location_(escape_for_message(location)) {}

  const std::string& exception_type() const { return exception_type_; }  // "builtins.ValueError", "pkg.mod.Error"
  const std::string& message() const { return message_; }
  const std::string& location() const { return location_; }  // "model.py:12", or empty

 private:
  // "ValueError: input exceeds 3.0 (run-time check at model.py:12)"
  static std::string describe(const std::string& type, const std::string& message, const std::string& location) {
    std::string name = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
    std::string s = name.empty() ? "check failed" : name;
    if (!message.empty()) s += ": " + message;
    s += " (run-time check";
    if (!location.empty()) s += " at " + location;
    return s + ")";
  }

  std::string exception_type_, message_, location_;
};

}  // namespace cuvil
