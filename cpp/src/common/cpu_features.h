// CPU feature detection and the one run-time choice of kernel ISA.
//
// The ISA is chosen once per process: the best one the CPU can execute, unless the environment
// variable QD_FORCE_ISA=scalar|avx2|avx512|neon asks for another (tests use it to run every path).
#pragma once
#include <string>
#include <vector>

namespace qd {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, neon = 3 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avx_vnni = false;
  // aarch64, from getauxval(AT_HWCAP/AT_HWCAP2): asimd (NEON), asimddp (SDOT), i8mm (SMMLA),
  // fp16 (half-precision arithmetic: fphp + asimdhp).
  bool neon = false, dotprod = false, i8mm = false, fp16 = false;
};

// What this CPU (and OS: XSAVE-enabled register state) supports; detected once.
const CpuFeatures& cpu_features();

const char* isa_name(Isa isa);

// Parses "scalar", "avx2", "avx512", "neon"; throws ArgError naming the valid choices.
Isa parse_isa(const std::string& name);

// True when this build has kernels for `isa` AND this CPU can execute them.
bool isa_available(Isa isa);

// Every ISA usable here, scalar first.
std::vector<Isa> available_isas();

// The process-wide choice: QD_FORCE_ISA if set (ArgError if this CPU or build lacks it), else the
// best available. Computed on first call.
Isa active_isa();

}  // namespace qd
