// The sections' striped checksum (artifact/checksum.h): the same value from the AVX2 and the scalar paths at every
// size, every flipped bit and every reordering of stripes or blocks seen; files written before it (section flags
// 0, checksum64) still load; a corrupt large section (checked on a thread of its own) is still refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/format.h"
#include "test_util.h"

namespace cuvil {
namespace {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

TEST(ArtifactChecksum, StripesAgreeAcrossPathsAtEverySize) {
  std::string s = random_bytes(8192 + 77, 1);
  for (size_t n = 0; n <= s.size(); n += (n < 2100 ? 1 : 61))
    ASSERT_EQ(artifact::checksum64_stripes(s.data(), n), artifact::checksum64_stripes_scalar(s.data(), n)) << n;
  // (from an odd address too: the loads are unaligned)
  EXPECT_EQ(artifact::checksum64_stripes(s.data() + 3, 5000), artifact::checksum64_stripes_scalar(s.data() + 3, 5000));
}

TEST(ArtifactChecksum, StripesSeeEveryBitLengthAndOrder) {
  for (size_t n : {size_t(1), size_t(63), size_t(64), size_t(1000), size_t(1024), size_t(5000)}) {
    std::string s = random_bytes(n, 2);
    uint64_t h = artifact::checksum64_stripes(s.data(), n);
    for (size_t i = 0; i < n; i += (n < 1100 ? 1 : 7))
      for (int bit : {0, 5, 7}) {
        std::string t = s;
        t[i] ^= char(1 << bit);
        ASSERT_NE(h, artifact::checksum64_stripes(t.data(), n)) << n << " " << i;
      }
    std::string z = s + std::string(1, '\0');  // a zero byte more (the tail is zero-padded: the length counts)
    EXPECT_NE(h, artifact::checksum64_stripes(z.data(), z.size())) << n;
  }
  std::string s = random_bytes(4096, 3);
  uint64_t h = artifact::checksum64_stripes(s.data(), s.size());
  std::string t = s;  // two stripes of one block swapped
  std::swap_ranges(t.begin(), t.begin() + 64, t.begin() + 128);
  EXPECT_NE(h, artifact::checksum64_stripes(t.data(), t.size()));
  t = s;  // two blocks swapped
  std::swap_ranges(t.begin(), t.begin() + 1024, t.begin() + 2048);
  EXPECT_NE(h, artifact::checksum64_stripes(t.data(), t.size()));
  t = s;  // the same word in two lanes exchanged
  std::swap_ranges(t.begin(), t.begin() + 8, t.begin() + 8);
  std::swap_ranges(t.begin() + 16, t.begin() + 24, t.begin() + 24);
  EXPECT_NE(h, artifact::checksum64_stripes(t.data(), t.size()));
}

// A model whose weights section is over the reader's threshold for a checksum thread of its own (16 MiB).
std::string big_model_bytes() {
  std::string text = "graph @main(%x: f32[1, 2048]) {\n  %w: f32[2048, 2100] = constant 0x";
  std::string w = random_bytes(2048 * 2100 * 4, 4);
  static const char* hex = "0123456789abcdef";
  text.reserve(text.size() + 2 * w.size() + 200);
  for (unsigned char c : w) {
    text += hex[c >> 4];
    text += hex[c & 15];
  }
  text += "\n  %y: f32[1, 2100] = MatMul(%x, %w)\n  return %y\n}\n";
  artifact::SaveInput in;
  in.graph = test::parse_checked(text);
  return artifact::serialize(in);
}

artifact::SectionEntry* entry(std::string& b, size_t i) {
  return reinterpret_cast<artifact::SectionEntry*>(b.data() + sizeof(artifact::Header)) + i;
}
void reseal_table(std::string& b) {
  artifact::Header h;
  std::memcpy(&h, b.data(), sizeof h);
  h.table_checksum = artifact::checksum64(entry(b, 0), h.section_count * sizeof(artifact::SectionEntry));
  h.header_checksum = artifact::checksum64(&h, offsetof(artifact::Header, header_checksum));
  std::memcpy(b.data(), &h, sizeof h);
}
uint32_t sections(const std::string& b) {
  artifact::Header h;
  std::memcpy(&h, b.data(), sizeof h);
  return h.section_count;
}

TEST(ArtifactChecksum, OldFilesLoadAndLargeSectionsAreChecked) {
  std::string b = big_model_bytes();
  auto load = [](const std::string& s) { return artifact::load_memory(s.data(), s.size()); };
  for (uint32_t i = 0; i < sections(b); ++i) EXPECT_EQ(entry(b, i)->flags, artifact::kSectionStripedChecksum);
  Tensor x = Tensor::zeros(DType::f32, {1, 2048});
  for (int i = 0; i < 2048; ++i) x.data<float>()[i] = float(i % 13) - 6.f;
  std::vector<Tensor> want = Executor(load(b).graph).run({x});

  // As written before the striped checksum: flags 0, checksum64. It loads, with the same outputs.
  std::string old = b;
  for (uint32_t i = 0; i < sections(old); ++i) {
    artifact::SectionEntry* e = entry(old, i);
    e->flags = 0;
    e->checksum = artifact::checksum64(old.data() + e->offset, e->size);
  }
  reseal_table(old);
  std::vector<Tensor> got = Executor(load(old).graph).run({x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].same_bytes(want[0]));

  // A flag bit nobody knows: refused (a later format's checksum is not guessed at).
  std::string unknown = b;
  entry(unknown, 0)->flags |= 2;
  reseal_table(unknown);
  EXPECT_CUVIL_ERROR(load(unknown), "unknown flags");

  // One flipped bit deep in the weights (each format's checksum): refused, naming the section.
  for (const std::string* f : {&b, &old}) {
    std::string t = *f;
    for (uint32_t i = 0; i < sections(t); ++i)
      if (entry(t, i)->kind == uint32_t(artifact::SectionKind::weights)) {
        ASSERT_GE(entry(t, i)->size, uint64_t(16) << 20);
        t[entry(t, i)->offset + entry(t, i)->size - 12345] ^= 4;
      }
    EXPECT_CUVIL_ERROR(load(t), "section weights is corrupt");
  }
}

}  // namespace
}  // namespace cuvil
