#include "gguf/gguf_value.h"

#include <cstring>
#include <string>

#include "common/error.h"

namespace qd::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

uint64_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

namespace {
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

// Decode one little-endian scalar of type t at p.
Value decode_scalar(ValueType t, const uint8_t* p) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::UINT8: v.u64 = load<uint8_t>(p); v.i64 = (int64_t)v.u64; break;
    case ValueType::INT8: v.i64 = load<int8_t>(p); v.u64 = (uint64_t)v.i64; break;
    case ValueType::UINT16: v.u64 = load<uint16_t>(p); v.i64 = (int64_t)v.u64; break;
    case ValueType::INT16: v.i64 = load<int16_t>(p); v.u64 = (uint64_t)v.i64; break;
    case ValueType::UINT32: v.u64 = load<uint32_t>(p); v.i64 = (int64_t)v.u64; break;
    case ValueType::INT32: v.i64 = load<int32_t>(p); v.u64 = (uint64_t)v.i64; break;
    case ValueType::UINT64: v.u64 = load<uint64_t>(p); v.i64 = (int64_t)v.u64; break;
    case ValueType::INT64: v.i64 = load<int64_t>(p); v.u64 = (uint64_t)v.i64; break;
    case ValueType::FLOAT32: v.f64 = load<float>(p); break;
    case ValueType::FLOAT64: v.f64 = load<double>(p); break;
    case ValueType::BOOL: v.u64 = load<uint8_t>(p) != 0; v.i64 = (int64_t)v.u64; break;
    default: break;
  }
  return v;
}

Value Value::element(uint64_t i) const {
  if (type != ValueType::ARRAY || i >= count || value_type_size(elem_type) == 0) {
    throw ArgError("Value::element(" + std::to_string(i) + ") on a value that is not an array of " +
                   std::to_string(i + 1) + "+ fixed-size scalars");
  }
  return decode_scalar(elem_type, data + i * value_type_size(elem_type));
}

}  // namespace qd::gguf
