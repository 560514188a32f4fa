// GGUF metadata values. Strings and numeric arrays are views into the file mapping (no copy).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qd::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char* value_type_name(ValueType t);
// Bytes of one scalar of this type; 0 for STRING and ARRAY.
uint64_t value_type_size(ValueType t);

struct Value {
  ValueType type = ValueType::UINT8;
  // Scalars: integer types in i64/u64 (both filled), floats in f64, BOOL in u64 (0/1).
  int64_t i64 = 0;
  uint64_t u64 = 0;
  double f64 = 0.0;
  std::string_view str;  // STRING
  // ARRAY
  ValueType elem_type = ValueType::UINT8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;          // fixed-size scalar elements, little-endian, unaligned
  std::vector<std::string_view> strings;  // STRING elements
  std::vector<Value> items;               // ARRAY elements (nested arrays)

  bool is_integer() const;
  bool is_number() const { return is_integer() || type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
  // Element i of a fixed-size scalar array as a scalar Value (ArgError when out of range).
  Value element(uint64_t i) const;
};

}  // namespace qd::gguf
