#include "codegen/llvm/jit.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <unordered_map>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include "support/error.h"
#include "support/file_io.h"
#include "support/perf_map.h"
#include "support/sha256.h"

#ifndef CUVIL_VERSION
#define CUVIL_VERSION "dev"
#endif

namespace cuvil::codegen {

namespace {

// Version 02: SHA-256 of the entry (01 had a 64-bit FNV-1a of the object, which anyone can recompute).
constexpr char kMagic[8] = {'C', 'U', 'V', 'I', 'L', 'K', '0', '2'};
constexpr size_t kDigestBytes = 32;
constexpr uint64_t kMaxEntryBytes = uint64_t(256) << 20;  // an object of a few KB; anything this large is not ours

void library_marker() {}  // an address inside libcuvil, for dladdr

template <class T>
T unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) fail("code generation failed (", what, "): ", llvm::toString(v.takeError()));
  return std::move(*v);
}

// The only functions outside itself a kernel may call: the C library's math (f64 math and fmod, emit.cpp's
// call_per_lane). They are defined in the JIT's main library, which every kernel's library links against.
llvm::orc::SymbolMap math_functions(llvm::orc::LLJIT& jit) {
  using D1 = double (*)(double);
  using D2 = double (*)(double, double);
  using F2 = float (*)(float, float);
  const std::pair<const char*, void*> fns[] = {
      {"exp", reinterpret_cast<void*>(D1(&::exp))},    {"log", reinterpret_cast<void*>(D1(&::log))},
      {"tanh", reinterpret_cast<void*>(D1(&::tanh))},  {"erf", reinterpret_cast<void*>(D1(&::erf))},
      {"sin", reinterpret_cast<void*>(D1(&::sin))},    {"cos", reinterpret_cast<void*>(D1(&::cos))},
      {"tan", reinterpret_cast<void*>(D1(&::tan))},    {"atan", reinterpret_cast<void*>(D1(&::atan))},
      {"pow", reinterpret_cast<void*>(D2(&::pow))},    {"fmod", reinterpret_cast<void*>(D2(&::fmod))},
      {"fmodf", reinterpret_cast<void*>(F2(&::fmodf))}, {"expm1", reinterpret_cast<void*>(D1(&::expm1))},
      {"sinh", reinterpret_cast<void*>(D1(&::sinh))},  {"cosh", reinterpret_cast<void*>(D1(&::cosh))},
      {"asin", reinterpret_cast<void*>(D1(&::asin))},  {"acos", reinterpret_cast<void*>(D1(&::acos))},
      {"asinh", reinterpret_cast<void*>(D1(&::asinh))}, {"acosh", reinterpret_cast<void*>(D1(&::acosh))},
      {"atanh", reinterpret_cast<void*>(D1(&::atanh))},
  };
  llvm::orc::SymbolMap map;
  for (const auto& [name, addr] : fns)
    map[jit.mangleAndIntern(name)] = llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(addr),
                                                              llvm::JITSymbolFlags::Exported);
  return map;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Which build of Cuvil emits the code: the path, size and modification time of the library holding this
// function, so that a rebuilt emitter never reuses objects an older build cached under the same version.
std::string build_identity() {
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void*>(&library_marker), &info) || !info.dli_fname) return "unknown";
  struct stat st {};
  if (::stat(info.dli_fname, &st) != 0) return info.dli_fname;
  return std::string(info.dli_fname) + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec);
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("CUVIL_CACHE_DIR")) return std::string(d) == "off" ? "" : d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cuvil";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/cuvil";
  return "";
}

// The most the disk cache may hold, in bytes: CUVIL_CACHE_MAX_MB (default 512; fractions allowed). Past it, the
// entries used least recently are removed until it holds three quarters of that. A value that is not a
// non-negative number is an error (raised when the JIT starts: at the first generated kernel), not a silently
// disabled cache; an empty value means the default.
uint64_t cache_budget() {
  const char* e = std::getenv("CUVIL_CACHE_MAX_MB");
  if (!e || !*e) return uint64_t(512) << 20;
  std::string v(e);
  double mb = -1;
  auto r = std::from_chars(v.data(), v.data() + v.size(), mb, std::chars_format::fixed);
  CUVIL_CHECK(r.ec == std::errc() && r.ptr == v.data() + v.size() && std::isfinite(mb) && mb >= 0 && mb <= 1e12,
              "CUVIL_CACHE_MAX_MB='", v, "' is not a size in megabytes (a non-negative number such as 512 or 0.5)");
  return uint64_t(mb * 1024 * 1024);
}

// Nanoseconds since the epoch of a file time.
int64_t ns_of(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

class Jit {
 public:
  Jit() : budget_(cache_budget()) {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    // The small code model, position independent: a kernel reaches its constants RIP-relative. (A JIT target
    // machine defaults to the large model, which loads every constant's 64-bit address into a register first:
    // 30 movabsq in erf's loop.) JITLink places an object's sections in one allocation, so they are in reach.
    jtmb.setCodeModel(llvm::CodeModel::Small);
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    tm_ = unwrap(jtmb.createTargetMachine(), "creating the target machine");
    jit_ = unwrap(llvm::orc::LLJITBuilder()
                      .setJITTargetMachineBuilder(jtmb)
                      .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession& es, const llvm::Triple&) {
                        return std::make_unique<llvm::orc::ObjectLinkingLayer>(es);
                      })
                      .create(),
                  "creating the JIT");
    if (auto err = jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(math_functions(*jit_))))
      fail("code generation failed (defining the math functions): ", llvm::toString(std::move(err)));
    host_ = tm_->getTargetCPU().str() + " " + tm_->getTargetFeatureString().str();
    build_ = build_identity();
    dir_ = default_cache_dir();
  }

  GeneratedFn get(const Kernel& k, const Schedule& s) {
    std::string key = k.str() + "schedule " + s.str() + "\nhost " + host_ + "\nllvm " LLVM_VERSION_STRING
                      "\ncuvil " CUVIL_VERSION "\nbuild " + build_ + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = loaded_.find(key); it != loaded_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
    uint64_t h = fnv1a64(key.data(), key.size());
    std::string symbol = "cuvil_kernel_" + hex64(h);
    bool disk = open_cache();
    std::string name = hex64(h) + ".cuvk";  // in the cache directory (dir_fd_)
    std::string object;
    if (disk && read_entry(name, key, object)) {
      ++stats_.disk_hits;
    } else {
      auto t0 = std::chrono::steady_clock::now();
      object = compile(k, s, symbol, /*assembly=*/false);
      stats_.compile_ms += ms_since(t0);
      ++stats_.compiled;
      if (disk) write_entry(name, key, object);
    }
    GeneratedFn fn = load(object, symbol);
    loaded_.emplace(std::move(key), fn);
    if (perf_map_enabled()) {
      // The name profiles give the kernel ("jit:<ops>:<8 hex digits>", codegen/generated_kernel.cpp), less the ops.
      char tag[16];
      std::snprintf(tag, sizeof tag, "%08llx", static_cast<unsigned long long>(k.hash() >> 32));
      perf_map_announce(reinterpret_cast<const void*>(fn), symbol_size(object, symbol), std::string("cuvil jit:") + tag);
    }
    return fn;
  }

  std::string assembly(const Kernel& k, const Schedule& s) {
    std::lock_guard<std::mutex> lock(mu_);
    return compile(k, s, "cuvil_kernel", /*assembly=*/true);
  }
  std::string object(const Kernel& k, const Schedule& s, const std::string& symbol) {
    std::lock_guard<std::mutex> lock(mu_);
    return compile(k, s, symbol, /*assembly=*/false);
  }

  JitStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::string dir() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_cache() ? dir_ : "";
  }
  const std::string& host() const { return host_; }
  void reset(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_.clear();
    stats_ = {};
    budget_ = cache_budget();
    dir_ = dir.empty() ? default_cache_dir() : dir;
    close_cache();
    cache_bytes_ = -1;
  }

 private:
  static double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  // Emission, the O2 pipeline (the loops are already vectorized by hand) and code generation to an object file
  // (or assembly text).
  std::string compile(const Kernel& k, const Schedule& s, const std::string& symbol, bool assembly) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = emit_kernel(ctx, *tm_, k, s, symbol);
    {
      llvm::LoopAnalysisManager lam;
      llvm::FunctionAnalysisManager fam;
      llvm::CGSCCAnalysisManager cgam;
      llvm::ModuleAnalysisManager mam;
      llvm::PassBuilder pb(tm_.get());
      pb.registerModuleAnalyses(mam);
      pb.registerCGSCCAnalyses(cgam);
      pb.registerFunctionAnalyses(fam);
      pb.registerLoopAnalyses(lam);
      pb.crossRegisterProxies(lam, fam, cgam, mam);
      llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
      mpm.run(*m, mam);
    }
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    auto kind = assembly ? llvm::CGFT_AssemblyFile : llvm::CGFT_ObjectFile;
    CUVIL_CHECK(!tm_->addPassesToEmitFile(pm, os, nullptr, kind), "code generation failed: the target cannot emit ",
                assembly ? "assembly" : "objects");
    pm.run(*m);
    return std::string(buf.data(), buf.size());
  }

  // The size of `symbol`'s code in the object (its ELF symbol's size), 0 when not found.
  static size_t symbol_size(const std::string& object, const std::string& symbol) {
    auto obj = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, symbol));
    if (!obj) {
      llvm::consumeError(obj.takeError());
      return 0;
    }
    auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(obj->get());
    if (!elf) return 0;
    for (const llvm::object::ELFSymbolRef& sym : elf->symbols()) {
      auto name = sym.getName();
      if (!name) {
        llvm::consumeError(name.takeError());
        continue;
      }
      // (the object's FILE symbol has the same name and no size)
      if (*name == symbol && sym.getELFType() == llvm::ELF::STT_FUNC) return size_t(sym.getSize());
    }
    return 0;
  }

  // Each object goes into a JITDylib of its own, so a kernel dropped from the memory map can be loaded again.
  GeneratedFn load(const std::string& object, const std::string& symbol) {
    auto t0 = std::chrono::steady_clock::now();
    auto jd_or = jit_->createJITDylib("k" + std::to_string(dylibs_++));
    if (!jd_or) fail("code generation failed (creating a JIT library): ", llvm::toString(jd_or.takeError()));
    llvm::orc::JITDylib& jd = *jd_or;
    jd.addToLinkOrder(jit_->getMainJITDylib());
    auto buf = llvm::MemoryBuffer::getMemBufferCopy(object, symbol);
    if (auto err = jit_->addObjectFile(jd, std::move(buf)))
      fail("code generation failed (loading an object): ", llvm::toString(std::move(err)));
    auto addr = unwrap(jit_->lookup(jd, symbol), "finding the kernel");
    stats_.load_ms += ms_since(t0);
    return addr.toPtr<GeneratedFn>();
  }

  // ---- the disk cache
  //
  // Trust: an entry is native code that runs in this process, so only a directory that no one else can write is
  // used: owned by this user (the effective uid) and not writable by its group or others, checked on the open
  // directory when first needed (if the last path component is a symbolic link, the link must be this user's
  // too). Otherwise the disk cache is off for this process, with one warning on stderr, and kernels are compiled
  // in memory. Every access then goes through that directory's descriptor (openat, renameat, unlinkat), so a
  // path renamed or replaced later does not redirect it; entries are opened without following symbolic links
  // and must be regular files of this user; new entries are created 0600 with O_EXCL under an unpredictable
  // temporary name and renamed into place. The SHA-256 in each entry detects corruption and a tampered entry —
  // together with the ownership rule only: whoever can write the directory can also recompute the hash, and the
  // ownership rule is what keeps everyone else out.

  // Opens (creating it 0700 if missing) and checks the cache directory on first use; false: no disk cache.
  bool open_cache() {
    if (cache_state_ == CacheState::usable) return true;
    if (cache_state_ == CacheState::off) return false;
    cache_state_ = CacheState::off;
    std::string d = dir_;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (d.empty()) return false;
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(d).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return false;  // cannot be made: simply no disk cache
    struct stat lst {};
    if (::lstat(d.c_str(), &lst) != 0) return false;
    uid_t me = ::geteuid();
    if (S_ISLNK(lst.st_mode) && lst.st_uid != me)
      return refuse_cache("is a symbolic link owned by uid " + std::to_string(lst.st_uid) + ", not by this user");
    int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return refuse_cache(std::string("cannot be opened as a directory: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return refuse_cache(std::string("cannot be examined: ") + std::strerror(errno));
    }
    if (st.st_uid != me) {
      ::close(fd);
      return refuse_cache("is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
                          std::to_string(me) + ")");
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
      ::close(fd);
      return refuse_cache(std::string("is writable by its group or others (mode ") + mode + "; chmod go-w fixes it)");
    }
    dir_fd_ = fd;
    cache_state_ = CacheState::usable;
    return true;
  }
  bool refuse_cache(const std::string& why) {
    std::cerr << escape_for_message("cuvil: warning: the kernel cache directory '" + dir_ + "' " + why +
                                    "; generated kernels are not cached on disk")
              << std::endl;
    ++stats_.refused_cache_dirs;
    return false;
  }
  void close_cache() {
    if (dir_fd_ >= 0) ::close(dir_fd_);
    dir_fd_ = -1;
    cache_state_ = CacheState::unopened;
  }

  // Entry layout: magic, u64 key size, key, u64 object size, SHA-256 of everything before it and of the object,
  // object.
  bool read_entry(const std::string& name, const std::string& key, std::string& object) {
    std::string data;
    try {
      OpenOptions o;
      o.follow_symlinks = false;
      o.dir_fd = dir_fd_;
      std::optional<RegularFile> f = RegularFile::open_if_exists(name, "kernel cache entry", o);
      if (!f) return false;  // a plain miss
      const struct stat& st = f->stat();
      if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        ++stats_.rejected_entries;  // not this user's own entry: never run
        return false;
      }
      data = f->read_all(kMaxEntryBytes);
      if (!parse_entry(data, key, object)) {
        ++stats_.rejected_entries;
        return false;
      }
      ::futimens(f->fd(), nullptr);  // used now: the last to be evicted (best effort)
      return true;
    } catch (const Error&) {  // a symbolic link, a FIFO, a directory, too large, unreadable
      ++stats_.rejected_entries;
      return false;
    }
  }
  static bool parse_entry(const std::string& d, const std::string& key, std::string& object) {
    size_t at = 0;
    auto take = [&](void* out, size_t n) {
      if (d.size() - at < n) return false;
      std::memcpy(out, d.data() + at, n);
      at += n;
      return true;
    };
    char magic[8];
    uint64_t key_size = 0, obj_size = 0;
    uint8_t digest[kDigestBytes];
    if (!take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !take(&key_size, 8)) return false;
    if (key_size != key.size() || d.size() - at < key_size || d.compare(at, key_size, key) != 0) return false;
    at += key_size;
    if (!take(&obj_size, 8)) return false;
    size_t hashed = at;
    if (!take(digest, kDigestBytes) || d.size() - at != obj_size) return false;
    Sha256::Digest want = Sha256().update(d.data(), hashed).update(d.data() + at, obj_size).finish();
    if (std::memcmp(want.data(), digest, kDigestBytes) != 0) return false;
    object.assign(d.data() + at, obj_size);
    return true;
  }
  static std::string serialize_entry(const std::string& key, const std::string& object) {
    uint64_t ks = key.size(), os = object.size();
    std::string d(kMagic, 8);
    d.append(reinterpret_cast<const char*>(&ks), 8);
    d += key;
    d.append(reinterpret_cast<const char*>(&os), 8);
    Sha256::Digest sum = Sha256().update(d).update(object).finish();
    d.append(reinterpret_cast<const char*>(sum.data()), sum.size());
    d += object;
    return d;
  }
  // Written to a fresh temporary file (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600, a random name) and renamed, so
  // a reader never sees half an entry and nothing planted at a temporary name is written through. Failure to
  // write is not an error: the kernel is simply not cached.
  void write_entry(const std::string& name, const std::string& key, const std::string& object) {
    std::string data = serialize_entry(key, object);
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      tmp = name + ".tmp" + std::to_string(::getpid()) + "_" + hex64(rng_());
      fd = ::openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0 && errno != EEXIST) return;
    }
    if (fd < 0) return;
    bool ok = ::fchmod(fd, 0600) == 0;  // exactly 0600, whatever the umask
    for (size_t at = 0; ok && at < data.size();) {
      ssize_t n = ::write(fd, data.data() + at, data.size() - at);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) at += size_t(n);
    }
    ok = ::close(fd) == 0 && ok;
    if (!ok || ::renameat(dir_fd_, tmp.c_str(), dir_fd_, name.c_str()) != 0) {
      ::unlinkat(dir_fd_, tmp.c_str(), 0);
      return;
    }
    // The directory is listed once per process (its first write) and then followed by what this process adds;
    // only when that passes the budget is it listed again to evict.
    if (cache_bytes_ < 0) cache_bytes_ = int64_t(evict(/*remove=*/false));
    else cache_bytes_ += int64_t(data.size());
    if (uint64_t(cache_bytes_) > budget_) cache_bytes_ = int64_t(evict(/*remove=*/true));
  }

  // The bytes of the directory's entries; with `remove`, past budget_, entries (and temporary files a crashed
  // writer left, after an hour) go least recently used first (a hit refreshes an entry's time) until three
  // quarters of the budget remain, and the bytes left are returned. Only regular files are counted or removed.
  // Other processes may evict at the same time; whatever fails to go is left.
  uint64_t evict(bool remove) {
    struct Entry {
      int64_t used;
      uint64_t bytes;
      std::string name;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    struct timespec now_ts {};
    ::clock_gettime(CLOCK_REALTIME, &now_ts);
    int64_t now = ns_of(now_ts);
    int dfd = ::dup(dir_fd_);
    if (dfd < 0) return 0;
    DIR* dir = ::fdopendir(dfd);
    if (!dir) {
      ::close(dfd);
      return 0;
    }
    ::rewinddir(dir);
    while (struct dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      bool entry = name.ends_with(".cuvk"), stale_tmp = name.find(".cuvk.tmp") != std::string::npos;
      if (!entry && !stale_tmp) continue;
      struct stat st {};
      if (::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      int64_t used = ns_of(st.st_mtim);
      if (stale_tmp) {
        if (remove && now - used > int64_t(3600) * 1000000000) ::unlinkat(dir_fd_, name.c_str(), 0);
        continue;
      }
      entries.push_back({used, uint64_t(st.st_size), name});
      total += uint64_t(st.st_size);
    }
    ::closedir(dir);
    if (!remove || total <= budget_) return total;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    for (const Entry& e : entries) {
      if (total <= budget_ / 4 * 3) break;
      if (::unlinkat(dir_fd_, e.name.c_str(), 0) == 0) {
        total -= e.bytes;
        ++stats_.evicted_entries;
      }
    }
    return total;
  }

  std::mutex mu_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::string host_;
  std::string build_;
  std::string dir_;
  enum class CacheState { unopened, usable, off } cache_state_ = CacheState::unopened;
  int dir_fd_ = -1;  // the checked cache directory, while usable
  std::mt19937_64 rng_{std::random_device{}()};  // temporary file names
  uint64_t budget_ = 0;
  int64_t cache_bytes_ = -1;  // the directory's entries as this process knows them; -1: not listed yet
  std::unordered_map<std::string, GeneratedFn> loaded_;
  JitStats stats_;
  int64_t dylibs_ = 0;
};

Jit& jit() {
  static Jit* j = new Jit();  // never destroyed: kernels may run until the process ends
  return *j;
}

}  // namespace

GeneratedFn jit_kernel(const Kernel& k, const Schedule& s) { return jit().get(k, s); }
JitStats jit_stats() { return jit().stats(); }
std::string jit_cache_dir() { return jit().dir(); }
std::string jit_host_description() { return jit().host(); }
std::string kernel_assembly(const Kernel& k, const Schedule& s) { return jit().assembly(k, s); }
std::string kernel_object(const Kernel& k, const Schedule& s, const std::string& symbol) {
  return jit().object(k, s, symbol);
}
void jit_reset_for_testing(const std::string& cache_dir) { jit().reset(cache_dir); }

namespace {

// The JIT as the process's compiler (kernel_code.h): installed while this library loads, so a process that holds
// the compiler library compiles the kernels an artifact lacks; the runtime library alone never does.
class JitSource final : public KernelCodeSource {
 public:
  GeneratedFn find(const Kernel& k, const Schedule& s) override { return jit_kernel(k, s); }
};

[[maybe_unused]] const bool g_jit_installed = [] {
  static JitSource source;
  set_process_compiler(&source);
  return true;
}();

}  // namespace

}  // namespace cuvil::codegen
