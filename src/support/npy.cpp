#include "support/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>

namespace cuvil {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  DType dtype;
  bool big_endian;
};

Descr parse_descr(const std::string& d, const std::string& what) {
  CUVIL_CHECK(d.size() >= 2, what, ": unsupported dtype descr '", d, "'");
  char order = d[0];
  std::string code = d.substr(1);
  bool big = order == '>';
  CUVIL_CHECK(order == '<' || order == '>' || order == '|' || order == '=', what, ": bad byte order in descr '", d, "'");
  static const std::pair<const char*, DType> codes[] = {
      {"f4", DType::f32}, {"f8", DType::f64}, {"f2", DType::f16}, {"i1", DType::i8},  {"u1", DType::u8},
      {"i2", DType::i16}, {"u2", DType::u16}, {"i4", DType::i32}, {"u4", DType::u32}, {"i8", DType::i64},
      {"u8", DType::u64}, {"b1", DType::boolean}};
  for (auto& [c, t] : codes)
    if (code == c) return {t, big};
  fail(what, ": unsupported dtype '", d, "' (supported: float16/32/64, int8-64, uint8-64, bool)");
}

std::string descr_of(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::i8: return "|i1";
    case DType::u8: return "|u1";
    case DType::i16: return "<i2";
    case DType::u16: return "<u2";
    case DType::i32: return "<i4";
    case DType::u32: return "<u4";
    case DType::i64: return "<i8";
    case DType::u64: return "<u8";
    case DType::boolean: return "|b1";
    case DType::bf16: break;
  }
  fail("internal error: no npy descr for ", dtype_name(t));
}

// Finds 'key': in the header dict and returns the position just after the colon.
size_t find_key(const std::string& h, const std::string& key, const std::string& what) {
  for (const char* q : {"'", "\""}) {
    size_t p = h.find(q + key + q);
    if (p != std::string::npos) {
      size_t colon = h.find(':', p);
      CUVIL_CHECK(colon != std::string::npos, what, ": malformed header (no ':' after '", key, "')");
      return colon + 1;
    }
  }
  fail(what, ": header has no '", key, "' entry");
}

}  // namespace

Tensor parse_npy(const void* data, size_t size, const std::string& what) {
  auto* p = static_cast<const uint8_t*>(data);
  CUVIL_CHECK(size >= 10 && std::memcmp(p, kMagic, 6) == 0, what, ": not a .npy file (bad magic)");
  int major = p[6];
  CUVIL_CHECK(major >= 1 && major <= 3, what, ": unsupported .npy format version ", major);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = size_t(p[8]) | size_t(p[9]) << 8;
    header_start = 10;
  } else {
    CUVIL_CHECK(size >= 12, what, ": truncated header");
    header_len = size_t(p[8]) | size_t(p[9]) << 8 | size_t(p[10]) << 16 | size_t(p[11]) << 24;
    header_start = 12;
  }
  CUVIL_CHECK(header_start + header_len <= size, what, ": truncated header");
  std::string h(reinterpret_cast<const char*>(p + header_start), header_len);

  // descr
  size_t d = find_key(h, "descr", what);
  size_t q1 = h.find_first_of("'\"", d);
  CUVIL_CHECK(q1 != std::string::npos, what, ": malformed descr");
  size_t q2 = h.find(h[q1], q1 + 1);
  CUVIL_CHECK(q2 != std::string::npos, what, ": malformed descr");
  Descr descr = parse_descr(h.substr(q1 + 1, q2 - q1 - 1), what);

  // fortran_order
  size_t f = find_key(h, "fortran_order", what);
  while (f < h.size() && h[f] == ' ') ++f;
  bool fortran;
  if (h.compare(f, 4, "True") == 0) fortran = true;
  else if (h.compare(f, 5, "False") == 0) fortran = false;
  else fail(what, ": malformed fortran_order");

  // shape: a tuple of non-negative integers
  size_t s = find_key(h, "shape", what);
  size_t open = h.find('(', s), close = h.find(')', s);
  CUVIL_CHECK(open != std::string::npos && close != std::string::npos && open < close, what, ": malformed shape");
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (size_t k = open + 1; k < close;) {
    while (k < close && (h[k] == ' ' || h[k] == ',')) ++k;
    if (k >= close) break;
    size_t e = k;
    while (e < close && std::isdigit(static_cast<unsigned char>(h[e]))) ++e;
    CUVIL_CHECK(e > k && e - k <= 12, what, ": malformed shape entry");
    int64_t dim = std::stoll(h.substr(k, e - k));
    shape.push_back(dim);
    CUVIL_CHECK(dim == 0 || numel <= (int64_t(1) << 40) / dim, what, ": shape too large");
    numel *= dim;
    k = e;
  }
  size_t elem = dtype_size(descr.dtype);
  size_t body = header_start + header_len;
  CUVIL_CHECK(size - body >= size_t(numel) * elem, what, ": truncated data (", size - body, " bytes for ",
              numel, " elements of ", dtype_name(descr.dtype), ")");
  CUVIL_CHECK(size - body == size_t(numel) * elem, what, ": ", size - body - size_t(numel) * elem,
              " unexpected trailing bytes");

  Tensor t = Tensor::zeros(descr.dtype, shape);
  std::memcpy(t.raw(), p + body, t.nbytes());
  if (descr.big_endian && elem > 1) {
    auto* b = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < numel; ++i) std::reverse(b + size_t(i) * elem, b + size_t(i + 1) * elem);
  }
  if (descr.dtype == DType::boolean) {
    auto* b = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < numel; ++i) CUVIL_CHECK(b[i] <= 1, what, ": bool element ", i, " is not 0 or 1");
  }
  if (fortran && shape.size() > 1) {
    // Column-major -> row-major: element at multi-index I sits at sum(I[k] * fstride[k]).
    Tensor c = Tensor::zeros(descr.dtype, shape);
    std::vector<int64_t> fstride(shape.size(), 1);
    for (size_t k = 1; k < shape.size(); ++k) fstride[k] = fstride[k - 1] * shape[k - 1];
    std::vector<int64_t> idx(shape.size(), 0);
    auto* src = static_cast<const uint8_t*>(t.raw());
    auto* dst = static_cast<uint8_t*>(c.raw());
    for (int64_t i = 0; i < numel; ++i) {
      int64_t off = 0;
      for (size_t k = 0; k < shape.size(); ++k) off += idx[k] * fstride[k];
      std::memcpy(dst + size_t(i) * elem, src + size_t(off) * elem, elem);
      for (size_t k = shape.size(); k-- > 0;) {
        if (++idx[k] < shape[k]) break;
        idx[k] = 0;
      }
    }
    return c;
  }
  return t;
}

Tensor read_npy_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  CUVIL_CHECK(f, "cannot open '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_npy(bytes.data(), bytes.size(), path);
}

std::string serialize_npy(const Tensor& in) {
  Tensor t = in;
  if (t.dtype() == DType::bf16) {  // no NumPy bf16: widen
    Tensor w = Tensor::zeros(DType::f32, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) w.data<float>()[i] = float(t.data<bf16_t>()[i]);
    t = w;
  }
  std::string shape = "(";
  for (size_t k = 0; k < t.rank(); ++k) shape += std::to_string(t.dim(k)) + (t.rank() == 1 ? "," : (k + 1 < t.rank() ? ", " : ""));
  shape += ")";
  std::string header = "{'descr': '" + descr_of(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void write_npy_file(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary);
  CUVIL_CHECK(f, "cannot write '", path, "'");
  std::string bytes = serialize_npy(t);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  CUVIL_CHECK(f, "cannot write '", path, "'");
}

}  // namespace cuvil
