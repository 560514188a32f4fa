// Overflow-checked size arithmetic for validating untrusted counts and offsets.
#pragma once
#include <cstdint>

namespace qd {

// Returns false on overflow; *out is valid only on true.
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace qd
