#include "common/thread_pool.h"

#include <time.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <system_error>

#include "common/error.h"

// A spin-wait hint to the core (x86 PAUSE, ARM YIELD), written as inline assembly: no ISA header.
#if defined(__x86_64__) || defined(__i386__)
#define QD_PAUSE() asm volatile("pause")
#elif defined(__aarch64__)
#define QD_PAUSE() asm volatile("yield")
#else
#define QD_PAUSE() ((void)0)
#endif

namespace qd {

int ThreadPool::physical_cores(const std::vector<int>& cpus, const std::string& sysfs_cpu) {
  // Each CPU's list of SMT siblings (its own id included) names its core: "0,8" or "0-1" for
  // both threads of a core, "3" for a core without SMT.
  std::set<std::string> cores;
  for (int cpu : cpus) {
    std::ifstream f(sysfs_cpu + "/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    std::string siblings;
    if (!std::getline(f, siblings) || siblings.empty()) return (int)cpus.size();  // no topology: a core each
    cores.insert(siblings);
  }
  return cores.empty() ? 1 : (int)cores.size();
}

int ThreadPool::default_threads() {
  const std::vector<int> cpus = IdleCpus::allowed_cpus();
  if (!cpus.empty()) return physical_cores(cpus, "/sys/devices/system/cpu");
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : (int)n;
}

namespace {
int checked_threads(int n) {
  if (n < 0 || n > ThreadPool::kMaxThreads) {
    throw ArgError("threads must be 0 (one per core) or in [1, " + std::to_string(ThreadPool::kMaxThreads) + "], got " +
                   std::to_string(n));
  }
  return n == 0 ? ThreadPool::default_threads() : n;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The calling thread's CPU time in seconds; -1 where the system does not keep it (then no
// worker reports lost time, and the governor keeps every thread).
double thread_cpu_seconds() {
#ifdef CLOCK_THREAD_CPUTIME_ID
  timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0) return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
#endif
  return -1;
}
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(checked_threads(n_threads)),
      participants_(n_threads_),
      governor_(n_threads_),
      idle_(IdleCpus::allowed_cpus()) {
  workers_.reserve((size_t)n_threads_ - 1);
  try {
    for (int i = 1; i < n_threads_; i++) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (const std::exception& e) {
    // The destructor will not run: stop the started workers here, before cv_ and mu_ go away.
    const size_t started = workers_.size();
    stop_workers();
    throw Error("cannot start worker thread " + std::to_string(started + 1) + " of " + std::to_string(n_threads_ - 1) +
                " (" + e.what() + "): the system's thread or memory limit is reached; use fewer threads");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    state_.fetch_add(uint64_t{1} << 32, std::memory_order_release);
  }
  cv_.notify_all();
  parked_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::work() {
  const TaskFn& fn = *fn_;
  for (;;) {
    const int i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_tasks_) break;
    fn(i);
  }
}

bool ThreadPool::join(uint64_t generation) {
  uint64_t s = state_.load(std::memory_order_acquire);
  while ((s >> 32) == generation && (s & kOpen)) {
    if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  return false;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  auto generation = [this] { return state_.load(std::memory_order_acquire) >> 32; };
  // Time since the last sample: wall, CPU and asleep by choice (see ContentionGovernor).
  double wall0 = seconds_now(), cpu0 = thread_cpu_seconds(), slept = 0;
  for (;;) {
    if (index >= participants_.load(std::memory_order_acquire)) {
      // Left out while other processes compete for the CPUs: sleep, without spinning, until the
      // governor lets this thread back in, then take part from the next region on.
      const double t = seconds_now();
      std::unique_lock<std::mutex> lock(mu_);
      parked_.wait(lock, [&] { return stop_ || index < participants_.load(); });
      if (stop_) return;
      seen = generation();
      slept += seconds_now() - t;
      continue;
    }
    // Spin briefly for a low-latency wake-up between the ops of one forward pass, then sleep.
    int spins = 0;
    while (generation() == seen && spins < 20000) {
      QD_PAUSE();
      spins++;
    }
    if (generation() == seen) {
      // sleepers_ is raised before the predicate is checked under mu_, and run() opens the
      // region before reading sleepers_ (both seq_cst): either run() sees this sleeper and
      // notifies under mu_, or this thread sees the new generation and does not block.
      const double t = seconds_now();
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return (state_.load() >> 32) != seen; });
      sleepers_.fetch_sub(1);
      slept += seconds_now() - t;
    }
    seen = generation();
    if (stop_) return;
    if (index < participants_.load(std::memory_order_acquire) && join(seen)) {
      work();
      state_.fetch_sub(1, std::memory_order_acq_rel);
    }
    // Reported whether or not this worker got into the region: one that keeps arriving after
    // the region closed is losing its CPU, and would otherwise never report it.
    const double now = seconds_now();
    if (now - wall0 >= ContentionGovernor::kWindow / 4) {
      const double cpu = thread_cpu_seconds(), awake = now - wall0 - slept;
      report(awake, cpu < 0 || cpu0 < 0 ? 0.0 : awake - (cpu - cpu0));
      wall0 = now;
      cpu0 = cpu;
      slept = 0;
    }
  }
}

void ThreadPool::report(double awake, double lost) {
  awake_ns_.fetch_add((int64_t)(awake * 1e9), std::memory_order_relaxed);
  lost_ns_.fetch_add((int64_t)(std::max(0.0, lost) * 1e9), std::memory_order_relaxed);
}

int ThreadPool::govern() {
  const double now = seconds_now();
  if (now < next_decision_) return participants_.load(std::memory_order_relaxed);
  next_decision_ = now + ContentionGovernor::kWindow;
  const double awake = awake_ns_.exchange(0, std::memory_order_relaxed) * 1e-9;
  const double lost = lost_ns_.exchange(0, std::memory_order_relaxed) * 1e-9;
  double idle = -1;
  if (governor_.wants_idle()) {
    idle = idle_.sample(now - idle_since_);
    idle_since_ = now;
  } else {
    idle_.reset();
  }
  const int before = participants_.load(std::memory_order_relaxed);
  const int after = governor_.update(now, awake, lost, idle);
  if (after > before) {
    { std::lock_guard<std::mutex> lock(mu_); participants_.store(after); }
    parked_.notify_all();
  } else if (after < before) {
    participants_.store(after);
  }
  return after;
}

void ThreadPool::run(int n_tasks, TaskFn fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int i = 0; i < n_tasks; i++) fn(i);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (govern() == 1) {
    for (int i = 0; i < n_tasks; i++) fn(i);
    return;
  }
  // The caller is preempted too: one region in kCallerSample is timed, wall against CPU time
  // (two clock reads, one of them a system call). It counts for itself only: scaled up to stand
  // for the other regions, one stall in a short sampled region (a host's steal, an interrupt)
  // read as 15 % of a quiet window.
  const bool sampled = ++regions_ % kCallerSample == 0;
  const double wall0 = sampled ? seconds_now() : 0, cpu0 = sampled ? thread_cpu_seconds() : 0;
  fn_ = &fn;
  n_tasks_ = n_tasks;
  next_.store(0, std::memory_order_relaxed);
  const uint64_t generation = (state_.load(std::memory_order_relaxed) >> 32) + 1;
  state_.store(generation << 32 | kOpen);  // seq_cst: see worker_loop
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }  // a sleeper is either waiting already or sees the generation
    cv_.notify_all();
  }
  work();
  // Every task is taken: close the region, then wait for the workers that joined it to finish
  // theirs. They finish within microseconds when they have cores; on an oversubscribed machine
  // a preempted worker needs this core, so stop spinning after a while and yield it.
  state_.fetch_and(~kOpen, std::memory_order_acq_rel);
  for (int spins = 0; (state_.load(std::memory_order_acquire) & kInside) != 0; spins++) {
    if (spins < 4000) {
      QD_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  fn_ = nullptr;
  if (sampled) {
    const double wall = seconds_now() - wall0, cpu = thread_cpu_seconds();
    report(wall, cpu < 0 || cpu0 < 0 ? 0.0 : wall - (cpu - cpu0));
  }
}

}  // namespace qd
