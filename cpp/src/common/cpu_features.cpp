#include "common/cpu_features.h"

#include <cstdlib>

#include "common/error.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#define QD_X86 1
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace qd {

namespace {

#ifdef QD_X86
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#ifdef QD_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  f.amd = (b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163)     // "AuthenticAMD"
          || (b == 0x6f677948 && d == 0x6e65476e && c == 0x656e6975);  // "HygonGenuine"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;             // SSE + AVX state saved by the OS
  const bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM state
  const bool fma = (c >> 12) & 1, f16c = (c >> 29) & 1, avx = (c >> 28) & 1;
  if (!ymm_ok || !avx) return f;
  f.fma = fma;
  f.f16c = f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  if (zmm_ok) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
  }
  __cpuid_count(7, 1, a, b, c, d);
  f.avx_vnni = (a >> 4) & 1;
#elif defined(__aarch64__)
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  f.neon = (hw & HWCAP_ASIMD) != 0;
  f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
  f.fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
#ifdef HWCAP2_I8MM
  f.i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
#else
  f.neon = true;  // part of armv8-a; no portable way to ask for the extensions here
#endif
#endif
  return f;
}

// Every ISA, from the least to the most capable on each architecture: the best available is the last.
constexpr Isa kAllIsas[] = {Isa::scalar, Isa::neon, Isa::neon_dot, Isa::avx2, Isa::avx2_vnni, Isa::avx512};

bool cpu_can_run(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return avx2;
    case Isa::avx2_vnni: return avx2 && f.avx_vnni;
    case Isa::avx512: return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
    case Isa::neon: return f.neon;
    case Isa::neon_dot: return f.neon && f.dotprod;
  }
  return false;
}

Isa choose() {
  const char* forced = std::getenv("QD_FORCE_ISA");
  if (forced && *forced) {
    const Isa isa = parse_isa(forced);
    if (!isa_built(isa)) {
      throw ArgError(std::string("QD_FORCE_ISA=") + forced + ": this build of quickdraft has no " + forced +
                     " kernels (built for another architecture)");
    }
    if (!cpu_can_run(isa)) {
      throw ArgError(std::string("QD_FORCE_ISA=") + forced + ": this CPU cannot execute " + forced +
                     " instructions; unset QD_FORCE_ISA or choose one of the available ISAs");
    }
    return isa;
  }
  const std::vector<Isa> all = available_isas();
  return all.back();
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx2_vnni: return "avx2_vnni";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
    case Isa::neon_dot: return "neon_dot";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  for (Isa isa : kAllIsas) {
    if (name == isa_name(isa)) return isa;
  }
  throw ArgError("unknown ISA '" + name + "': expected scalar, avx2, avx2_vnni, avx512, neon or neon_dot");
}

// Which kernel files this build compiled (set by cpp/src/cpu/CMakeLists.txt).
bool isa_built(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
#ifdef QD_HAVE_X86_KERNELS
    case Isa::avx2:
    case Isa::avx2_vnni:
    case Isa::avx512: return true;
#endif
#ifdef QD_HAVE_ARM_KERNELS
    case Isa::neon:
    case Isa::neon_dot: return true;
#endif
    default: return false;
  }
}

bool isa_available(Isa isa) { return isa_built(isa) && cpu_can_run(isa); }

std::vector<Isa> built_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas) {
    if (isa_built(isa)) out.push_back(isa);
  }
  return out;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas) {
    if (isa_available(isa)) out.push_back(isa);
  }
  return out;
}

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

}  // namespace qd
