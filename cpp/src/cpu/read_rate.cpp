#include "cpu/read_rate.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "common/thread_pool.h"
#include "cpu/repack.h"

namespace qd::cpu {
namespace {

// Two 64-bit lanes: GCC's generic vectors, one SSE2 register under plain x86-64 and one NEON
// register on aarch64, so this file needs no per-ISA build. (32-byte generic vectors were split
// into halves that went through the stack every iteration.)
typedef uint64_t Words2 __attribute__((vector_size(16)));

// The wrapping sum of n words (n a multiple of 16) from p (16-byte aligned): four independent
// chains of adds, each fed a 16-byte load, 128 bytes an iteration.
uint64_t sum_words(const uint64_t* p, size_t n) {
  const Words2* v = reinterpret_cast<const Words2*>(p);
  Words2 a = {0, 0}, b = a, c = a, d = a;
  for (size_t i = 0; i < n / 2; i += 8) {
    a += v[i] + v[i + 4];
    b += v[i + 1] + v[i + 5];
    c += v[i + 2] + v[i + 6];
    d += v[i + 3] + v[i + 7];
  }
  const Words2 s = (a + b) + (c + d);
  return s[0] + s[1];
}

}  // namespace

ReadRate measure_read_rate(size_t bytes, int threads, int passes) {
  const long phys_pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  const size_t half_memory = phys_pages > 0 && page_size > 0 ? (size_t)phys_pages * (size_t)page_size / 2 : size_t(1) << 30;
  if (bytes < (size_t(1) << 20) || bytes > half_memory) {
    throw ArgError("measure_read_rate: bytes must lie in [1 MiB, half the machine's memory (" +
                   std::to_string(half_memory >> 20) + " MiB)]");
  }
  if (passes < 1 || passes > 1000) throw ArgError("measure_read_rate: passes must lie in [1, 1000]");
  ThreadPool pool(threads);  // ArgError outside [0, kMaxThreads]
  // 16 stretches per thread, taken in turn: a thread that wakes late reads fewer of them instead
  // of leaving its share to the end. Each a whole number of 4 KiB pages (16-word multiples for
  // sum_words).
  const int t = 16 * pool.size();
  constexpr size_t kPage = 4096;
  const size_t pages = bytes / kPage, words = pages * kPage / 8;
  std::vector<size_t> offsets;
  Rows8Buffer buf = rows8_alloc({pages * kPage}, &offsets);
  uint64_t* w = reinterpret_cast<uint64_t*>(buf.get());
  auto stretch = [&](int i, size_t* begin, size_t* end) {
    *begin = pages * (size_t)i / (size_t)t * (kPage / 8);
    *end = pages * (size_t)(i + 1) / (size_t)t * (kPage / 8);
  };
  pool.run(t, [&](int i) {  // written by the threads that read it (first touch places the pages)
    size_t b, e;
    stretch(i, &b, &e);
    for (size_t k = b; k < e; k++) w[k] = (uint64_t)k * kReadRateWord;
  });
  std::vector<uint64_t> sums(t);
  std::vector<double> rates;
  ReadRate r;
  r.bytes = words * 8, r.threads = pool.size();
  for (int pass = 0; pass < passes; pass++) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(t, [&](int i) {
      size_t b, e;
      stretch(i, &b, &e);
      sums[i] = sum_words(w + b, e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back((double)(words * 8) / std::max(s, 1e-9) / 1e9);
    r.checksum = 0;
    for (uint64_t x : sums) r.checksum += x;
  }
  std::sort(rates.begin(), rates.end());
  r.best_gbps = rates.back();
  r.median_gbps = rates[rates.size() / 2];
  return r;
}

}  // namespace qd::cpu
