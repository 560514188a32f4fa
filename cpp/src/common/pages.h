// Handing memory pages back to the kernel once their bytes have been consumed.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace qd {

// Returns the whole pages inside [p, p + n) to the kernel (madvise MADV_DONTNEED): pages of a
// read-only file mapping are read again from the file if ever touched, anonymous ones come back
// as zeros. Partial pages at either end are kept.
inline void release_pages(const uint8_t* p, size_t n) {
  static const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
  if (b > a) madvise((void*)a, b - a, MADV_DONTNEED);
}

// Asks for transparent huge pages over the 2 MiB-aligned interior of [p, p + n), where the kernel
// gives them only on request (THP "madvise" mode, the common default): a matmul streams weights
// sequentially, and with 4 KiB pages it misses the TLB every 4 KiB. The partial huge pages at
// either end stay small, so no byte outside the buffer is ever backed.
inline void advise_huge_pages(const uint8_t* p, size_t n) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t huge = uintptr_t(2) << 20;
  const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + n) & ~(huge - 1);
  if (b > a) madvise((void*)a, b - a, MADV_HUGEPAGE);
#else
  (void)p, (void)n;
#endif
}

}  // namespace qd
