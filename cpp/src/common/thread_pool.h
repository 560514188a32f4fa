// A persistent thread pool: workers are started once and woken per parallel region.
//
// A pool that cannot start all its workers (thread or memory limits) stops and joins the ones it
// did start before its constructor throws qd::Error, so no worker is left waiting on a
// condition variable that is being destroyed.
//
// run(n, fn) calls fn(i) for every i in [0, n) across the workers and the calling thread and
// returns when all calls are done. Which thread runs which i is not fixed, so kernels must make
// each task's result independent of the thread that computes it (batch/thread invariance).
#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

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
  void worker_loop();
  void work();
  void stop_workers();  // wakes every started worker with stop_ and joins it

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> next_{0};
  std::atomic<int> active_{0};    // workers still inside the current region
  std::atomic<int> sleepers_{0};  // workers blocked on cv_ (run() skips the notify when none)
  int n_tasks_ = 0;
  const TaskFn* fn_ = nullptr;
  bool stop_ = false;
  std::mutex run_mu_;  // one parallel region at a time per pool
};

}  // namespace qd
