// Row conversions between f32 and IEEE half (the F16 KV cache), with the ISA's vector
// instructions (F16C on x86). Bit-exact with quant/fp16.h: exact widening, round-to-nearest-even
// narrowing (NaN payloads aside).
#pragma once
#include <cstdint>

#include "common/cpu_features.h"

namespace qd::cpu {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);  // active_isa()
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);  // active_isa()

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n, Isa isa);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n, Isa isa);

}  // namespace qd::cpu
