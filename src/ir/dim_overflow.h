// Dim arithmetic whose result leaves int64. A model's real dims that overflow are an error; shape inference's
// tracking of small integer tensors' values (which wrap at run time, as ONNX's integer arithmetic does) catches
// it and stops tracking that value instead.
#pragma once

#include "support/error.h"

namespace cuvil {

class DimOverflow : public Error {
 public:
  using Error::Error;
};

}  // namespace cuvil
