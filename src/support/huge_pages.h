// Large, long-lived buffers (packed weights, the executor's arena, per-thread blocks) on transparent huge pages
// where the kernel allows them (madvise mode): aligned to 2 MB and advised, so that streaming one walks a TLB
// entry per 2 MB instead of per 4 kB, and writing it fresh faults once per 2 MB (~3 us per fault on these VMs).
#pragma once

#include <cstddef>

namespace cuvil {

inline constexpr size_t kHugePage = size_t(2) << 20;

// At least `bytes` (rounded up to the alignment) from std::aligned_alloc, to be freed with std::free: 2 MB aligned
// and advised for huge pages when `bytes` >= `huge_from`, else 64-byte aligned. Throws std::bad_alloc.
void* aligned_alloc_huge(size_t bytes, size_t huge_from = kHugePage);

}  // namespace cuvil
