#include "tokenizer/unicode.h"

#include <memory>

#include "tokenizer/unicode_tables.h"

namespace qd::unicode {

namespace {

constexpr uint32_t kMaxCodePoint = 0x110000;

// A flat byte per code point (1.1 MB), expanded once from the generated ranges: lookups are
// on the hot path of every pre-tokenizer.
const uint8_t* flag_table() {
  static const std::unique_ptr<uint8_t[]> table = [] {
    std::unique_ptr<uint8_t[]> t(new uint8_t[kMaxCodePoint]);
    constexpr size_t n = sizeof(kFlagRanges) / sizeof(kFlagRanges[0]);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t begin = kFlagRanges[i] >> 8;
      const uint32_t end = i + 1 < n ? kFlagRanges[i + 1] >> 8 : kMaxCodePoint;
      const uint8_t f = static_cast<uint8_t>(kFlagRanges[i] & 0xFF);
      for (uint32_t cp = begin; cp < end; ++cp) t[cp] = f;
    }
    return t;
  }();
  return table.get();
}

inline bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

uint8_t flags(uint32_t cp) { return cp < kMaxCodePoint ? flag_table()[cp] : 0; }

uint32_t decode_lenient(std::string_view s, size_t* pos) {
  // Same acceptance as llama.cpp: checks lead and continuation bits only (no overlong or
  // surrogate checks), so that token boundaries match it on any input.
  const size_t i = *pos;
  const size_t n = s.size();
  const uint8_t b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  auto cont = [&](size_t k) { return i + k < n && is_cont(static_cast<uint8_t>(s[i + k])); };
  if ((b0 & 0xE0) == 0xC0 && cont(1)) {
    *pos = i + 2;
    return ((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3F);
  }
  if ((b0 & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    *pos = i + 3;
    return ((b0 & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3F);
  }
  if ((b0 & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    *pos = i + 4;
    return ((b0 & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3F);
  }
  *pos = i + 1;
  return kReplacement;
}

std::vector<uint32_t> to_code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(decode_lenient(s, &pos));
  return out;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Expected length of a sequence led by b0 and the allowed range of its second byte
// (Unicode Table 3-7, well-formed UTF-8 byte sequences); length 0 for an invalid lead byte.
struct Lead {
  uint8_t len, lo, hi;
};

Lead lead_of(uint8_t b0) {
  if (b0 < 0x80) return {1, 0, 0};
  if (b0 >= 0xC2 && b0 <= 0xDF) return {2, 0x80, 0xBF};
  if (b0 == 0xE0) return {3, 0xA0, 0xBF};
  if (b0 == 0xED) return {3, 0x80, 0x9F};
  if (b0 >= 0xE1 && b0 <= 0xEF) return {3, 0x80, 0xBF};
  if (b0 == 0xF0) return {4, 0x90, 0xBF};
  if (b0 >= 0xF1 && b0 <= 0xF3) return {4, 0x80, 0xBF};
  if (b0 == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from pos form a valid prefix of a sequence (at most its full length).
size_t valid_prefix(std::string_view s, size_t pos, Lead* lead_out) {
  const Lead lead = lead_of(static_cast<uint8_t>(s[pos]));
  *lead_out = lead;
  if (lead.len <= 1) return lead.len;
  size_t k = 1;
  while (k < lead.len && pos + k < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[pos + k]);
    const bool ok = k == 1 ? (b >= lead.lo && b <= lead.hi) : is_cont(b);
    if (!ok) break;
    ++k;
  }
  return k;
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t pos) {
  Lead lead;
  const size_t k = valid_prefix(s, pos, &lead);
  return k == lead.len ? k : 0;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    Lead lead;
    const size_t k = valid_prefix(s, pos, &lead);
    if (lead.len != 0 && k == lead.len) {
      out.append(s.data() + pos, k);
      pos += k;
    } else {
      // A maximal subpart (or a lone invalid byte) becomes one U+FFFD.
      out.append("\xEF\xBF\xBD");
      pos += k == 0 ? 1 : k;
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t pos = n - back;
    const uint8_t b = static_cast<uint8_t>(s[pos]);
    if (is_cont(b)) continue;  // keep looking for the lead byte
    Lead lead;
    const size_t k = valid_prefix(s, pos, &lead);
    // Incomplete only if every byte up to the end is a valid prefix and more are needed.
    return (lead.len > back && k == back) ? back : 0;
  }
  return 0;
}

}  // namespace qd::unicode
