// CPU feature detection and the one run-time choice of kernel ISA.
//
// The ISA is chosen once per process: the best one the CPU can execute, unless the environment
// variable QD_FORCE_ISA=scalar|avx2|avx2_vnni|avx512|neon|neon_dot asks for another (tests use it
// to run every path).
#pragma once
#include <string>
#include <vector>

namespace qd {

// scalar: the reference kernels, every CPU. avx2: AVX2 + FMA + F16C. avx2_vnni: avx2 plus the
// VEX-encoded 256-bit VNNI dot product (AVX-VNNI: Intel Alder Lake and later). avx512: F, BW, VL,
// DQ and VNNI. neon: plain armv8-a. neon_dot: armv8.2-a with the SDOT dot product (asimddp).
enum class Isa { scalar, avx2, avx2_vnni, avx512, neon, neon_dot };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avx_vnni = false;
  bool amd = false;  // an AMD (or Hygon) x86 core: some kernels tune their prefetch distance to it
  // aarch64, from getauxval(AT_HWCAP/AT_HWCAP2): asimd (NEON), asimddp (SDOT), i8mm (SMMLA),
  // fp16 (half-precision arithmetic: fphp + asimdhp).
  bool neon = false, dotprod = false, i8mm = false, fp16 = false;
};

// What this CPU (and OS: XSAVE-enabled register state) supports; detected once.
const CpuFeatures& cpu_features();

const char* isa_name(Isa isa);

// Parses an isa_name(); throws ArgError naming the valid choices.
Isa parse_isa(const std::string& name);

// True when this build has kernels for `isa` (whether or not this CPU can execute them).
bool isa_built(Isa isa);

// True when this build has kernels for `isa` AND this CPU can execute them.
bool isa_available(Isa isa);

// Every ISA this build has kernels for, scalar first.
std::vector<Isa> built_isas();

// Every ISA usable here, scalar first.
std::vector<Isa> available_isas();

// The process-wide choice: QD_FORCE_ISA if set (ArgError if this CPU or build lacks it), else the
// best available. Computed on first call.
Isa active_isa();

}  // namespace qd
