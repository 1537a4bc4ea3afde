#include "kernels/precision.h"

#include "support/error.h"

namespace cuvil {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::int8: return "int8";
  }
  return "?";
}

Precision parse_precision(std::string_view name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "int8") return Precision::int8;
  throw Error("unknown precision '" + std::string(name) + "' (the precisions are fp32, bf16, int8)");
}

std::string PrecisionDecision::str() const {
  std::string s(precision_name(precision));
  if (!reason.empty()) s += " (" + reason + ")";
  return s;
}

}  // namespace cuvil
