#include "gguf/gguf_text.h"

namespace qd::gguf {

namespace {

// Length of the strict UTF-8 sequence at s[i] (no overlongs, surrogates or code points past
// U+10FFFF, as Python's decoder requires); 0 when the bytes there are not valid UTF-8.
uint64_t utf8_sequence(const uint8_t* s, uint64_t n, uint64_t i) {
  const uint8_t c = s[i];
  if (c < 0x80) return 1;
  uint64_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c == 0xE0) { len = 3; lo = 0xA0; }
  else if (c == 0xED) { len = 3; hi = 0x9F; }
  else if (c >= 0xE1 && c <= 0xEF) len = 3;
  else if (c == 0xF0) { len = 4; lo = 0x90; }
  else if (c == 0xF4) { len = 4; hi = 0x8F; }
  else if (c >= 0xF1 && c <= 0xF3) len = 4;
  else return 0;
  if (len > n - i || s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (uint64_t k = 2; k < len; k++) {
    if ((s[i + k] & 0xC0) != 0x80) return 0;
  }
  return len;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (uint64_t i = 0, len; i < s.size(); i += len) {
    if ((len = utf8_sequence(p, s.size(), i)) == 0) return false;
  }
  return true;
}

std::string printable(std::string_view s, uint64_t max_bytes) {
  static const char kHex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  std::string out;
  for (uint64_t i = 0, len; i < s.size(); i += len) {
    if (out.size() >= max_bytes) return out + "...";
    len = utf8_sequence(p, s.size(), i);
    if (len == 0 || p[i] < 0x20 || p[i] == 0x7F) {
      out += "\\x";
      out += kHex[p[i] >> 4];
      out += kHex[p[i] & 15];
      len = 1;
    } else {
      out.append(s.data() + i, len);
    }
  }
  return out;
}

std::string quoted(std::string_view name) { return "'" + printable(name, 80) + "'"; }

std::string hex_bytes(const uint8_t* p, uint64_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint64_t i = 0; i < n; i++) {
    if (i) out += ' ';
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

}  // namespace qd::gguf
