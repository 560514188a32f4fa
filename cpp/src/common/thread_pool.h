// A persistent thread pool: workers are started once and woken per parallel region.
//
// A pool that cannot start all its workers (thread or memory limits) stops and joins the ones it
// did start before its constructor throws qd::Error, so no worker is left waiting on a
// condition variable that is being destroyed.
//
// run(n, fn) calls fn(i) for every i in [0, n) across the workers and the calling thread and
// returns when all calls are done. Which thread runs which i is not fixed, so kernels must make
// each task's result independent of the thread that computes it (batch/thread invariance).
//
// A worker takes part in a region only if it arrives while tasks are left: run() waits for the
// workers that joined, never for one still asleep or descheduled. While other processes compete
// for the CPUs, a ContentionGovernor (common/contention.h) also leaves workers out of the regions
// altogether; participants() says how many threads take part, and callers that split work by
// thread count split it by that.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/contention.h"
#include "common/idle_cpus.h"

namespace qd {

// A non-owning reference to a callable `void(int)`: unlike std::function it never allocates,
// whatever the lambda captures, so a parallel region costs no heap traffic per op.
class TaskFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, TaskFn>>>
  TaskFn(F&& f) : obj_((void*)&f), call_([](void* o, int i) { (*static_cast<std::remove_reference_t<F>*>(o))(i); }) {}
  void operator()(int i) const { call_(obj_, i); }

 private:
  void* obj_;
  void (*call_)(void*, int);
};

class ThreadPool {
 public:
  // n_threads: total threads including the caller, in [1, kMaxThreads]; 0 means default_threads().
  // ArgError outside that range; qd::Error when the system refuses to start a worker.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  void run(int n_tasks, TaskFn fn);  // fn must not throw
  // The threads taking part in regions now: size() unless other processes compete for the CPUs
  // (see common/contention.h). Which threads compute a region never changes its results.
  int participants() const { return participants_.load(std::memory_order_relaxed); }

  // One thread per core this process may run on: the CPUs of its affinity mask, SMT siblings
  // (hyperthreads) counted once. Decoding streams the weights and a verify is bound by the
  // vector units, neither of which a core's second hardware thread adds; a second thread per
  // core only adds one more to wait for at every barrier. llama.cpp defaults to physical cores
  // for the same reason (on 8 cores / 16 threads, 16 threads decoded at 2.5 tok/s against 9 at 8,
  // reported in ggml-org/llama.cpp#20020). Not measured here: this project's machines have no SMT.
  static int default_threads();
  // How many distinct cores the CPUs `cpus` belong to, by the thread_siblings_list of each under
  // sysfs_cpu (/sys/devices/system/cpu); cpus.size() where a CPU's topology is not readable.
  static int physical_cores(const std::vector<int>& cpus, const std::string& sysfs_cpu);
  static constexpr int kMaxThreads = 1024;

 private:
  void worker_loop(int index);
  void work();
  void stop_workers();  // wakes every started worker with stop_ and joins it
  bool join(uint64_t generation);  // enters region `generation` if it is still open
  int govern();  // the threads that take part in the next region (ContentionGovernor)
  void report(double awake, double lost);  // a thread's seconds awake and lost, for govern()

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;      // workers waiting for a region
  std::condition_variable parked_;  // workers the governor left out, waiting to be let back in
  // The region's generation (upper 32 bits), whether it is open to workers (kOpen) and how many
  // workers joined it and are still inside (the low bits). run() waits only for the workers that
  // joined before it closed the region: one that wakes late (descheduled by another process on
  // its core) finds the region closed and waits for the next one, instead of holding this one.
  std::atomic<uint64_t> state_{0};
  static constexpr uint64_t kOpen = uint64_t{1} << 31, kInside = kOpen - 1;
  std::atomic<int> next_{0};
  std::atomic<int> sleepers_{0};  // workers blocked on cv_ (run() skips the notify when none)
  int n_tasks_ = 0;
  const TaskFn* fn_ = nullptr;
  bool stop_ = false;
  std::mutex run_mu_;  // one parallel region at a time per pool

  // Threads that take part in regions (the caller and workers 1 .. participants_ - 1), set by
  // governor_ from the time the workers report awake and lost to preemption (in nanoseconds).
  std::atomic<int> participants_;
  std::atomic<int64_t> awake_ns_{0}, lost_ns_{0};
  ContentionGovernor governor_;
  double next_decision_ = 0;  // the steady clock's seconds at which run() next consults governor_
  IdleCpus idle_;             // sampled at govern()'s decisions while a thread is out
  double idle_since_ = 0;     // when idle_ was last sampled
  uint64_t regions_ = 0;      // regions run() opened, for the caller's samples
  static constexpr int kCallerSample = 8;
};

}  // namespace qd
