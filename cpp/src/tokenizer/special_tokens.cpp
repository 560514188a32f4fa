#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace qd::tok {

SpecialTokens::SpecialTokens(const Vocab& vocab) : vocab_(vocab), rank_(vocab.size(), 0) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType t = vocab.types[id];
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) order_.push_back(id);
  }
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int32_t a, int32_t b) { return vocab.text(a).size() > vocab.text(b).size(); });
  for (size_t i = 0; i < order_.size(); ++i) rank_[order_[i]] = static_cast<uint32_t>(i);

  std::fill(std::begin(root_edge_), std::end(root_edge_), -1);
  nodes_.emplace_back();
  for (int32_t id : order_) {
    const std::string_view text = vocab.text(id);
    if (text.empty()) continue;
    int32_t node = 0;
    for (size_t k = 0; k < text.size(); ++k) {
      const uint8_t c = static_cast<uint8_t>(text[k]);
      int32_t next = -1;
      if (node == 0) {
        next = root_edge_[c];
      } else {
        auto& e = nodes_[node].edges;
        auto it = std::lower_bound(e.begin(), e.end(), std::make_pair(c, int32_t(-1)));
        if (it != e.end() && it->first == c) next = it->second;
      }
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        if (node == 0) {
          root_edge_[c] = next;
        } else {
          auto& e = nodes_[node].edges;
          e.insert(std::lower_bound(e.begin(), e.end(), std::make_pair(c, int32_t(-1))), {c, next});
        }
      }
      node = next;
    }
    if (nodes_[node].token < 0) nodes_[node].token = id;  // a repeated text: the first id in order_
  }
}

bool SpecialTokens::eligible(int32_t id, bool parse_special) const {
  return parse_special || vocab_.types[id] == TokenType::UserDefined;
}

// The special tokens that occur anywhere in text (a trie walk from every byte). Only these
// need the precedence pass below, which is what keeps thousands of unused control tokens cheap.
std::vector<int32_t> SpecialTokens::occurring(std::string_view text, bool parse_special) const {
  std::vector<int32_t> found;
  std::vector<bool> seen(vocab_.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t node = root_edge_[static_cast<uint8_t>(text[i])];
    for (size_t j = i + 1; node >= 0; ++j) {
      const int32_t t = nodes_[node].token;
      if (t >= 0 && !seen[t] && eligible(t, parse_special)) {
        seen[t] = true;
        found.push_back(t);
      }
      if (j >= text.size()) break;
      const auto& e = nodes_[node].edges;
      const uint8_t c = static_cast<uint8_t>(text[j]);
      auto it = std::lower_bound(e.begin(), e.end(), std::make_pair(c, int32_t(-1)));
      node = (it != e.end() && it->first == c) ? it->second : -1;
    }
  }
  std::sort(found.begin(), found.end(), [&](int32_t a, int32_t b) { return rank_[a] < rank_[b]; });
  return found;
}

std::vector<Fragment> SpecialTokens::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{-1, 0, text.size()});
  if (order_.empty()) return frags;
  std::vector<Fragment> next;
  for (int32_t id : occurring(text, parse_special)) {
    const std::string_view tok = vocab_.text(id);
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.offset;
      const size_t end = f.offset + f.length;
      while (begin < end) {
        const size_t match = text.substr(0, end).find(tok, begin);
        if (match == std::string_view::npos) break;
        if (match > begin) next.push_back(Fragment{-1, begin, match - begin});
        next.push_back(Fragment{id, match, tok.size()});
        begin = match + tok.size();
      }
      if (begin < end) next.push_back(Fragment{-1, begin, end - begin});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace qd::tok
