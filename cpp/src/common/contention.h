// How many of a pool's threads should take part in its parallel regions while other processes
// compete for the same CPUs.
//
// A parallel region ends when its slowest thread does. When another process keeps a CPU busy
// (a build, a browser tab, a second model), the scheduler preempts one of the pool's threads for
// a timeslice of milliseconds, and a region that waits for that thread's unfinished rows waits
// the whole slice. On a 2-core Zen 4 guest with one busy process beside it, the 1.5B decoded at
// 12 tok/s on two threads against 28 on one (llama.cpp 0.3.36: 10 against 20).
//
// The signal is the time the pool's workers lose while runnable: a worker's wall time less its
// CPU time (CLOCK_THREAD_CPUTIME_ID) less the time it chose to sleep. A worker spins or computes
// between its sleeps, so that difference is time the scheduler gave its CPU to someone else.
// Over windows of kWindow seconds, kStreak windows in a row losing kLostShare of the threads'
// waking time or more take one thread out of the regions. After kBaseProbe seconds one is let
// back in; if its first window loses time again, it goes back out and the wait before the next
// try doubles (up to kMaxProbe). Where the system says how much of the allowed CPUs lay idle
// (common/idle_cpus.h), kStreak windows in a row with kIdleToProbe CPUs idle or more try a thread
// again at once, at most once a kBaseProbe after a thread went out: after a long contention the
// threads come back within a fraction of a second of its end instead of up to kMaxProbe later.
// Which threads compute a region never changes its results (kernels are thread-invariant).
#pragma once
#include <algorithm>
#include <cstdint>

namespace qd {

class ContentionGovernor {
 public:
  static constexpr double kWindow = 0.1;     // seconds of regions per decision
  static constexpr double kLostShare = 0.15;  // of the workers' waking time, lost to preemption
  static constexpr double kBaseProbe = 1.0;   // seconds before a thread is let back in
  static constexpr double kMaxProbe = 16.0;
  static constexpr int kStreak = 2;           // contended windows in a row that take a thread out
  static constexpr double kIdleToProbe = 0.75;  // idle CPUs (over a window) that justify a probe

  explicit ContentionGovernor(int n_threads) : n_(std::max(1, n_threads)), active_(n_) {}

  int active() const { return active_; }

  // Called at the start of parallel regions: `now` in seconds (any monotonic origin); `awake`
  // the seconds the workers spent not sleeping since the previous call, `lost` the part of them
  // they were preempted; `idle` the allowed CPUs' idle CPU-equivalents since the previous call
  // (-1: unknown; the pool reads it only while wants_idle()).
  // Returns the threads (the caller included) that should take part now.
  int update(double now, double awake, double lost, double idle = -1) {
    if (window_start_ < 0) window_start_ = now;
    awake_ += awake;
    lost_ += lost;
    if (now - window_start_ < kWindow) return active_;
    const bool contended = active_ > 1 && lost_ >= kLostShare * awake_ && awake_ > 0;
    window_start_ = now;
    awake_ = lost_ = 0;
    streak_ = contended ? streak_ + 1 : 0;
    idle_streak_ = active_ < n_ && idle >= kIdleToProbe ? idle_streak_ + 1 : 0;
    if (contended && (probing_ || streak_ >= kStreak)) {
      active_--;
      streak_ = 0;
      // A probe that found the contention still there: wait longer before the next one.
      if (probing_) backoff_ = std::min(kMaxProbe, backoff_ * 2);
      probing_ = false;
      probe_at_ = now + backoff_;
      idle_probe_at_ = now + kBaseProbe;
      idle_streak_ = 0;
    } else if (contended) {
      // One window alone is not enough: a thread just started shares its creator's CPU until the
      // scheduler moves it (tens of milliseconds), and a burst of a system task passes.
    } else if (probing_) {
      probing_ = false;  // the thread let back in ran a window undisturbed
      backoff_ = kBaseProbe;
      probe_at_ = now + backoff_;
    } else if (active_ < n_ && (now >= probe_at_ || (idle_streak_ >= kStreak && now >= idle_probe_at_))) {
      active_++;
      probing_ = true;
      idle_streak_ = 0;
    }
    return active_;
  }

  // Whether update() reads `idle`: while a thread is out.
  bool wants_idle() const { return active_ < n_; }

 private:
  int n_, active_;
  double window_start_ = -1, probe_at_ = 0, backoff_ = kBaseProbe, idle_probe_at_ = 0;
  double awake_ = 0, lost_ = 0;
  bool probing_ = false;
  int streak_ = 0, idle_streak_ = 0;
};

}  // namespace qd
