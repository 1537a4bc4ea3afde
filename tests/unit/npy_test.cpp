#include <gtest/gtest.h>

#include "support/npy.h"
#include "test_util.h"

using namespace cuvil;

TEST(Npy, RoundTripsEveryDtype) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::i8, DType::u8, DType::i16, DType::u16, DType::i32,
                  DType::u32, DType::i64, DType::u64, DType::boolean}) {
    Tensor x = Tensor::zeros(t, {2, 3});
    auto* p = static_cast<uint8_t*>(x.raw());
    for (size_t i = 0; i < x.nbytes(); ++i) p[i] = t == DType::boolean ? uint8_t(i % 2) : uint8_t(i * 7 + 1);
    std::string bytes = serialize_npy(x);
    EXPECT_EQ((bytes.size() - x.nbytes()) % 64, 0u) << "data is 64-byte aligned";
    Tensor y = parse_npy(bytes.data(), bytes.size());
    EXPECT_TRUE(x.same_bytes(y)) << dtype_name(t);
  }
}

TEST(Npy, ScalarsAndEmptyTensors) {
  for (auto shape : std::vector<std::vector<int64_t>>{{}, {0}, {3, 0, 2}, {1}}) {
    Tensor x = Tensor::zeros(DType::f32, shape);
    std::string b = serialize_npy(x);
    EXPECT_EQ(parse_npy(b.data(), b.size()).shape(), shape);
  }
}

namespace {
std::string npy_with_header(const std::string& dict, const std::string& body) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h + body;
}
}  // namespace

TEST(Npy, ReadsFortranOrderAndBigEndian) {
  // 2x3 int32 in column-major order: values of row-major [[0,1,2],[3,4,5]] stored as 0,3,1,4,2,5.
  int32_t col[] = {0, 3, 1, 4, 2, 5};
  std::string b = npy_with_header("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                  std::string(reinterpret_cast<char*>(col), sizeof col));
  Tensor t = parse_npy(b.data(), b.size());
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<int32_t>()[i], i);

  std::string be("\x00\x00\x01\x02", 4);
  b = npy_with_header("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", be);
  EXPECT_EQ(parse_npy(b.data(), b.size()).data<int32_t>()[0], 0x0102);
}

TEST(Npy, MalformedFilesGiveClearErrors) {
  EXPECT_CUVIL_ERROR(parse_npy("hello", 5), "not a .npy file");
  std::string good = serialize_npy(Tensor::zeros(DType::f32, {4}));
  EXPECT_CUVIL_ERROR(parse_npy(good.data(), good.size() - 1), "truncated data");
  EXPECT_CUVIL_ERROR(parse_npy(good.data(), 20), "truncated header");
  std::string b = npy_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0'));
  EXPECT_CUVIL_ERROR(parse_npy(b.data(), b.size()), "unsupported dtype");
  b = npy_with_header("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0'));
  EXPECT_CUVIL_ERROR(parse_npy(b.data(), b.size()), "fortran_order");
  b = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999,), }", "");
  EXPECT_CUVIL_ERROR(parse_npy(b.data(), b.size()), "npy");
  b = npy_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", std::string(1, '\x07'));
  EXPECT_CUVIL_ERROR(parse_npy(b.data(), b.size()), "not 0 or 1");
  EXPECT_CUVIL_ERROR(read_npy_file("/nonexistent/x.npy"), "cannot open");
}
