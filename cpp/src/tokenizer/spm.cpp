#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <string>

namespace qd::tok {

namespace {

// Sequence length from the lead byte alone, as llama.cpp splits SPM input.
size_t utf8_len(uint8_t lead) {
  static const uint8_t table[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return table[lead >> 4];
}

}  // namespace

Spm::Spm(const Vocab& vocab, int32_t unk_id) : vocab_(vocab), unk_id_(unk_id) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    if (id < 0) id = vocab.find(std::string(1, static_cast<char>(b)));
    byte_token_[b] = id >= 0 ? id : unk_id;
  }
}

void Spm::encode(std::string_view text, std::vector<int32_t>* out) const {
  struct Sym {
    int32_t prev, next;
    uint32_t start, len;
  };
  struct Cand {
    float score;
    int32_t left, right;
    uint32_t len;
  };
  // Highest score first; on a tie the leftmost pair.
  auto later = [](const Cand& a, const Cand& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
  std::priority_queue<Cand, std::vector<Cand>, decltype(later)> queue(later);

  std::vector<Sym> sym;
  sym.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = std::min(utf8_len(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back(Sym{i - 1, pos + len < text.size() ? i + 1 : -1, uint32_t(pos), uint32_t(len)});
    pos += len;
  }
  // Symbols are contiguous, so a pair's text is a slice of the input: no copies.
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = vocab_.find(text.substr(sym[l].start, len));
    if (id >= 0) queue.push(Cand{vocab_.scores[id], l, r, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].len);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char ch : piece) {  // byte fallback
      const int32_t b = byte_token_[static_cast<uint8_t>(ch)];
      if (b >= 0) out->push_back(b);
    }
  }
}

}  // namespace qd::tok
