// SHA-256 (FIPS 180-4), for the kernel cache's entry check (src/codegen/jit.cpp). Small and dependency-free; not
// constant-time and not meant for secrets. Tested against the FIPS 180-4 / NIST CAVP vectors (tests/unit/
// sha256_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cuvil {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // The digest of everything given to update(); the object must not be updated afterwards.
  Digest finish();

 private:
  void block(const uint8_t* p);

  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buffered_ = 0;
  uint64_t bytes_ = 0;
};

Sha256::Digest sha256(const void* data, size_t size);
// Lower-case hex of a digest.
std::string to_hex(const Sha256::Digest& d);

}  // namespace cuvil
