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

}  // namespace qd
