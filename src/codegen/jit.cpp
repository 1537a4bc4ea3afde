#include "codegen/jit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include "support/error.h"

#ifndef CUVIL_VERSION
#define CUVIL_VERSION "dev"
#endif

namespace cuvil::codegen {

namespace {

constexpr char kMagic[8] = {'C', 'U', 'V', 'I', 'L', 'K', '0', '1'};

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

// The most the disk cache may hold, in bytes: CUVIL_CACHE_MAX_MB (default 512). Past it, the entries used
// least recently are removed until it holds three quarters of that.
uint64_t cache_budget() {
  const char* e = std::getenv("CUVIL_CACHE_MAX_MB");
  double mb = e ? std::atof(e) : 512.0;
  return uint64_t(std::max(mb, 0.0) * 1024 * 1024);
}

class Jit {
 public:
  Jit() {
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
    budget_ = cache_budget();
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
    std::string path = dir_.empty() ? "" : dir_ + "/" + hex64(h) + ".cuvk";
    std::string object;
    if (!path.empty() && read_entry(path, key, object)) {
      ++stats_.disk_hits;
      std::error_code ec;  // used now: the last to be evicted (best effort; a read-only cache stays as it is)
      std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
    } else {
      auto t0 = std::chrono::steady_clock::now();
      object = compile(k, s, symbol, /*assembly=*/false);
      stats_.compile_ms += ms_since(t0);
      ++stats_.compiled;
      if (!path.empty()) write_entry(path, key, object);
    }
    GeneratedFn fn = load(object, symbol);
    loaded_.emplace(std::move(key), fn);
    return fn;
  }

  std::string assembly(const Kernel& k, const Schedule& s) {
    std::lock_guard<std::mutex> lock(mu_);
    return compile(k, s, "cuvil_kernel", /*assembly=*/true);
  }

  JitStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::string dir() {
    std::lock_guard<std::mutex> lock(mu_);
    return dir_;
  }
  const std::string& host() const { return host_; }
  void reset(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_.clear();
    stats_ = {};
    dir_ = dir.empty() ? default_cache_dir() : dir;
    budget_ = cache_budget();
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

  // Entry layout: magic, u64 key size, key, u64 object size, u64 FNV-1a of the object, object.
  bool read_entry(const std::string& path, const std::string& key, std::string& object) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return false;  // a plain miss
    std::streamoff size = f.tellg();
    f.seekg(0);
    std::string data(size_t(std::max<std::streamoff>(size, 0)), '\0');
    f.read(data.data(), std::streamsize(data.size()));
    bool ok = bool(f) && parse_entry(data, key, object);
    if (!ok) ++stats_.rejected_entries;
    return ok;
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
    uint64_t key_size = 0, obj_size = 0, sum = 0;
    if (!take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !take(&key_size, 8)) return false;
    if (key_size != key.size() || d.size() - at < key_size || d.compare(at, key_size, key) != 0) return false;
    at += key_size;
    if (!take(&obj_size, 8) || !take(&sum, 8) || d.size() - at != obj_size) return false;
    if (fnv1a64(d.data() + at, obj_size) != sum) return false;
    object.assign(d.data() + at, obj_size);
    return true;
  }
  // Written to a temporary file and renamed, so a reader never sees half an entry. Failure to write is not an
  // error: the kernel is simply not cached.
  void write_entry(const std::string& path, const std::string& key, const std::string& object) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(dylibs_);
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      if (!f) return;
      uint64_t ks = key.size(), os = object.size(), sum = fnv1a64(object.data(), object.size());
      f.write(kMagic, 8);
      f.write(reinterpret_cast<const char*>(&ks), 8);
      f.write(key.data(), std::streamsize(key.size()));
      f.write(reinterpret_cast<const char*>(&os), 8);
      f.write(reinterpret_cast<const char*>(&sum), 8);
      f.write(object.data(), std::streamsize(object.size()));
      if (!f) {
        f.close();
        std::filesystem::remove(tmp, ec);
        return;
      }
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      return;
    }
    // The directory is listed once per process (its first write) and then followed by what this process adds;
    // only when that passes the budget is it listed again to evict.
    if (cache_bytes_ < 0) cache_bytes_ = int64_t(evict(/*remove=*/false));
    else cache_bytes_ += int64_t(object.size() + key.size() + 32);
    if (uint64_t(cache_bytes_) > budget_) cache_bytes_ = int64_t(evict(/*remove=*/true));
  }

  // The bytes of the directory's entries; with `remove`, past budget_, entries (and temporary files a crashed
  // writer left, after an hour) go least recently used first (a hit refreshes an entry's time) until three
  // quarters of the budget remain, and the bytes left are returned. Other processes may evict at the same time;
  // whatever fails to go is left.
  uint64_t evict(bool remove) {
    namespace fs = std::filesystem;
    std::error_code ec;
    struct Entry {
      fs::file_time_type used;
      uint64_t bytes;
      fs::path path;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    auto now = fs::file_time_type::clock::now();
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      bool entry = name.ends_with(".cuvk"), stale_tmp = name.find(".cuvk.tmp") != std::string::npos;
      if (!entry && !stale_tmp) continue;
      std::error_code e2;
      uint64_t bytes = it->file_size(e2);
      fs::file_time_type used = it->last_write_time(e2);
      if (e2) continue;
      if (stale_tmp) {
        if (remove && now - used > std::chrono::hours(1)) fs::remove(it->path(), e2);
        continue;
      }
      entries.push_back({used, bytes, it->path()});
      total += bytes;
    }
    if (!remove || total <= budget_) return total;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    for (const Entry& e : entries) {
      if (total <= budget_ / 4 * 3) break;
      std::error_code e2;
      if (fs::remove(e.path, e2)) {
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
void jit_reset_for_testing(const std::string& cache_dir) { jit().reset(cache_dir); }

}  // namespace cuvil::codegen
