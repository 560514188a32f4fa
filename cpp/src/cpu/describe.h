// What each ISA's kernel table holds, for people (_core.kernels.describe()) and tests: for every
// GGML type of quant/quant_types.cpp and every other routine, which kind of kernel serves it.
#pragma once
#include <string>
#include <vector>

#include "common/cpu_features.h"

namespace qd::cpu {

// simd: the ISA's own kernel; scalar: the shared scalar one (cpu/scalar/); dequant: dequantize +
// f32 dot (scalar::gemm_dequant); unsupported: quickdraft cannot compute with the type; missing:
// no entry (a bug: every table lists every type); not_repacked ("-"): a "<type> rows8" row of an
// ISA that keeps the type in the GGUF layout (cpu/repack.h).
enum class KernelKind { simd, scalar, dequant, unsupported, missing, not_repacked };

const char* kernel_kind_name(KernelKind k);

struct RoutineInfo {
  std::string routine;  // a GGML type name ("Q4_K") for matmul kernels, else the routine's name
  KernelKind kind;
  std::string act;  // matmul: the activation format (f32, q8_0, q8_K); else empty
};

// Every matmul type first (quant table order), then "<type> rows8" for every type with the rows8
// layout (the kernel over weights repacked at load), then the other routines. `isa` must be built.
std::vector<RoutineInfo> describe_table(Isa isa);

// The routine x ISA table of every ISA built into this binary, as text.
std::string describe_tables();

}  // namespace qd::cpu
