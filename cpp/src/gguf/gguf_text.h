// Text from a GGUF file: UTF-8 validation and making untrusted bytes safe for error messages.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace qd::gguf {

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as Python's decoder
// and the gguf package require of keys and tensor names.
bool valid_utf8(std::string_view s);

// Invalid UTF-8 and control bytes become \xNN and text past max_bytes is cut with "...": an
// error message must convert to a Python str, and a 1 GB hostile name must not become a 1 GB
// message.
std::string printable(std::string_view s, uint64_t max_bytes);

// A name from the file, single-quoted and printable() to 80 bytes, for error messages.
std::string quoted(std::string_view name);

// "47 47 55 46" for error messages about raw bytes.
std::string hex_bytes(const uint8_t* p, uint64_t n);

}  // namespace qd::gguf
