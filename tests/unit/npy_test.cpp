#include <gtest/gtest.h>

#include "ir/npy.h"
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

// The header is parsed as the dict it is: keys inside strings, repeated keys, other keys, values of the wrong
// kind and text after the dict are refused, never read past. (A search for "'shape'" used to find it inside the
// descr string and take the shape from there.)
TEST(Npy, HostileHeadersAreRefused) {
  auto parse = [](const std::string& dict, const std::string& body = std::string(4, '\0')) {
    std::string b = npy_with_header(dict, body);
    return parse_npy(b.data(), b.size());
  };
  // A key inside another key's string: the search for "'shape'" took (2, 2) from the string and read a 2x2 tensor.
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'x': \"'shape': (2, 2)\", 'shape': (4,)}",
                           std::string(16, '\0')),
                     "unexpected header key 'x'");
  EXPECT_CUVIL_ERROR(parse("{'fortran_order': False, 'x': \"'descr': '<i4'\", 'descr': '<f4', 'shape': (1,)}"),
                     "unexpected header key 'x'");
  EXPECT_EQ(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }").shape(), (std::vector<int64_t>{1}));
  EXPECT_EQ(parse("{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(1,)}").shape(), (std::vector<int64_t>{1}));
  EXPECT_EQ(parse("{'shape': (2, 2), 'fortran_order': False, 'descr': '|u1'}").shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (), }").rank(), 0u);

  // 'shape' inside another value: the descr is not a dtype, and the real shape key is missing.
  EXPECT_CUVIL_ERROR(parse("{'descr': \"'shape': (1,)\", 'fortran_order': False}"), "bad byte order in descr");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'x': \"'shape': (1,)\"}"),
                     "unexpected header key 'x'");
  // A key whose name only contains 'shape'.
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shapes': (1,)}"), "unexpected header key");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False}"), "no 'shape' entry");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'shape': (1,), 'fortran_order': False, 'shape': (2,)}"),
                     "repeats key 'shape'");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (1,)}"),
                     "repeats key 'descr'");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} {'shape': (9,)}"),
                     "unexpected text after the dict");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)"), "malformed header");
  EXPECT_CUVIL_ERROR(parse("'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"), "malformed header");
  // Values of the wrong kind.
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}"), "malformed fortran_order");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}"), "malformed header");
  EXPECT_CUVIL_ERROR(parse("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}"),
                     "structured dtypes are not");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': 1}"), "malformed header");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}"), "written '(n,)'");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"), "malformed shape entry");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}"), "malformed shape entry");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}"), "malformed shape entry");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2,)}"), "malformed header");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (9999999999999999,)}"),
                     "malformed shape entry");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 1048576)}"),
                     "shape too large");
  // Strings with escapes or control characters, unterminated strings.
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}"), "unsupported character");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4\n', 'fortran_order': False, 'shape': (1,)}"), "unsupported character");
  EXPECT_CUVIL_ERROR(parse("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}"), "unsupported dtype");
  EXPECT_CUVIL_ERROR(parse("{'descr: '<f4'}"), "malformed header");
  // Too many dims.
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1, ";
  EXPECT_CUVIL_ERROR(parse(many + ")}"), "more than 64 dims");
  // Python 2's long literals, in headers old NumPy wrote.
  EXPECT_EQ(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }").shape(), (std::vector<int64_t>{1}));
  // A header longer than the limit (a version-2 header declaring 16 MiB).
  std::string v2("\x93NUMPY\x02\x00\x00\x00\x00\x01", 12);
  v2 += std::string(64, ' ');
  EXPECT_CUVIL_ERROR(parse_npy(v2.data(), v2.size()), "larger than the limit");
}
