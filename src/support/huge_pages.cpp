#include "support/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace cuvil {

void* aligned_alloc_huge(size_t bytes, size_t huge_from) {
  size_t align = bytes >= huge_from ? kHugePage : 64;
  size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without huge pages, plain memory
  return p;
}

}  // namespace cuvil
