// Finding special tokens (control, user-defined, unknown) in raw text before tokenization.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace qd::tok {

struct Fragment {
  int32_t token;      // >= 0: a special token; -1: raw text [offset, offset + length)
  size_t offset, length;
};

class SpecialTokens {
 public:
  explicit SpecialTokens(const Vocab& vocab);

  // Splits text into raw fragments and special tokens. User-defined tokens are always
  // recognised; control and unknown ones only with parse_special (llama.cpp's rule). Longer
  // tokens take precedence: each token, longest first, splits what the earlier ones left.
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> edges;  // sorted by byte
    int32_t token = -1;
  };
  bool eligible(int32_t id, bool parse_special) const;
  std::vector<int32_t> occurring(std::string_view text, bool parse_special) const;

  const Vocab& vocab_;
  std::vector<int32_t> order_;  // special ids, longest text first (ties by id)
  std::vector<uint32_t> rank_;  // [n_vocab] position in order_
  std::vector<Node> nodes_;     // a trie of their texts; nodes_[0] is the root
  int32_t root_edge_[256];      // the root's children, looked up directly
};

}  // namespace qd::tok
