#include "ir/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "support/file_io.h"

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
    default: break;
  }
  if (is_low_precision(t)) fail(".npy has no ", dtype_name(t), " (a low-precision type): cast it to float32 first");
  if (t == DType::str) fail("Cuvil writes no .npy of strings");
  fail_internal("no npy descr for ", dtype_name(t));
}

// The header dict, parsed as the NPY format specifies it: a Python literal dict whose keys are exactly 'descr' (a
// string), 'fortran_order' (True or False) and 'shape' (a tuple of non-negative integers), followed by padding
// (spaces, a final '\n'). Each key must appear once; any other key, a repeated key, or anything after the closing
// brace but whitespace is an error (NumPy's reader also refuses other keys). Strings hold no escapes or quotes.
struct Header {
  Descr descr{};
  bool fortran = false;
  std::vector<int64_t> shape;
  int64_t numel = 1;
};

constexpr size_t kMaxHeaderBytes = size_t(1) << 16;  // NumPy's own default limit is 10000
constexpr size_t kMaxRank = 64;                       // NumPy's NPY_MAXDIMS

class HeaderParser {
 public:
  HeaderParser(const std::string& h, const std::string& what) : h_(h), what_(what) {}

  Header parse() {
    Header r;
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{', "at the start of the header");
    bool first = true;
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      if (!first) {
        expect(',', "between header entries");
        skip_ws();
        if (peek() == '}') break;  // a trailing comma
      }
      first = false;
      std::string key = string_literal("a header key");
      expect(':', "after key '" + key + "'");
      if (key == "descr") {
        CUVIL_CHECK(!have_descr, what_, ": header repeats key 'descr'");
        have_descr = true;
        skip_ws();
        CUVIL_CHECK(peek() == '\'' || peek() == '"', what_,
                    ": unsupported dtype descr (only simple dtypes are supported; structured dtypes are not)");
        r.descr = parse_descr(string_literal("the descr"), what_);
      } else if (key == "fortran_order") {
        CUVIL_CHECK(!have_fortran, what_, ": header repeats key 'fortran_order'");
        have_fortran = true;
        skip_ws();
        if (h_.compare(i_, 4, "True") == 0) r.fortran = true, i_ += 4;
        else if (h_.compare(i_, 5, "False") == 0) r.fortran = false, i_ += 5;
        else fail(what_, ": malformed fortran_order (expected True or False)");
      } else if (key == "shape") {
        CUVIL_CHECK(!have_shape, what_, ": header repeats key 'shape'");
        have_shape = true;
        parse_shape(r);
      } else {
        fail(what_, ": unexpected header key '", key, "' (a .npy header holds exactly 'descr', 'fortran_order' and "
             "'shape')");
      }
    }
    ++i_;  // the '}'
    skip_ws();
    CUVIL_CHECK(i_ == h_.size(), what_, ": malformed header (unexpected text after the dict at offset ", i_, ")");
    CUVIL_CHECK(have_descr, what_, ": header has no 'descr' entry");
    CUVIL_CHECK(have_fortran, what_, ": header has no 'fortran_order' entry");
    CUVIL_CHECK(have_shape, what_, ": header has no 'shape' entry");
    return r;
  }

 private:
  char peek() const { return i_ < h_.size() ? h_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < h_.size() && (h_[i_] == ' ' || h_[i_] == '\t' || h_[i_] == '\n' || h_[i_] == '\r')) ++i_;
  }
  void expect(char c, const std::string& where) {
    skip_ws();
    CUVIL_CHECK(peek() == c, what_, ": malformed header (expected '", c, "' ", where, " at offset ", i_, ")");
    ++i_;
  }
  std::string string_literal(const std::string& what) {
    skip_ws();
    char q = peek();
    CUVIL_CHECK(q == '\'' || q == '"', what_, ": malformed header (expected a quoted string as ", what,
                " at offset ", i_, ")");
    size_t start = ++i_;
    while (i_ < h_.size() && h_[i_] != q) {
      unsigned char c = static_cast<unsigned char>(h_[i_]);
      CUVIL_CHECK(c != '\\' && c >= 0x20 && c < 0x7f, what_, ": malformed header (unsupported character in ",
                  what, " at offset ", i_, ")");
      ++i_;
    }
    CUVIL_CHECK(i_ < h_.size(), what_, ": malformed header (unterminated string)");
    return h_.substr(start, i_++ - start);
  }
  void parse_shape(Header& r) {
    expect('(', "to open the shape");
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      size_t e = i_;
      while (e < h_.size() && std::isdigit(static_cast<unsigned char>(h_[e]))) ++e;
      CUVIL_CHECK(e > i_ && e - i_ <= 15 && (h_[i_] != '0' || e - i_ == 1), what_,
                  ": malformed shape entry at offset ", i_, " (expected a non-negative integer)");
      int64_t dim = std::stoll(h_.substr(i_, e - i_));
      i_ = e;
      if (peek() == 'L') ++i_;  // Python 2's long literal, in headers written by old NumPy
      CUVIL_CHECK(r.shape.size() < kMaxRank, what_, ": shape has more than ", kMaxRank, " dims");
      r.shape.push_back(dim);
      CUVIL_CHECK(dim == 0 || r.numel <= (int64_t(1) << 40) / dim, what_, ": shape too large");
      r.numel *= dim;
      skip_ws();
      if (peek() == ')') {
        // Python: (3) is the integer 3, not a tuple; a one-element tuple is written (3,).
        CUVIL_CHECK(r.shape.size() != 1, what_, ": malformed shape (a one-dim shape is written '(n,)')");
        break;
      }
      expect(',', "between shape entries");
    }
    ++i_;  // the ')'
  }

  const std::string& h_;
  const std::string& what_;
  size_t i_ = 0;
};

// The header at the start of `p` (magic, version, length, dict); `size` is how many bytes of the file `p` holds
// (at least the header). Returns the header and sets `data_offset` to where the data starts.
Header parse_header(const uint8_t* p, size_t size, const std::string& what, size_t& data_offset) {
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
  CUVIL_CHECK(header_len <= kMaxHeaderBytes, what, ": header of ", header_len, " bytes is larger than the limit of ",
              kMaxHeaderBytes);
  CUVIL_CHECK(header_start + header_len <= size, what, ": truncated header");
  std::string h(reinterpret_cast<const char*>(p + header_start), header_len);
  data_offset = header_start + header_len;
  return HeaderParser(h, what).parse();
}

// Checks that `data_bytes` (what follows the header) is exactly the data the header declares.
void check_data_size(const Header& h, uint64_t data_bytes, const std::string& what) {
  uint64_t want = uint64_t(h.numel) * dtype_size(h.descr.dtype);
  CUVIL_CHECK(data_bytes >= want, what, ": truncated data (", data_bytes, " bytes for ", h.numel, " elements of ",
              dtype_name(h.descr.dtype), ")");
  CUVIL_CHECK(data_bytes == want, what, ": ", data_bytes - want, " unexpected trailing bytes");
}

// The tensor as stored (`t`: the file's data, in the file's order and byte order) turned into Cuvil's: native
// byte order, bools checked, row-major.
Tensor finish_tensor(Tensor t, const Header& h, const std::string& what) {
  size_t elem = dtype_size(h.descr.dtype);
  int64_t numel = h.numel;
  const std::vector<int64_t>& shape = h.shape;
  if (h.descr.big_endian && elem > 1) {
    auto* b = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < numel; ++i) std::reverse(b + size_t(i) * elem, b + size_t(i + 1) * elem);
  }
  if (h.descr.dtype == DType::boolean) {
    auto* b = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < numel; ++i) CUVIL_CHECK(b[i] <= 1, what, ": bool element ", i, " is not 0 or 1");
  }
  if (h.fortran && shape.size() > 1) {
    // Column-major -> row-major: element at multi-index I sits at sum(I[k] * fstride[k]).
    Tensor c = Tensor::zeros(h.descr.dtype, shape);
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

}  // namespace

Tensor parse_npy(const void* data, size_t size, const std::string& what) {
  auto* p = static_cast<const uint8_t*>(data);
  size_t body = 0;
  Header h = parse_header(p, size, what, body);
  check_data_size(h, size - body, what);
  Tensor t = Tensor::zeros(h.descr.dtype, h.shape);
  if (t.nbytes()) std::memcpy(t.raw(), p + body, t.nbytes());
  return finish_tensor(std::move(t), h, what);
}

// The file is opened as a regular file (no FIFO, device or directory), its header read and checked, and the
// data's size compared with the file's before any of it is read or allocated.
Tensor read_npy_file(const std::string& path) {
  RegularFile f = RegularFile::open(path, ".npy file");
  size_t prefix = size_t(std::min<uint64_t>(f.size(), 12));
  uint8_t head[12] = {};
  f.read_at(0, head, prefix);
  CUVIL_CHECK(prefix >= 10 && std::memcmp(head, kMagic, 6) == 0, path, ": not a .npy file (bad magic)");
  size_t header_len = head[6] == 1 ? (size_t(head[8]) | size_t(head[9]) << 8)
                                   : (size_t(head[8]) | size_t(head[9]) << 8 | size_t(head[10]) << 16 |
                                      size_t(head[11]) << 24);
  size_t header_bytes = (head[6] == 1 ? 10 : 12) + std::min(header_len, kMaxHeaderBytes + 1);
  std::string header(size_t(std::min<uint64_t>(f.size(), header_bytes)), '\0');
  f.read_at(0, header.data(), header.size());
  size_t body = 0;
  Header h = parse_header(reinterpret_cast<const uint8_t*>(header.data()), header.size(), path, body);
  check_data_size(h, f.size() - body, path);
  Tensor t = Tensor::zeros(h.descr.dtype, h.shape);
  if (t.nbytes()) f.read_at(body, t.raw(), t.nbytes());
  return finish_tensor(std::move(t), h, path);
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

// Opened without following a symbolic link and refused unless it is (or becomes) a regular file, so a link or a
// FIFO planted in a shared output directory is neither written through nor blocks.
void write_npy_file(const std::string& path, const Tensor& t) {
  std::string bytes = serialize_npy(t);
  CUVIL_CHECK(path.find('\0') == std::string::npos, "output path '", path, "' holds a NUL byte");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0 && errno == ELOOP) fail("cannot write '", path, "': it is a symbolic link, which is not followed");
  CUVIL_CHECK(fd >= 0, "cannot write '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot write '", path, "': not a regular file");
  }
  bool ok = ::ftruncate(fd, 0) == 0;
  for (size_t at = 0; ok && at < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) at += size_t(n);
  }
  int e = errno;
  ok = (::close(fd) == 0) && ok;
  CUVIL_CHECK(ok, "cannot write '", path, "': ", std::strerror(e));
}

}  // namespace cuvil
