#include "common/thread_pool.h"

#include <sched.h>

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
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return physical_cores(cpus, "/sys/devices/system/cpu");
  }
#endif
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
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(checked_threads(n_threads)) {
  workers_.reserve((size_t)n_threads_ - 1);
  try {
    for (int i = 1; i < n_threads_; i++) workers_.emplace_back([this] { worker_loop(); });
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
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
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

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for a low-latency wake-up between the ops of one forward pass, then sleep.
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < 20000) {
      QD_PAUSE();
      spins++;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      // sleepers_ is raised before the predicate is checked under mu_, and run() bumps the
      // generation before reading sleepers_ (both seq_cst): either run() sees this sleeper and
      // notifies under mu_, or this thread sees the new generation and does not block.
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    work();
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(int n_tasks, TaskFn fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int i = 0; i < n_tasks; i++) fn(i);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  fn_ = &fn;
  n_tasks_ = n_tasks;
  next_.store(0, std::memory_order_relaxed);
  active_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: see worker_loop
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }  // a sleeper is either waiting already or sees the generation
    cv_.notify_all();
  }
  work();
  // Workers finish within microseconds when they have cores; on an oversubscribed machine a
  // preempted worker needs this core, so stop spinning after a while and yield it.
  for (int spins = 0; active_.load(std::memory_order_acquire) != 0; spins++) {
    if (spins < 4000) {
      QD_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  fn_ = nullptr;
}

}  // namespace qd
