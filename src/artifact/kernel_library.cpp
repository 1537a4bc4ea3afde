#include "artifact/kernel_library.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "artifact/cpu_features.h"
#include "runtime/executor.h"
#include "artifact/representative_shapes.h"
#include "support/error.h"
#include "support/perf_map.h"

namespace cuvil::artifact {

namespace {

// Records what it is asked and answers nothing, so the executor goes on to the process's compiler.
class Recorder final : public codegen::KernelCodeSource {
 public:
  codegen::GeneratedFn find(const codegen::Kernel& k, const codegen::Schedule& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key = kernel_key(k, s);
    if (std::find(keys_.begin(), keys_.end(), key) == keys_.end()) {
      keys_.push_back(key);
      list_.emplace_back(k, s);
    }
    return nullptr;
  }
  KernelList list() {
    std::lock_guard<std::mutex> lock(mu_);
    return list_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> keys_;
  KernelList list_;
};

// The artifact's kernels, resolved once at load. The library stays loaded for the process's life (prepared
// kernels may hold its functions past this object; the JIT never unmaps code either).
class Library final : public codegen::KernelCodeSource {
 public:
  codegen::GeneratedFn find(const codegen::Kernel& k, const codegen::Schedule& s) override {
    auto it = fns_.find(kernel_key(k, s));
    return it == fns_.end() ? nullptr : it->second;
  }
  std::unordered_map<std::string, codegen::GeneratedFn> fns_;
};

}  // namespace

std::string kernel_key(const codegen::Kernel& k, const codegen::Schedule& s) {
  return k.str() + "schedule " + s.str() + "\n";
}

namespace {
bool has_fused_kernel(const Graph& g, int depth = 0) {
  for (const auto& n : g.nodes()) {
    if (n->op() == OpKind::FusedKernel) return true;
    if (depth < 64)
      for (Graph* r : n->regions())
        if (has_fused_kernel(*r, depth + 1)) return true;
  }
  return false;
}
}  // namespace

KernelList kernels_of(const std::shared_ptr<const Graph>& g) {
  // Preparing plans every kernel (oneDNN primitives, packed weights): not worth it without generated ones.
  if (!has_fused_kernel(*g)) return {};
  auto rec = std::make_shared<Recorder>();
  ExecutorOptions o;
  o.kernel_code = rec;
  Executor e(g, o);
  prepare_representative_shapes(e, *g);
  return rec->list();
}

std::string kernel_index(const std::vector<std::pair<std::string, std::string>>& symbol_and_key) {
  std::string out;
  for (const auto& [sym, key] : symbol_and_key) out += sym + " " + std::to_string(key.size()) + "\n" + key + "\n";
  return out;
}

std::shared_ptr<codegen::KernelCodeSource> open_kernel_library(std::string_view so, std::string_view index) {
  // The index first: symbol, a space, the key's length, a newline, the key, a newline; nothing else.
  std::vector<std::pair<std::string, std::string>> entries;
  size_t at = 0;
  while (at < index.size()) {
    size_t sp = index.find(' ', at), nl = index.find('\n', at);
    if (sp == std::string_view::npos || nl == std::string_view::npos || sp > nl || sp == at)
      throw Error("kernel index: malformed entry");
    std::string sym(index.substr(at, sp - at));
    if (sym.rfind("cuvil_aot_", 0) != 0 || sym.size() > 64) throw Error("kernel index: bad symbol");
    uint64_t len = 0;
    auto r = std::from_chars(index.data() + sp + 1, index.data() + nl, len);
    if (r.ec != std::errc() || r.ptr != index.data() + nl || len > index.size() - nl - 1 ||
        nl + 1 + len >= index.size() || index[nl + 1 + len] != '\n')
      throw Error("kernel index: bad key length");
    entries.emplace_back(sym, std::string(index.substr(nl + 1, len)));
    at = nl + 1 + len + 1;
  }
  if (so.size() < 4 || std::memcmp(so.data(), "\x7f" "ELF", 4) != 0) throw Error("not a shared object");
  int fd = ::memfd_create("cuvil-kernels", MFD_CLOEXEC);
  if (fd < 0) throw Error(std::string("memfd_create: ") + std::strerror(errno));
  for (size_t done = 0; done < so.size();) {
    ssize_t n = ::write(fd, so.data() + done, so.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw Error(std::string("writing the kernels: ") + std::strerror(errno));
    }
    done += size_t(n);
  }
  // dlopen returns the library already loaded under the same name, and fd numbers are reused: each load gets a
  // name of its own, a counter written as runs of slashes ("/proc/self//.///./fd/N" for 12; the same directory).
  static std::atomic<uint64_t> loads{0};
  std::string path = "/proc/self";
  for (char digit : std::to_string(loads++)) path += std::string(size_t(digit - '0' + 1), '/') + ".";
  path += "/fd/" + std::to_string(fd);
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ::close(fd);
  if (!h) throw Error(std::string("dlopen: ") + ::dlerror());
  auto lib = std::make_shared<Library>();
  for (const auto& [sym, key] : entries) {
    void* f = ::dlsym(h, sym.c_str());
    if (!f) throw Error("kernel " + sym + " missing from the shared object");
    lib->fns_[key] = reinterpret_cast<codegen::GeneratedFn>(f);
    if (perf_map_enabled()) {
      // perf cannot read the in-memory shared object after the process ends; its symbol table can be, here.
      Dl_info info{};
      ElfW(Sym)* entry = nullptr;
      if (::dladdr1(f, &info, reinterpret_cast<void**>(&entry), RTLD_DL_SYMENT) && entry)
        perf_map_announce(f, size_t(entry->st_size), "cuvil " + sym);
    }
  }
  return lib;
}

std::vector<std::string> required_features(const std::string& llvm_features) {
  std::vector<std::string> out = baseline_cpu_features();
  size_t at = 0;
  while (at < llvm_features.size()) {
    size_t end = llvm_features.find_first_of(", ", at);
    if (end == std::string::npos) end = llvm_features.size();
    std::string f = llvm_features.substr(at, end - at);
    if (f.size() > 1 && f[0] == '+' && std::find(out.begin(), out.end(), f.substr(1)) == out.end()) {
      // Only the features this build can test for are listed (the others are what every CPU with these has).
      std::string name = f.substr(1);
      static const char* kTestable[] = {"sse3",   "ssse3",   "sse4.1",   "sse4.2",     "popcnt",     "avx",
                                        "avx2",   "fma",     "bmi",      "bmi2",       "avx512f",    "avx512vl",
                                        "avx512bw", "avx512dq", "avx512cd", "avx512vbmi", "avx512ifma", "avx512vnni",
                                        "avx512bf16"};
      if (std::find(std::begin(kTestable), std::end(kTestable), name) != std::end(kTestable)) out.push_back(name);
    }
    at = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace cuvil::artifact
