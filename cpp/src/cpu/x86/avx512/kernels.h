// The AVX-512 matmul kernels compiled in their own files (block32_quants_isa_avx512.cpp,
// k_quants_isa_avx512.cpp: two translation units that build in parallel), for
// table_isa_avx512.cpp.
#pragma once
#include "cpu/kernels.h"

namespace qd::cpu::avx512 {

GemmRows gemm_q4_0;    // q4_0_iq4_nl.h: group order
GemmRows gemm_iq4_nl;
GemmRows gemm_q4_1;    // q4_1_q5_q8_0.h: llama.cpp's order
GemmRows gemm_q5_0;
GemmRows gemm_q5_1;
GemmRows gemm_q8_0;
GemmRows gemm_q2_K;    // q2_k.h: group-of-16 order
GemmRows gemm_q3_K;    // k_quants.h: 16 weight rows per vector, llama.cpp's order
GemmRows gemm_q4_K;
GemmRows gemm_q5_K;
GemmRows gemm_q6_K;
GemmRows gemm_iq4_xs;

}  // namespace qd::cpu::avx512
