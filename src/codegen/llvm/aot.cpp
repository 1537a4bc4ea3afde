#include "codegen/llvm/aot.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <lld/Common/CommonLinkerContext.h>
#include <lld/Common/Driver.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/raw_ostream.h>

#include "artifact/kernel_library.h"
#include "codegen/llvm/jit.h"
#include "support/error.h"

namespace cuvil::codegen {

const char* llvm_version() { return LLVM_VERSION_STRING; }

namespace {

// The objects made in this process, by kernel, schedule and symbol (the host does not change): a model saved
// again, e.g. the model cache storing a weights-only change (python/cuvil/cache.py), links the same machine
// code without running LLVM again. Bounded: past 64 MiB, new objects are not kept.
std::string object_of(const Kernel& k, const Schedule& s, const std::string& symbol) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::string> made;
  static size_t bytes = 0;
  std::string key = k.str() + "\nschedule " + s.str() + "\nsymbol " + symbol;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = made.find(key); it != made.end()) return it->second;
  }
  std::string obj = kernel_object(k, s, symbol);
  std::lock_guard<std::mutex> lock(mu);
  if (bytes + obj.size() <= (size_t(64) << 20) && made.emplace(key, obj).second) bytes += obj.size();
  return obj;
}

}  // namespace

LinkedKernels link_kernels(const std::vector<std::pair<Kernel, Schedule>>& kernels,
                           const std::vector<std::string>& keys) {
  CUVIL_CHECK(kernels.size() == keys.size(), "internal error: link_kernels: one key per kernel");
  LinkedKernels out;
  if (kernels.empty()) return out;
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "cuvil-aot-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw Error("cannot make a temporary directory for linking kernels");
  fs::path dir = tmpl;
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  std::vector<std::string> objects;
  for (size_t i = 0; i < kernels.size(); ++i) {
    char sym[40];
    std::snprintf(sym, sizeof sym, "cuvil_aot_%zu_%016llx", i,
                  static_cast<unsigned long long>(kernels[i].first.hash()));
    std::string obj = object_of(kernels[i].first, kernels[i].second, sym);
    objects.push_back((dir / (std::to_string(i) + ".o")).string());
    std::ofstream(objects.back(), std::ios::binary).write(obj.data(), std::streamsize(obj.size()));
    out.symbols.emplace_back(sym, keys[i]);
  }
  std::string so = (dir / "kernels.so").string();
  // Undefined symbols (the C library's math functions) stay undefined: the loading process resolves them.
  std::vector<const char*> args = {"ld.lld", "-shared", "--hash-style=gnu", "-z", "noexecstack", "-z", "now",
                                   "-o", so.c_str()};
  for (const std::string& o : objects) args.push_back(o.c_str());
  std::string diag;
  bool ok;
  {
    static std::mutex mu;  // lld's driver keeps global state
    std::lock_guard<std::mutex> lock(mu);
    llvm::raw_string_ostream os(diag);
    ok = lld::elf::link(args, os, os, /*exitEarly=*/false, /*disableOutput=*/false);
    lld::CommonLinkerContext::destroy();
  }
  if (!ok) throw Error("linking the generated kernels failed: " + diag);
  std::ifstream in(so, std::ios::binary);
  out.shared_object.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (out.shared_object.empty()) throw Error("linking the generated kernels produced nothing");
  return out;
}

void add_compiled_kernels(const std::shared_ptr<const Graph>& g, artifact::SaveInput& in) {
  artifact::KernelList ks = artifact::kernels_of(g);
  if (ks.empty()) return;
  std::vector<std::string> keys;
  for (auto& [k, s] : ks) keys.push_back(artifact::kernel_key(k, s));
  LinkedKernels lk = link_kernels(ks, keys);
  in.kernels_so = std::move(lk.shared_object);
  in.kernel_index = artifact::kernel_index(lk.symbols);
  in.kernel_features = artifact::required_features(jit_host_description());
  in.llvm_version = llvm_version();
}

}  // namespace cuvil::codegen
