// NumPy .npy files: read (format versions 1-3, C or Fortran order, either byte order) and write (version 1,
// C order, little-endian). bf16 has no NumPy type: it is written widened to f32.
#pragma once

#include <string>

#include "ir/tensor.h"

namespace cuvil {

// Throws cuvil::Error naming the file and the problem for anything malformed or unsupported.
Tensor read_npy_file(const std::string& path);
Tensor parse_npy(const void* data, size_t size, const std::string& what = "npy data");
void write_npy_file(const std::string& path, const Tensor& t);
std::string serialize_npy(const Tensor& t);

}  // namespace cuvil
