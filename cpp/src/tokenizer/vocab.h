// The vocabulary as the tokenizer engines see it: token texts copied out of the GGUF mapping
// into one compact blob, with scores, types and a text -> id index.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace qd::tok {

struct Vocab {
  std::string blob;                // every token's text, back to back
  std::vector<uint32_t> offsets;   // [n_vocab + 1] into blob
  std::vector<float> scores;       // [n_vocab]; 0 when the file has none
  std::vector<TokenType> types;    // [n_vocab]
  std::unordered_map<std::string_view, int32_t> text_to_id;  // a repeated text maps to its last id

  int32_t size() const { return static_cast<int32_t>(types.size()); }
  std::string_view text(int32_t id) const {
    return std::string_view(blob).substr(offsets[id], offsets[id + 1] - offsets[id]);
  }
  int32_t find(std::string_view s) const {
    auto it = text_to_id.find(s);
    return it == text_to_id.end() ? -1 : it->second;
  }
};

}  // namespace qd::tok
