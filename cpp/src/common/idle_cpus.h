// How much of the CPUs this process may run on lay idle: the signal that lets a pool's governor
// (common/contention.h) try a left-out thread again as soon as another process stops competing,
// instead of at its next timed probe, which after a long contention is up to 16 s away.
//
// Linux counts each CPU's idle time in /proc/stat (the "cpuN" lines' idle and iowait columns, in
// USER_HZ ticks). sample() returns the idle CPU-equivalents of the allowed CPUs since the
// previous sample: 1.0 is one CPU idle the whole time. Ticks are 10 ms, so a sample over 0.1 s
// is good to about 0.1 CPU per CPU. Elsewhere, or where the file does not read, -1 (unknown).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qd {

class IdleCpus {
 public:
  // cpus: the CPU numbers to watch (a process's affinity mask); stat: the file to read.
  explicit IdleCpus(std::vector<int> cpus, std::string stat = "/proc/stat");

  // Idle CPU-equivalents over the `seconds` since the previous call; -1 on the first call, after
  // a failed read, or when seconds <= 0.
  double sample(double seconds);
  void reset() { last_.clear(); }  // the next sample() starts a new interval (and returns -1)

  // The CPUs of this process's affinity mask (empty where unknown).
  static std::vector<int> allowed_cpus();

 private:
  bool read(std::vector<uint64_t>& ticks) const;  // idle + iowait ticks of each watched CPU

  std::vector<int> cpus_;
  std::string stat_;
  std::vector<uint64_t> last_;
  double ticks_per_second_;
};

}  // namespace qd
