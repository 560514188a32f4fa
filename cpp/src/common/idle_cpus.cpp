#include "common/idle_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace qd {

IdleCpus::IdleCpus(std::vector<int> cpus, std::string stat)
    : cpus_(std::move(cpus)), stat_(std::move(stat)) {
  const long hz = sysconf(_SC_CLK_TCK);
  ticks_per_second_ = hz > 0 ? (double)hz : 100.0;
}

std::vector<int> IdleCpus::allowed_cpus() {
  std::vector<int> cpus;
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
#endif
  return cpus;
}

bool IdleCpus::read(std::vector<uint64_t>& ticks) const {
  FILE* f = std::fopen(stat_.c_str(), "r");
  if (!f) return false;
  ticks.assign(cpus_.size(), 0);
  size_t found = 0;  // watched CPUs whose line was read (each appears once)
  char line[512];
  // Lines longer than the buffer (the "intr" line) arrive in pieces; only a piece that starts a
  // line can start with "cpu".
  bool line_start = true;
  while (std::fgets(line, sizeof line, f)) {
    const bool starts = line_start;
    line_start = std::strchr(line, '\n') != nullptr;
    int cpu;
    unsigned long long user, nice, system, idle, iowait;
    // "cpuN ..." lines only: not the "cpu  ..." line that sums them all
    if (!starts || std::strncmp(line, "cpu", 3) != 0 || !std::isdigit((unsigned char)line[3]) ||
        std::sscanf(line + 3, "%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle, &iowait) != 6) {
      continue;
    }
    const auto it = std::find(cpus_.begin(), cpus_.end(), cpu);
    if (it == cpus_.end()) continue;
    ticks[(size_t)(it - cpus_.begin())] = idle + iowait;
    found++;
  }
  std::fclose(f);
  return !cpus_.empty() && found == cpus_.size();
}

double IdleCpus::sample(double seconds) {
  std::vector<uint64_t> now;
  if (!read(now)) {
    last_.clear();
    return -1;
  }
  double idle = -1;
  if (last_.size() == now.size() && seconds > 0) {
    uint64_t sum = 0;
    for (size_t i = 0; i < now.size(); i++) sum += now[i] >= last_[i] ? now[i] - last_[i] : 0;
    idle = (double)sum / ticks_per_second_ / seconds;
  }
  last_ = std::move(now);
  return idle;
}

}  // namespace qd
