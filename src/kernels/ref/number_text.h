// Numbers as text and back, for Cast to and from strings (ONNX Cast with `to` = STRING, or a string input).
//
// Written as NumPy writes them (`str(np.float32(x))`, the form onnx's test data holds): the shortest digits that
// read back to the same value, positional for 1e-4 <= |x| < 1e16 (with at least one digit after the point),
// scientific otherwise ("1e-05", "1.5e+20"); NaN and infinities as ONNX Runtime writes them ("NaN", "INF",
// "-INF"); integers in decimal. Read as the whole text or not at all (std::from_chars: no locale; "inf", "nan",
// "infinity" in any case; a leading '+' is allowed).
#pragma once

#include <optional>
#include <string>

#include "ir/tensor.h"

namespace cuvil::ref {

// Element i of a numeric tensor as text.
std::string number_text(const Tensor& t, int64_t i);
// Reads `text` as a value of `to` into element i of `out`; false when the text is not one.
bool read_number(const std::string& text, Tensor& out, int64_t i);

}  // namespace cuvil::ref
