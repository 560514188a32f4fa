// How fast this machine's cores read memory: the ceiling that a decode, which streams every weight
// once per token, is measured against (bench/compare.py reports the 1.5B's decode as a share of it).
//
// A pool of the engine's own kind streams one buffer allocated as a model's weights are
// (cpu::rows8_alloc: 2 MiB-aligned, on transparent huge pages), 16 stretches per thread taken in
// turn, summing 16-byte words. numpy's reduction, the earlier probe, read 35 GB/s on a Zen 4 VM where
// the 1.5B's decode then streamed 55 GB/s of weights: a ceiling below what a decode reaches judges
// nothing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qd::cpu {

struct ReadRate {
  double best_gbps = 0;    // bytes / the fastest pass's wall time, 1e9 bytes a GB
  double median_gbps = 0;  // the median pass
  uint64_t checksum = 0;   // wrapping sum of the buffer's 64-bit words: word i holds i * kReadRateWord
  size_t bytes = 0;        // read per pass: `bytes` rounded down to whole 4 KiB pages
  int threads = 0;
};

constexpr uint64_t kReadRateWord = 0x9E3779B97F4A7C15ull;

// `passes` timed reads of a `bytes` buffer by `threads` threads (0: ThreadPool::default_threads()),
// after one untimed pass that writes it. ArgError for bytes under 1 MiB or over half the machine's
// memory (a buffer the system would overcommit and then kill the process while filling), passes
// outside [1, 1000] or threads outside the pool's range; std::bad_alloc when the buffer cannot be had.
ReadRate measure_read_rate(size_t bytes, int threads, int passes);

}  // namespace qd::cpu
