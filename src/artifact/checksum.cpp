#include "artifact/checksum.h"

#include <immintrin.h>

#include <cstring>

namespace cuvil::artifact {

namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                   P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
inline uint64_t merge(uint64_t acc, uint64_t v) { return (acc ^ round(0, v)) * P1 + P4; }
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

// ---- checksum64_stripes: 64-byte stripes, 16 to a block; stripe s of a block keys its word i with
// kKeys[s * 8 + i] (so that stripes swapped within a block change the sum), and the lanes are scrambled after
// each block (so that blocks swapped change it). Per word i of a stripe: k = word ^ key;
// acc[i ^ 1] += word; acc[i] += lo32(k) * hi32(k).
constexpr int kStripe = 64, kStripesPerBlock = 16, kBlock = kStripe * kStripesPerBlock;
constexpr uint32_t kScramblePrime = 0x9E3779B1u;

struct Keys {
  uint64_t k[kStripesPerBlock * 8 + 8];  // the last 8: the scramble's
  constexpr Keys() : k{} {
    uint64_t x = P5;
    for (uint64_t& v : k) {  // splitmix64
      x += 0x9E3779B97F4A7C15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      v = z ^ (z >> 31);
    }
  }
};
constexpr Keys kKeys;
const uint64_t* scramble_key() { return kKeys.k + kStripesPerBlock * 8; }

inline void stripe_scalar(uint64_t* acc, const uint8_t* p, const uint64_t* key) {
  for (int i = 0; i < 8; ++i) {
    uint64_t w = load64(p + 8 * i), k = w ^ key[i];
    acc[i ^ 1] += w;
    acc[i] += (k & 0xFFFFFFFFull) * (k >> 32);
  }
}
inline void scramble_scalar(uint64_t* acc) {
  for (int i = 0; i < 8; ++i) {
    uint64_t a = acc[i];
    a ^= a >> 47;
    a ^= scramble_key()[i];
    acc[i] = a * kScramblePrime;
  }
}

// The full blocks' lanes; returns the bytes consumed (a multiple of kBlock).
size_t blocks_scalar(uint64_t* acc, const uint8_t* p, size_t size) {
  size_t n = size / kBlock * kBlock;
  for (size_t at = 0; at < n; at += kBlock) {
    for (int s = 0; s < kStripesPerBlock; ++s) stripe_scalar(acc, p + at + s * kStripe, kKeys.k + s * 8);
    scramble_scalar(acc);
  }
  return n;
}

[[gnu::target("avx2")]] inline __m256i step_avx2(__m256i a, __m256i w, __m256i key) {
  __m256i k = _mm256_xor_si256(w, key);
  __m256i prod = _mm256_mul_epu32(k, _mm256_srli_epi64(k, 32));
  // acc[i ^ 1] += w[i]: the two words of each 128-bit half swapped
  return _mm256_add_epi64(a, _mm256_add_epi64(_mm256_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 3, 2)), prod));
}
[[gnu::target("avx2")]] inline __m256i scramble_avx2(__m256i a, __m256i key, __m256i prime) {
  a = _mm256_xor_si256(_mm256_xor_si256(a, _mm256_srli_epi64(a, 47)), key);
  __m256i lo = _mm256_mul_epu32(a, prime), hi = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime);
  return _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
}

[[gnu::target("avx2")]] size_t blocks_avx2(uint64_t* acc, const uint8_t* p, size_t size) {
  size_t n = size / kBlock * kBlock;
  __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc));
  __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + 4));
  const __m256i sk0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scramble_key()));
  const __m256i sk1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scramble_key() + 4));
  const __m256i prime = _mm256_set1_epi64x(kScramblePrime);
  for (size_t at = 0; at < n; at += kBlock) {
    const uint8_t* b = p + at;
    for (int s = 0; s < kStripesPerBlock; ++s) {
      const __m256i* w = reinterpret_cast<const __m256i*>(b + s * kStripe);
      const __m256i* key = reinterpret_cast<const __m256i*>(kKeys.k + s * 8);
      a0 = step_avx2(a0, _mm256_loadu_si256(w), _mm256_loadu_si256(key));
      a1 = step_avx2(a1, _mm256_loadu_si256(w + 1), _mm256_loadu_si256(key + 1));
    }
    a0 = scramble_avx2(a0, sk0, prime);
    a1 = scramble_avx2(a1, sk1, prime);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc), a0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 4), a1);
  return n;
}

uint64_t stripes(const void* data, size_t size, bool avx2) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t acc[8] = {P3, P1, P2, P4, P5, P3 ^ P1, P2 ^ P4, P5 ^ P1};
  size_t at = avx2 ? blocks_avx2(acc, p, size) : blocks_scalar(acc, p, size);
  // The last partial block: whole stripes, then the rest zero-padded, keyed by their positions in the block.
  int s = 0;
  for (; at + kStripe <= size; at += kStripe, ++s) stripe_scalar(acc, p + at, kKeys.k + s * 8);
  if (at < size) {
    uint8_t last[kStripe] = {};
    std::memcpy(last, p + at, size - at);
    stripe_scalar(acc, last, kKeys.k + s * 8);
  }
  scramble_scalar(acc);
  uint64_t h = uint64_t(size) * P1;
  for (uint64_t a : acc) h = merge(h, a);
  return avalanche(h);
}

}  // namespace

uint64_t checksum64(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  const uint8_t* end = p + size;
  uint64_t h;
  if (size >= 32) {
    uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1;
    for (; p + 32 <= end; p += 32) {
      v1 = round(v1, load64(p));
      v2 = round(v2, load64(p + 8));
      v3 = round(v3, load64(p + 16));
      v4 = round(v4, load64(p + 24));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = P5;
  }
  h += uint64_t(size);
  for (; p + 8 <= end; p += 8) h = rotl(h ^ round(0, load64(p)), 27) * P1 + P4;
  for (; p < end; ++p) h = rotl(h ^ (uint64_t(*p) * P5), 11) * P1;
  return avalanche(h);
}

uint64_t checksum64_stripes(const void* data, size_t size) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return stripes(data, size, avx2);
}

uint64_t checksum64_stripes_scalar(const void* data, size_t size) { return stripes(data, size, false); }

}  // namespace cuvil::artifact
