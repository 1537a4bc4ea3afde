// Hostile files and directories (docs/SECURITY.md): every file Cuvil reads — models (.onnx, .cvir), ONNX external
// data, TensorProto files, .npy inputs, kernel-cache entries — must be a regular file (a FIFO must not block, a
// directory or a device must not be read), have its size checked before it is read, and (external data) stay
// inside the model's directory with symbolic links resolved. The kernel cache must not write through planted
// links, must refuse directories others can write, and must not run forged entries.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include "codegen/llvm/jit.h"
#include "frontend/load_model.h"
#include "onnx_test_util.h"
#include "support/file_io.h"
#include "ir/npy.h"
#include "support/sha256.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::codegen;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the temporary directory, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cuvil_hostile_XXXXXX").string();
    CUVIL_ASSERT(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& s) const { return path / s; }
};

void write_file(const fs::path& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
  ASSERT_TRUE(f.good()) << p;
}
std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A sparse file of `size` bytes whose first bytes are `head` (ftruncate: no disk used).
void sparse_file(const fs::path& p, const std::string& head, uint64_t size) {
  write_file(p, head);
  ASSERT_EQ(::truncate(p.c_str(), off_t(size)), 0) << std::strerror(errno);
}

// y = x + w, x: f32[3], w: f32[3] an initializer, as stored data or external data at `location`.
onnx::ModelProto add_model(const std::string& location = "", int64_t offset = -1) {
  onnx::ModelProto m = onnx_model(8, 13);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {3});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {3});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  if (location.empty()) {
    for (float f : {1.f, 2.f, 3.f}) w->add_float_data(f);
  } else {
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = w->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    if (offset >= 0) {
      kv = w->add_external_data();
      kv->set_key("offset");
      kv->set_value(std::to_string(offset));
    }
  }
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add_1");
  add->add_input("x");
  add->add_input("w");
  add->add_output("y");
  return m;
}
const std::string kWeights = [] {
  float w[3] = {1, 2, 3};
  return std::string(reinterpret_cast<char*>(w), sizeof w);
}();
std::vector<float> weights_of(const Graph& g) {
  const Tensor& t = g.constants()[0]->constant();
  return values<float>(t);
}

// Runs `f` on another thread; if it has not finished after a few seconds it is blocked on the FIFO at `fifo`
// (opening it, or reading or writing it), and the test fails after unblocking it: a blocked reader gets a writer
// that closes at once (end of file), a blocked writer (`f_writes`) a reader that drains the FIFO until `f` ends.
// Either way the call's error message (or "" if it returned) comes back.
std::string call_near_fifo(const fs::path& fifo, const std::function<void()>& f, bool f_writes = false) {
  auto fut = std::async(std::launch::async, [&]() -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo;
    if (!f_writes) {
      int fd = ::open(fifo.c_str(), O_WRONLY);
      if (fd >= 0) ::close(fd);
    } else {
      int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
      char buf[4096];
      while (fut.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready)
        if (fd >= 0) (void)!::read(fd, buf, sizeof buf);
      if (fd >= 0) ::close(fd);
    }
  }
  return fut.get();
}

// The process's address space now, in bytes.
inline uint64_t address_space_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t pages = 0;
  f >> pages;
  return pages * uint64_t(::sysconf(_SC_PAGESIZE));
}

// Death-test body (a forked child): runs `stmt` with at most 2 GiB more address space than the process already
// has (so reading a huge file or a device until memory runs out fails fast instead of exhausting the machine)
// and exits 0 iff it throws a cuvil::Error holding `needle`; 2 for any other exception (std::bad_alloc), 1 if
// nothing was thrown.
#if defined(__SANITIZE_ADDRESS__)
#define CUVIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUVIL_ASAN 1
#endif
#endif
inline void limit_memory() {
#ifndef CUVIL_ASAN  // ASan reserves terabytes of address space: no limit there
  struct rlimit rl {};
  rl.rlim_cur = rl.rlim_max = address_space_bytes() + (uint64_t(2) << 30);
  ::setrlimit(RLIMIT_AS, &rl);
#endif
  ::alarm(60);
}
#define EXPECT_BOUNDED_ERROR(stmt, needle)                                        \
  EXPECT_EXIT(                                                                    \
      {                                                                           \
        limit_memory();                                                           \
        try {                                                                     \
          stmt;                                                                   \
        } catch (const ::cuvil::Error& e) {                                       \
          bool found = std::string(e.what()).find(needle) != std::string::npos;   \
          if (!found) std::fprintf(stderr, "message: %s\n", e.what());            \
          std::_Exit(found ? 0 : 3);                                              \
        } catch (const std::exception& e) {                                       \
          std::fprintf(stderr, "exception: %s\n", e.what());                      \
          std::_Exit(2);                                                          \
        }                                                                         \
        std::_Exit(1);                                                            \
      },                                                                          \
      ::testing::ExitedWithCode(0), "")

// ---- the kernel cache

// y = x * c: a distinct kernel (and cache entry) per constant.
Kernel scale_kernel(double c) {
  Kernel k;
  k.operands = {{DType::f32, Access::contiguous, false, false}, {DType::f32, Access::contiguous, true, false}};
  k.exprs.push_back({Op::load, Scalar::f32, -1, -1, -1, 0, 0});
  k.exprs.push_back({Op::constant, Scalar::f32, -1, -1, -1, -1, c});
  k.exprs.push_back({Op::mul, Scalar::f32, 0, 1, -1, -1, 0});
  k.stores.push_back({1, 2});
  return k;
}
// x = [1, -2, 4] through the kernel.
std::vector<float> run_scale(GeneratedFn fn) {
  float x[3] = {1, -2, 4}, y[3] = {};
  std::vector<int64_t> dims{3}, strides{1, 1};
  void* ptrs[] = {x, y};
  fn(dims.data(), strides.data(), ptrs, 0, 3);
  return {y[0], y[1], y[2]};
}
const std::vector<float> kScaled = {2.5f, -5.0f, 10.0f};  // scale_kernel(2.5)

// The cache entries (*.cuvk) of a directory.
std::vector<fs::path> cache_entries(const fs::path& dir) {
  std::vector<fs::path> r;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".cuvk") r.push_back(e.path());
  return r;
}

// Restores the default cache (and CUVIL_CACHE_MAX_MB) when a test ends.
struct CacheGuard {
  ~CacheGuard() {
    ::unsetenv("CUVIL_CACHE_MAX_MB");
    jit_reset_for_testing("");
  }
};

// A cache entry of the format before SHA-256 (CUVILK01: a 64-bit FNV-1a of the object), which anyone can forge.
std::string fnv_entry(const std::string& key, const std::string& object) {
  uint64_t ks = key.size(), os = object.size(), sum = fnv1a64(object.data(), object.size());
  std::string d("CUVILK01", 8);
  d.append(reinterpret_cast<const char*>(&ks), 8);
  d += key;
  d.append(reinterpret_cast<const char*>(&os), 8);
  d.append(reinterpret_cast<const char*>(&sum), 8);
  return d + object;
}
// An entry in the current format (CUVILK02: SHA-256 of the header fields, the key and the object).
std::string sha_entry(const std::string& key, const std::string& object) {
  uint64_t ks = key.size(), os = object.size();
  std::string d("CUVILK02", 8);
  d.append(reinterpret_cast<const char*>(&ks), 8);
  d += key;
  d.append(reinterpret_cast<const char*>(&os), 8);
  Sha256::Digest h = Sha256().update(d).update(object).finish();
  d.append(reinterpret_cast<const char*>(h.data()), h.size());
  return d + object;
}
// The key and the object of an entry, in either format.
std::pair<std::string, std::string> split_entry(const std::string& d) {
  size_t sum = d.compare(0, 8, "CUVILK01") == 0 ? 8 : 32;
  uint64_t ks = 0, os = 0;
  std::memcpy(&ks, d.data() + 8, 8);
  std::memcpy(&os, d.data() + 16 + ks, 8);
  return {d.substr(16, ks), d.substr(16 + ks + 8 + sum, os)};
}
// The object with every copy of the f32 constant `from` replaced by `to` (the kernel's multiplier).
std::string patch_constant(std::string object, float from, float to) {
  std::string f(reinterpret_cast<const char*>(&from), 4), t(reinterpret_cast<const char*>(&to), 4);
  int n = 0;
  for (size_t at = object.find(f); at != std::string::npos; at = object.find(f, at + 4)) object.replace(at, 4, t), ++n;
  EXPECT_GT(n, 0) << "the constant is not in the object";
  return object;
}

}  // namespace

// ---- models: only regular files, sizes checked first

TEST(HostileFiles, ModelMustBeARegularFile) {
  TempDir d;
  for (const char* name : {"fifo.onnx", "fifo.cvir"}) {
    ASSERT_EQ(::mkfifo((d / name).c_str(), 0600), 0);
    std::string msg = call_near_fifo(d / name, [&] { load_model((d / name).string()); });
    EXPECT_NE(msg.find("is a FIFO, not a regular file"), std::string::npos) << msg;
  }
  for (const char* name : {"dir.onnx", "dir.cvir"}) {
    fs::create_directory(d / name);
    EXPECT_CUVIL_ERROR(load_model((d / name).string()), "is a directory, not a regular file");
  }
  EXPECT_CUVIL_ERROR(load_model("/dev/null"), "is a character device, not a regular file");
  EXPECT_CUVIL_ERROR(import_onnx_file("/dev/zero"), "is a character device, not a regular file");
  std::string msg = call_near_fifo(d / "fifo.onnx", [&] { read_onnx_tensor_file((d / "fifo.onnx").string()); });
  EXPECT_NE(msg.find("is a FIFO"), std::string::npos) << msg;
  // A symbolic link to a model is followed (the user named it); the model still loads.
  write_file(d / "real.onnx", add_model().SerializeAsString());
  fs::create_symlink(d / "real.onnx", d / "link.onnx");
  EXPECT_EQ(weights_of(*load_model((d / "link.onnx").string())), (std::vector<float>{1, 2, 3}));
}

TEST(HostileFiles, HugeModelsAreRefusedBeforeReading) {
  TempDir d;
  // 3 GB, sparse: reading it whole would take 3 GB of memory (the death test's limit is 2 GiB).
  sparse_file(d / "huge.onnx", add_model().SerializeAsString(), uint64_t(3) << 30);
  EXPECT_BOUNDED_ERROR(load_model((d / "huge.onnx").string()), "larger than 2 GiB");
  sparse_file(d / "huge.cvir", "graph @g() {\n", uint64_t(3) << 30);
  EXPECT_BOUNDED_ERROR(load_model((d / "huge.cvir").string()), "more than the limit of 2.00 GiB");
  sparse_file(d / "huge.pb", "", uint64_t(3) << 30);
  EXPECT_BOUNDED_ERROR(read_onnx_tensor_file((d / "huge.pb").string()), "larger than 2 GiB");
}

// ---- .npy inputs (what `cuvil run --input` reads)

TEST(HostileFiles, NpyInputMustBeARegularFileOfTheDeclaredSize) {
  TempDir d;
  EXPECT_BOUNDED_ERROR(read_npy_file("/dev/zero"), "is a character device, not a regular file");
  ASSERT_EQ(::mkfifo((d / "x.npy").c_str(), 0600), 0);
  std::string msg = call_near_fifo(d / "x.npy", [&] { read_npy_file((d / "x.npy").string()); });
  EXPECT_NE(msg.find("is a FIFO, not a regular file"), std::string::npos) << msg;
  fs::create_directory(d / "dir.npy");
  EXPECT_CUVIL_ERROR(read_npy_file((d / "dir.npy").string()), "is a directory, not a regular file");
  // A header declaring 4 floats, then 3 GB (sparse): refused from the file's size, without reading the data.
  std::string good = serialize_npy(Tensor::zeros(DType::f32, {4}));
  sparse_file(d / "huge.npy", good, uint64_t(3) << 30);
  EXPECT_BOUNDED_ERROR(read_npy_file((d / "huge.npy").string()), "unexpected trailing bytes");
  // A header declaring more data than the file holds: refused before allocating it.
  std::string big = serialize_npy(Tensor::zeros(DType::f32, {4}));
  big.replace(big.find("(4,)"), 4, "(1000000000000,)");
  write_file(d / "short.npy", big);
  EXPECT_BOUNDED_ERROR(read_npy_file((d / "short.npy").string()), "truncated data");
  // And a good file still reads.
  write_file(d / "ok.npy", good);
  EXPECT_EQ(read_npy_file((d / "ok.npy").string()).shape(), (std::vector<int64_t>{4}));
}

// Outputs (`cuvil run --output-dir`) are not written through a symbolic link planted at their name.
TEST(HostileFiles, NpyOutputIsNotWrittenThroughASymlink) {
  TempDir d;
  write_file(d / "target", "precious");
  fs::create_symlink(d / "target", d / "y.npy");
  EXPECT_CUVIL_ERROR(write_npy_file((d / "y.npy").string(), Tensor::zeros(DType::f32, {2})), "symbolic link");
  EXPECT_EQ(read_file(d / "target"), "precious");
  ASSERT_EQ(::mkfifo((d / "z.npy").c_str(), 0600), 0);
  std::string msg = call_near_fifo(
      d / "z.npy", [&] { write_npy_file((d / "z.npy").string(), Tensor::zeros(DType::f32, {2})); }, true);
  EXPECT_NE(msg.find("cannot write"), std::string::npos) << msg;
  write_npy_file((d / "ok.npy").string(), Tensor::zeros(DType::f32, {2}));
  EXPECT_EQ(read_npy_file((d / "ok.npy").string()).shape(), (std::vector<int64_t>{2}));
}

// ---- ONNX external data: confined to the model's directory, symbolic links resolved

TEST(HostileFiles, ExternalDataThroughASymlinkOutsideIsRefused) {
  TempDir d, outside;
  write_file(outside / "secret", kWeights);  // 12 bytes: exactly what the tensor needs
  fs::create_directory(d / "m");
  // A directory link: `weights -> <outside>`, location `weights/secret`.
  fs::create_directory_symlink(outside.path, d / "m" / "weights");
  write_file(d / "m" / "model.onnx", add_model("weights/secret").SerializeAsString());
  EXPECT_CUVIL_ERROR(load_model((d / "m" / "model.onnx").string()), "leads outside the model's directory");
  // A file link to outside.
  fs::create_symlink(outside / "secret", d / "m" / "w.bin");
  write_file(d / "m" / "model.onnx", add_model("w.bin").SerializeAsString());
  EXPECT_CUVIL_ERROR(load_model((d / "m" / "model.onnx").string()), "leads outside the model's directory");
  // The classic: /etc/passwd through a link to /etc (its size does not matter: the path is refused first).
  fs::create_directory_symlink("/etc", d / "m" / "etc");
  write_file(d / "m" / "model.onnx", add_model("etc/passwd").SerializeAsString());
  EXPECT_CUVIL_ERROR(load_model((d / "m" / "model.onnx").string()), "leads outside the model's directory");
  // The same through import_onnx_bytes with a base directory.
  std::string bytes = add_model("w.bin").SerializeAsString();
  EXPECT_CUVIL_ERROR(import_onnx_bytes(bytes.data(), bytes.size(), (d / "m").string()), "leads outside");

  // Links that stay inside are followed.
  fs::create_directory(d / "m" / "sub");
  write_file(d / "m" / "sub" / "real.bin", kWeights);
  fs::create_symlink("sub/real.bin", d / "m" / "inside.bin");
  write_file(d / "m" / "model.onnx", add_model("inside.bin").SerializeAsString());
  EXPECT_EQ(weights_of(*load_model((d / "m" / "model.onnx").string())), (std::vector<float>{1, 2, 3}));
}

// A content-addressed store (the Hugging Face cache): model and data are links from a snapshot directory into
// one blob directory. The data really lies in the model file's real directory: accepted.
TEST(HostileFiles, ExternalDataInTheModelsRealDirectoryIsAccepted) {
  TempDir d;
  fs::create_directory(d / "blobs");
  fs::create_directory(d / "snapshot");
  write_file(d / "blobs" / "a1", add_model("model.onnx_data").SerializeAsString());
  write_file(d / "blobs" / "b2", kWeights);
  fs::create_symlink("../blobs/a1", d / "snapshot" / "model.onnx");
  fs::create_symlink("../blobs/b2", d / "snapshot" / "model.onnx_data");
  EXPECT_EQ(weights_of(*load_model((d / "snapshot" / "model.onnx").string())), (std::vector<float>{1, 2, 3}));
  // But not a file beside neither.
  write_file(d / "elsewhere", kWeights);
  fs::remove(d / "snapshot" / "model.onnx_data");
  fs::create_symlink("../elsewhere", d / "snapshot" / "model.onnx_data");
  EXPECT_CUVIL_ERROR(load_model((d / "snapshot" / "model.onnx").string()), "leads outside the model's directory");
}

TEST(HostileFiles, ExternalDataMustBeARegularFileOfTheDeclaredSize) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo.bin").c_str(), 0600), 0);
  write_file(d / "model.onnx", add_model("fifo.bin").SerializeAsString());
  std::string msg = call_near_fifo(d / "fifo.bin", [&] { load_model((d / "model.onnx").string()); });
  EXPECT_NE(msg.find("is a FIFO, not a regular file"), std::string::npos) << msg;
  fs::create_directory(d / "dir.bin");
  write_file(d / "model.onnx", add_model("dir.bin").SerializeAsString());
  EXPECT_CUVIL_ERROR(load_model((d / "model.onnx").string()), "is a directory, not a regular file");
  // A 3 GB sparse data file: the tensor at its end is read alone (offset past 2 GiB), nothing else.
  uint64_t size = uint64_t(3) << 30;
  sparse_file(d / "big.bin", "", size);
  {
    std::fstream f(d / "big.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(size - kWeights.size()));
    f.write(kWeights.data(), std::streamsize(kWeights.size()));
  }
  write_file(d / "model.onnx", add_model("big.bin", int64_t(size - kWeights.size())).SerializeAsString());
  EXPECT_EQ(weights_of(*load_model((d / "model.onnx").string())), (std::vector<float>{1, 2, 3}));
  // An offset near INT64_MAX does not overflow the range check.
  write_file(d / "model.onnx", add_model("big.bin", INT64_MAX - 4).SerializeAsString());
  EXPECT_CUVIL_ERROR(load_model((d / "model.onnx").string()), "is past the end");
  // A location with a NUL byte cannot name a different file than it says.
  write_file(d / "model.onnx", add_model(std::string("big.bin\0junk", 12)).SerializeAsString());
  EXPECT_CUVIL_ERROR(load_model((d / "model.onnx").string()), "NUL");
}

// ---- the kernel cache

// Temporary files are created fresh (O_EXCL, O_NOFOLLOW): a symbolic link planted at any name the cache might
// write is never written through; a link at the entry's own name is neither read nor followed.
TEST(HostileFiles, CacheDoesNotWriteThroughPlantedSymlinks) {
  CacheGuard guard;
  TempDir probe, d, victim;
  jit_reset_for_testing((probe.path / "cache").string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  auto entries = cache_entries(probe.path / "cache");
  ASSERT_EQ(entries.size(), 1u);
  std::string name = entries[0].filename().string();

  fs::path cache = d / "cache";
  fs::create_directory(cache);
  fs::permissions(cache, fs::perms::owner_all, fs::perm_options::replace);
  write_file(victim / "target", "precious");
  // The names the former writer used: <entry>.tmp<pid>_<n>, for every n it could have reached.
  for (int n = 0; n < 256; ++n)
    fs::create_symlink(victim / "target", cache / (name + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(n)));
  fs::create_symlink(victim / "target", cache / name);
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  EXPECT_EQ(jit_stats().disk_hits, 0);
  EXPECT_EQ(jit_stats().compiled, 1);
  EXPECT_EQ(jit_stats().rejected_entries, 1);  // the link at the entry's name
  EXPECT_EQ(read_file(victim / "target"), "precious");
  // The entry replaced the link (rename does not follow it) and is a private regular file.
  struct stat st {};
  ASSERT_EQ(::lstat((cache / name).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  EXPECT_EQ(jit_stats().disk_hits, 1);
}

// A FIFO, a directory or an oversized file at an entry's name is rejected without blocking, and the kernel is
// compiled.
TEST(HostileFiles, CacheEntriesMustBeRegularFiles) {
  CacheGuard guard;
  TempDir probe, d;
  jit_reset_for_testing((probe.path / "cache").string());
  jit_kernel(scale_kernel(2.5), Schedule{});
  std::string name = cache_entries(probe.path / "cache").at(0).filename().string();
  fs::path cache = d / "cache";
  fs::create_directory(cache);
  fs::permissions(cache, fs::perms::owner_all, fs::perm_options::replace);

  ASSERT_EQ(::mkfifo((cache / name).c_str(), 0600), 0);
  jit_reset_for_testing(cache.string());
  std::string msg = call_near_fifo(cache / name, [&] {
    if (run_scale(jit_kernel(scale_kernel(2.5), Schedule{})) != kScaled) fail("wrong result");
  });
  EXPECT_EQ(msg, "");
  EXPECT_EQ(jit_stats().rejected_entries, 1);
  EXPECT_EQ(jit_stats().compiled, 1);

  fs::remove(cache / name);
  fs::create_directory(cache / name);
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  EXPECT_EQ(jit_stats().rejected_entries, 1);

  fs::remove(cache / name);
  sparse_file(cache / name, "CUVILK02", uint64_t(3) << 30);
  fs::permissions(cache / name, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  EXPECT_EQ(jit_stats().rejected_entries, 1);
}

// A directory its group or others can write is not used (one warning; kernels compiled in memory): anyone who
// can write it could plant code. Directories the cache creates are 0700, entries 0600.
TEST(HostileFiles, CacheRefusesDirectoriesOthersCanWrite) {
  CacheGuard guard;
  TempDir d;
  fs::path fresh = d / "a" / "b" / "cache";
  jit_reset_for_testing(fresh.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  struct stat st {};
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto entries = cache_entries(fresh);
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_EQ(::stat(entries[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string valid = read_file(entries[0]);

  for (mode_t mode : {0770, 0703, 0777}) {
    fs::path shared = d / ("shared" + std::to_string(mode));
    fs::create_directory(shared);
    ASSERT_EQ(::chmod(shared.c_str(), mode), 0);
    write_file(shared / entries[0].filename(), valid);  // a valid entry: even that is not loaded
    ::chmod((shared / entries[0].filename()).c_str(), 0600);
    jit_reset_for_testing(shared.string());
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
    jit_kernel(scale_kernel(3.5), Schedule{});
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(jit_stats().disk_hits, 0);
    EXPECT_EQ(jit_stats().compiled, 2);
    EXPECT_EQ(jit_stats().refused_cache_dirs, 1);
    EXPECT_EQ(jit_cache_dir(), "");
    EXPECT_NE(err.find("is writable by its group or others"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one warning: " << err;
    EXPECT_EQ(cache_entries(shared).size(), 1u) << "nothing written";
  }
}

// Owned by another user (needs root to set up): not used either.
TEST(HostileFiles, CacheRefusesDirectoriesOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another user";
  CacheGuard guard;
  TempDir d;
  fs::path other = d / "other";
  fs::create_directory(other);
  ASSERT_EQ(::chmod(other.c_str(), 0700), 0);
  ASSERT_EQ(::chown(other.c_str(), 65534, 65534), 0);
  jit_reset_for_testing(other.string());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is owned by uid 65534, not by this user"), std::string::npos) << err;
  EXPECT_EQ(jit_stats().refused_cache_dirs, 1);
  EXPECT_TRUE(cache_entries(other).empty());
  // A symbolic link of another user's, to a directory of ours.
  fs::path mine = d / "mine";
  fs::create_directory(mine);
  ASSERT_EQ(::chmod(mine.c_str(), 0700), 0);
  fs::create_symlink(mine, d / "link");
  ASSERT_EQ(::lchown((d / "link").c_str(), 65534, 65534), 0);
  jit_reset_for_testing((d / "link").string());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is a symbolic link owned by uid 65534"), std::string::npos) << err;
  EXPECT_TRUE(cache_entries(mine).empty());
}

// A forged entry — the kernel's key, another computation's code (here: its multiplier patched from 2.5 to 7),
// and the checksum recomputed — must not run. The format before SHA-256 (FNV-1a, recomputable by anyone) is
// rejected outright; one with a correct SHA-256 in a directory others can write is never read. (In a directory
// only this user can write, a correct SHA-256 is trusted: whoever can write there is this user already.)
TEST(HostileFiles, CacheDoesNotRunForgedEntries) {
  CacheGuard guard;
  TempDir d;
  fs::path cache = d / "cache";
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  fs::path entry = cache_entries(cache).at(0);
  auto [key, object] = split_entry(read_file(entry));
  std::string forged = patch_constant(object, 2.5f, 7.0f);

  write_file(entry, fnv_entry(key, forged));
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled) << "the forged FNV entry ran";
  EXPECT_EQ(jit_stats().rejected_entries, 1);
  EXPECT_EQ(jit_stats().disk_hits, 0);

  // The same with the object changed but the SHA-256 left as it was: rejected as corrupt.
  std::string bad = sha_entry(key, object);
  bad.replace(bad.size() - object.size(), object.size(), forged);
  write_file(entry, bad);
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  EXPECT_EQ(jit_stats().rejected_entries, 1);

  // With the SHA-256 recomputed, in a directory its group can write: not read at all.
  fs::path shared = d / "shared";
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 0775), 0);
  write_file(shared / entry.filename(), sha_entry(key, forged));
  jit_reset_for_testing(shared.string());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled) << "the forged SHA-256 entry ran";
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(jit_stats().disk_hits, 0);

  // Sanity: the entry format this test writes is the cache's own (a genuine entry rebuilt by it is a hit).
  write_file(entry, sha_entry(key, object));
  jit_reset_for_testing(cache.string());
  EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled);
  EXPECT_EQ(jit_stats().disk_hits, 1);
}

// CUVIL_CACHE_MAX_MB that is not a number is an error naming the variable (it used to disable the cache).
TEST(HostileFiles, MalformedCacheBudgetIsAnError) {
  CacheGuard guard;
  TempDir d;
  for (const char* v : {"abc", "12abc", "-1", "inf", "nan", "1e999", " 5", "0x10"}) {
    ::setenv("CUVIL_CACHE_MAX_MB", v, 1);
    EXPECT_CUVIL_ERROR(jit_reset_for_testing(d.path.string()), "CUVIL_CACHE_MAX_MB='" + std::string(v) + "'");
  }
  for (const char* v : {"512", "0.5", "0", ""}) {
    ::setenv("CUVIL_CACHE_MAX_MB", v, 1);
    jit_reset_for_testing((d / "c").string());
    EXPECT_EQ(run_scale(jit_kernel(scale_kernel(2.5), Schedule{})), kScaled) << v;
  }
}

// ---- messages: one line, no terminal controls, whatever the names hold

TEST(HostileFiles, NamesInErrorsAreEscaped) {
  onnx::ModelProto m = add_model();
  m.mutable_graph()->mutable_node(0)->set_input(0, "evil\n\x1b[2J\x1b]0;title\x07\r\xe2\x80\xae");
  std::string bytes = m.SerializeAsString();
  try {
    import_onnx_bytes(bytes.data(), bytes.size());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("input 'evil\\n\\x1b[2J\\x1b]0;title\\x07\\r\\u202e' is not defined"), std::string::npos) << w;
    for (char c : w) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << "control byte in " << w;
  }
  // In file names too (a .npy path), and in messages re-wrapped with more context.
  TempDir d;
  fs::path p = d / "a\nb\x1b[31m.npy";
  write_file(p, "not npy");
  try {
    read_npy_file(p.string());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    std::string w = std::string(Error(std::string("outer: ") + e.what()).what());
    EXPECT_NE(w.find("a\\nb\\x1b[31m.npy: not a .npy file"), std::string::npos) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos);
  }
}

TEST(HostileFiles, EscapeForMessage) {
  EXPECT_EQ(escape_for_message("plain name_1/a.b"), "plain name_1/a.b");
  EXPECT_EQ(escape_for_message("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(escape_for_message(std::string("\0\x01\x1b\x7f", 4)), "\\x00\\x01\\x1b\\x7f");
  EXPECT_EQ(escape_for_message("caf\xc3\xa9 \xe5\x90\x8d \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe5\x90\x8d \xf0\x9f\x98\x80");
  EXPECT_EQ(escape_for_message("\xc2\x9b" "31m"), "\\u009b31m");            // C1 CSI
  EXPECT_EQ(escape_for_message("x\xe2\x80\xaey\xe2\x81\xa6"), "x\\u202ey\\u2066");  // bidi controls
  EXPECT_EQ(escape_for_message("\xff\xc3(\xed\xa0\x80\xc0\xaf"), "\\xff\\xc3(\\xed\\xa0\\x80\\xc0\\xaf");  // not UTF-8
  EXPECT_EQ(escape_for_message("\xe2\x80"), "\\xe2\\x80");  // truncated sequence
  for (std::string s : {std::string("a\nb\x1b\xc2\x9b\xe2\x80\xae\xff"), std::string("back\\slash \\n")})
    EXPECT_EQ(escape_for_message(escape_for_message(s)), escape_for_message(s)) << "idempotent";
  EXPECT_STREQ(Error("x\ny").what(), "x\\ny");
  EXPECT_STREQ(InputError("x\ny").what(), "x\\ny");
}
