// AVX-512 kernels for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL); compiled
// with the AVX-512 flags (cpp/src/cpu/CMakeLists.txt).
#include "cpu/x86/avx512/kernels.h"
#include "cpu/x86/avx512/q4_0_iq4_nl.h"
#include "cpu/x86/avx512/q4_1_q5_q8_0.h"

namespace qd::cpu::avx512 {

void gemm_q4_0(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  q32g_gemm<Avx512Tag, WQ4_0>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_iq4_nl(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  q32g_gemm<Avx512Tag, WIQ4_NL>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q4_1(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  lane8_gemm<Avx512Tag, WQ4_1>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q5_0(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  lane8_gemm<Avx512Tag, WQ5_0>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q5_1(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  lane8_gemm<Avx512Tag, WQ5_1>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q8_0(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  lane8_gemm<Avx512Tag, WQ8_0>(w, r0, r1, a, s, n, y, ldy);
}

}  // namespace qd::cpu::avx512
