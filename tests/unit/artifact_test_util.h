// What the tests of the artifact's weight sections share (artifact_prepacked_test, artifact_gemm_panels_test):
// saving a graph with or without its prepacked weights, finding a section's table entry in the bytes, resealing
// the checksums after editing a section (so that a test judges the edit, not the checksum), loading from memory,
// and comparing outputs bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/format.h"
#include "artifact/prepacked.h"

namespace cuvil::test::artifact_files {

inline Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

inline std::string saved(const std::shared_ptr<Graph>& g, bool prepack) {
  artifact::SaveInput in;
  in.graph = g;
  if (prepack) artifact::add_prepacked_weights(in);
  return artifact::serialize(in);
}

inline artifact::SectionEntry* entry(std::string& b, artifact::SectionKind kind) {
  artifact::Header h;
  std::memcpy(&h, b.data(), sizeof h);
  auto* table = reinterpret_cast<artifact::SectionEntry*>(b.data() + sizeof h);
  for (uint32_t i = 0; i < h.section_count; ++i)
    if (table[i].kind == uint32_t(kind)) return &table[i];
  return nullptr;
}

// After an edit of a section: its checksum, the table's and the header's again, so the edit itself is judged.
inline void reseal(std::string& b, artifact::SectionKind kind) {
  artifact::SectionEntry* e = entry(b, kind);
  e->checksum = artifact::section_checksum(e->flags, b.data() + e->offset, e->size);
  artifact::Header h;
  std::memcpy(&h, b.data(), sizeof h);
  h.table_checksum = artifact::checksum64(b.data() + sizeof h, h.section_count * sizeof(artifact::SectionEntry));
  h.header_checksum = artifact::checksum64(&h, offsetof(artifact::Header, header_checksum));
  std::memcpy(b.data(), &h, sizeof h);
}

inline artifact::Loaded load(const std::string& b) { return artifact::load_memory(b.data(), b.size()); }

inline void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].same_bytes(b[i])) << i;
}

}  // namespace cuvil::test::artifact_files
