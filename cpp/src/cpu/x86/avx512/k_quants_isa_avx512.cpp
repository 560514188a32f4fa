// AVX-512 kernels for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS; compiled with the
// AVX-512 flags (cpp/src/cpu/CMakeLists.txt).
#include "cpu/x86/avx512/k_quants.h"
#include "cpu/x86/avx512/kernels.h"
#include "cpu/x86/avx512/q2_k.h"

namespace qd::cpu::avx512 {

void gemm_q2_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  k16g_gemm<Avx512Tag, G16Q2K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q3_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  krows_gemm<Avx512Tag, KRowsQ3K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q4_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  krows_gemm<Avx512Tag, KRowsQ4K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q5_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  krows_gemm<Avx512Tag, KRowsQ5K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q6_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  krows_gemm<Avx512Tag, KRowsQ6K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_iq4_xs(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  krows_gemm<Avx512Tag, KRowsIQ4XS>(w, r0, r1, a, s, n, y, ldy);
}

}  // namespace qd::cpu::avx512
