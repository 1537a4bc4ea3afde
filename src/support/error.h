// Error reporting. Every failure a user can cause (bad model, bad input, unsupported op) is a cuvil::Error with a
// message that names what went wrong and where; internal invariants use CUVIL_ASSERT, which also throws, so a
// bug surfaces as a clear message instead of a crash.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace cuvil {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run's inputs do not match the model (count, names, dtypes, ranks, dims). Python maps it to ValueError.
class InputError : public Error {
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

}  // namespace cuvil

#define CUVIL_CHECK(cond, ...)                   \
  do {                                           \
    if (!(cond)) ::cuvil::fail(__VA_ARGS__);     \
  } while (0)

#define CUVIL_ASSERT(cond)                                                                            \
  do {                                                                                                \
    if (!(cond)) ::cuvil::fail("internal error: ", #cond, " failed at ", __FILE__, ":", __LINE__);   \
  } while (0)
