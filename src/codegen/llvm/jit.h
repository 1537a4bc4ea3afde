// Compiles kernels to machine code for the host CPU with LLVM's ORC LLJIT, once per process and kernel, with an
// on-disk object cache so that a later process skips optimization and code generation.
//
// Cache entries live in $CUVIL_CACHE_DIR, else $XDG_CACHE_HOME/cuvil, else ~/.cache/cuvil (CUVIL_CACHE_DIR=off
// disables the disk cache). An entry is keyed by the kernel's text, the schedule, the host CPU name and features,
// the LLVM version, Cuvil's version and the build (the library file's path, size and time); its file repeats the
// whole key and a SHA-256 of the entry, so a stale, truncated or corrupt entry is detected, counted, and rebuilt
// (never run). The directory is used only if this user owns it and no one else can write it (else a warning and
// no disk cache); see docs/SECURITY.md. CUVIL_CACHE_MAX_MB (default 512) bounds it; a malformed value is an
// error.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/llvm/emit.h"

namespace cuvil::codegen {

struct JitStats {
  int64_t compiled = 0;        // kernels optimized and code-generated in this process
  int64_t disk_hits = 0;       // kernels loaded from the disk cache
  int64_t memory_hits = 0;     // requests served by an already loaded kernel
  int64_t rejected_entries = 0;  // disk entries found stale or corrupt (then rebuilt)
  int64_t evicted_entries = 0;   // disk entries removed to keep the cache within CUVIL_CACHE_MAX_MB
  int64_t refused_cache_dirs = 0;  // cache directories not used: owned by another user or writable by others
  double compile_ms = 0;       // time in emission + optimization + code generation
  double load_ms = 0;          // time linking objects into the process (cache hits and fresh ones)
};

// The compiled function for `k` under `s`; thread-safe. Throws cuvil::Error when LLVM fails.
GeneratedFn jit_kernel(const Kernel& k, const Schedule& s);

JitStats jit_stats();
// The directory of the disk cache, or "" when it is off.
std::string jit_cache_dir();
// The host CPU and features, as the cache key holds them ("sapphirerapids +avx512f,...").
std::string jit_host_description();
// The object file LLVM generates for `k` under `s`, its function named `symbol` (for artifacts; not cached).
std::string kernel_object(const Kernel& k, const Schedule& s, const std::string& symbol);
// The assembly LLVM generates for `k` under `s` (for tests and `cuvil inspect --asm`); not cached.
std::string kernel_assembly(const Kernel& k, const Schedule& s);

// For tests: forgets the in-memory kernels (the code stays mapped) so the next request goes to the disk cache,
// and sets the directory (""; restores the default).
void jit_reset_for_testing(const std::string& cache_dir);

}  // namespace cuvil::codegen
