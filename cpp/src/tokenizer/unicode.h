// Code points, UTF-8 and Unicode general categories for the tokenizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qd::unicode {

// One byte of flags per code point (see gen_unicode_tables.py). Unassigned code points have 0.
enum Flag : uint8_t {
  kNumber = 1 << 0,       // \p{N}
  kLetter = 1 << 1,       // \p{L}
  kPunctuation = 1 << 2,  // \p{P}
  kMark = 1 << 3,         // \p{M}
  kSymbol = 1 << 4,       // \p{S}
  kSeparator = 1 << 5,    // \p{Z}
  kControl = 1 << 6,      // \p{C} except Cn
  kWhitespace = 1 << 7,   // \s (White_Space)
};

uint8_t flags(uint32_t cp);  // 0 for code points past U+10FFFF
inline bool is_letter(uint32_t cp) { return flags(cp) & kLetter; }
inline bool is_number(uint32_t cp) { return flags(cp) & kNumber; }
inline bool is_whitespace(uint32_t cp) { return flags(cp) & kWhitespace; }

constexpr uint32_t kReplacement = 0xFFFD;

// Decodes the code point at s[*pos] and advances *pos. A byte that does not start a well-formed
// sequence yields U+FFFD and advances by one byte (llama.cpp's lenient rule for tokenization).
uint32_t decode_lenient(std::string_view s, size_t* pos);
std::vector<uint32_t> to_code_points(std::string_view s);
void append_utf8(uint32_t cp, std::string* out);

// Length of the well-formed UTF-8 sequence at s[pos] (1..4), or 0 when it is not well-formed.
// Follows the Unicode "maximal subpart" rules (as CPython's decoder does).
size_t valid_sequence_length(std::string_view s, size_t pos);

// Replaces ill-formed UTF-8 with U+FFFD exactly like Python's bytes.decode("utf-8", "replace").
std::string sanitize_utf8(std::string_view s);

// Bytes at the end of s that could still become a well-formed character once more bytes arrive
// (0..3). Used by the streaming detokenizer to hold back an incomplete character.
size_t incomplete_tail(std::string_view s);

}  // namespace qd::unicode
