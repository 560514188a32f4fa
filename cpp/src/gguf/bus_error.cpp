#include "gguf/bus_error.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace qd::gguf {

namespace {

// Read by the signal handler, so plain atomics: no locks, no allocation.
struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<const char*> path{nullptr};
};
constexpr int kSlots = 256;
Slot g_slots[kSlots];
std::mutex g_claim_mu;  // claiming and freeing slots (never taken by the handler)
struct sigaction g_previous;

void append(char* buf, size_t cap, size_t* n, const char* s) {
  while (*s && *n + 1 < cap) buf[(*n)++] = *s++;
}

void reset_to_default(int sig) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

// Whatever was installed before us, as if we were not there.
void chain(int sig, siginfo_t* info, void* uctx) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(sig, info, uctx);
    return;
  }
  if (g_previous.sa_handler == SIG_IGN && info->si_code <= 0) return;  // a sent signal, ignored before us
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // A fault re-executes the faulting access on return and gets the default action then; a
    // sent signal is sent again (it stays blocked until this handler returns).
    reset_to_default(sig);
    if (info->si_code <= 0) raise(sig);
    return;
  }
  g_previous.sa_handler(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* uctx) {
  const uintptr_t a = (uintptr_t)info->si_addr;
  if (info->si_code > 0) {  // a fault (kill() and raise() have si_code <= 0)
    for (Slot& s : g_slots) {
      const char* path = s.path.load();
      if (!path || a < s.begin.load() || a >= s.end.load()) continue;
      char buf[4096];
      size_t n = 0;
      append(buf, sizeof buf, &n, "quickdraft: bus error reading the model file ");
      append(buf, sizeof buf, &n, path);
      append(buf, sizeof buf, &n,
             ": it was truncated or replaced while in use; load it again, or load it with mmap=False to read it "
             "into memory\n");
      ssize_t ignored = write(STDERR_FILENO, buf, n);
      (void)ignored;
      reset_to_default(sig);  // returning re-executes the access: the default action ends the process
      return;
    }
  }
  chain(sig, info, uctx);
}

void install() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

int watch_mapping(const uint8_t* base, uint64_t size, const char* path) {
  static std::once_flag installed;
  std::call_once(installed, install);
  std::lock_guard<std::mutex> lock(g_claim_mu);
  for (int i = 0; i < kSlots; i++) {
    Slot& s = g_slots[i];
    if (s.path.load()) continue;
    s.begin.store((uintptr_t)base);
    s.end.store((uintptr_t)base + size);
    s.path.store(path);  // last: the handler reads a slot only once its path is set
    return i;
  }
  return -1;
}

void unwatch_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  std::lock_guard<std::mutex> lock(g_claim_mu);
  g_slots[slot].path.store(nullptr);
  g_slots[slot].begin.store(0);
  g_slots[slot].end.store(0);
}

}  // namespace qd::gguf
