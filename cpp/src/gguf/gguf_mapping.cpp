#include "gguf/gguf_mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#if defined(__SANITIZE_ADDRESS__)
#define QD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QD_ASAN 1
#endif
#endif
#ifdef QD_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace qd::gguf {

namespace {
uint64_t page_round(uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// The weights are read soon after the file is opened: start reading them into the page cache
// now, so that the first forward passes find them there. Advice only: failure changes nothing.
void advise_will_need(void* m, uint64_t size) { ::madvise(m, size, MADV_WILLNEED); }
}  // namespace

#ifdef QD_ASAN
// AddressSanitizer does not watch mapped files, so a read a few bytes past the end would land in
// the zero-filled rest of the last page unseen. Sanitizer builds poison that rest and keep an
// inaccessible guard page after it, so every over-read of the file is reported.

void* map_file(int fd, uint64_t size) {
  const uint64_t span = page_round(size) + page_round(1);
  void* region = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return nullptr;
  void* m = ::mmap(region, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (m == MAP_FAILED) {
    const int err = errno;
    ::munmap(region, span);
    errno = err;
    return nullptr;
  }
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(m) + size, page_round(size) - size);
  advise_will_need(m, size);
  return m;
}
void unmap_file(const uint8_t* base, uint64_t size) {
  ASAN_UNPOISON_MEMORY_REGION(base + size, page_round(size) - size);
  ::munmap(const_cast<uint8_t*>(base), page_round(size) + page_round(1));
}
#else
void* map_file(int fd, uint64_t size) {
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) return nullptr;
  advise_will_need(m, size);
  return m;
}
void unmap_file(const uint8_t* base, uint64_t size) { ::munmap(const_cast<uint8_t*>(base), size); }
#endif

// Anonymous pages followed by an inaccessible guard page, as the sanitizer build maps files.
void* read_file(int fd, uint64_t size) {
  const uint64_t span = page_round(size) + page_round(1);
  void* region = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return nullptr;
  uint8_t* p = static_cast<uint8_t*>(region);
  for (uint64_t done = 0; done < size;) {
    const uint64_t chunk = size - done < ((uint64_t)1 << 30) ? size - done : ((uint64_t)1 << 30);
    const ssize_t n = ::pread(fd, p + done, chunk, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::munmap(region, span);
      errno = err;
      return nullptr;
    }
    done += (uint64_t)n;
  }
  ::mprotect(region, page_round(size), PROT_READ);
  ::mprotect(p + page_round(size), page_round(1), PROT_NONE);
#ifdef QD_ASAN
  ASAN_POISON_MEMORY_REGION(p + size, page_round(size) - size);
#endif
  return region;
}

void free_file(const uint8_t* base, uint64_t size) {
#ifdef QD_ASAN
  ASAN_UNPOISON_MEMORY_REGION(base + size, page_round(size) - size);
#endif
  ::munmap(const_cast<uint8_t*>(base), page_round(size) + page_round(1));
}

}  // namespace qd::gguf
