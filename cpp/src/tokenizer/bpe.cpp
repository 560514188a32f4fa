#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace qd::tok {

namespace {

struct ByteMap {
  uint32_t to_cp[256];
  int16_t from_cp[0x144];  // every mapped code point is below U+0144
  ByteMap() {
    std::fill(std::begin(from_cp), std::end(from_cp), int16_t(-1));
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? uint32_t(b) : uint32_t(256 + n++);
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// Decodes a token text to bytes; false when a code point stands for no byte.
bool text_to_bytes(std::string_view text, std::string* out) {
  out->clear();
  size_t pos = 0;
  while (pos < text.size()) {
    const int b = byte_of_code_point(unicode::decode_lenient(text, &pos));
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

constexpr size_t kMaxCacheEntries = 1 << 18;
constexpr size_t kMaxCachedWord = 256;  // longer words are rare: not worth the memory

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return byte_map().to_cp[b]; }

int byte_of_code_point(uint32_t cp) { return cp < 0x144 ? byte_map().from_cp[cp] : -1; }

std::string Bpe::decode_token_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const int b = byte_of_code_point(unicode::decode_lenient(text, &pos));
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    out += "[UNK_BYTE_0x";
    char hex[3];
    for (size_t i = start; i < pos; ++i) {
      std::snprintf(hex, sizeof hex, "%02x", static_cast<uint8_t>(text[i]));
      out += hex;
    }
    out.append(text.data(), text.size());
    out += "]";
  }
  return out;
}

Bpe::Bpe(const Vocab& vocab, const std::vector<std::string_view>& merges, PreInfo pre)
    : vocab_(vocab), pre_(pre), n_vocab_(vocab.size()) {
  token_bytes_.resize(n_vocab_);
  piece_of_bytes_.reserve(n_vocab_ + merges.size() / 8);
  std::vector<bool> decodable(n_vocab_);
  for (int32_t id = 0; id < n_vocab_; ++id) decodable[id] = text_to_bytes(vocab.text(id), &token_bytes_[id]);
  // token_bytes_ is final now: its strings can be keys. Later ids overwrite earlier ones, as
  // llama.cpp's text -> id map does.
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (decodable[id]) piece_of_bytes_[token_bytes_[id]] = id;
  }
  for (int b = 0; b < 256; ++b) {
    byte_piece_[b] = intern(std::string(1, static_cast<char>(b)));
    single_char_token_[b] = vocab.find(std::string(1, static_cast<char>(b)));
  }
  merges_.reserve(merges.size());
  std::string left, right;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    const size_t space = m.find(' ', 1);
    if (space == std::string_view::npos) continue;
    if (!text_to_bytes(m.substr(0, space), &left) || !text_to_bytes(m.substr(space + 1), &right)) continue;
    const int32_t a = intern(left), b = intern(right);
    const int32_t merged = intern(left + right);
    merges_.emplace(key(a, b), Merge{static_cast<int32_t>(rank), merged});  // the first rank wins
  }
}

int32_t Bpe::intern(const std::string& bytes) {
  auto it = piece_of_bytes_.find(bytes);
  if (it != piece_of_bytes_.end()) return it->second;
  extra_bytes_.push_back(std::make_unique<std::string>(bytes));
  const int32_t id = n_vocab_ + static_cast<int32_t>(extra_bytes_.size()) - 1;
  piece_of_bytes_.emplace(*extra_bytes_.back(), id);
  return id;
}

void Bpe::encode(std::string_view text, std::vector<int32_t>* out) const {
  const std::vector<uint32_t> cps = unicode::to_code_points(text);
  std::vector<uint32_t> lengths;
  pretokenize(pre_.type, cps.data(), cps.size(), &lengths);
  std::string word;
  size_t start = 0;
  for (uint32_t len : lengths) {
    // Re-encoding turns ill-formed input into U+FFFD, as llama.cpp does.
    word.clear();
    for (size_t i = start; i < start + len; ++i) unicode::append_utf8(cps[i], &word);
    start += len;
    encode_word(word, out);
  }
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  if (pre_.ignore_merges) {
    auto it = piece_of_bytes_.find(word);
    if (it != piece_of_bytes_.end() && it->second < n_vocab_) {
      out->push_back(it->second);
      return;
    }
  }
  if (word.size() > kMaxCachedWord) return merge_word(word, out);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>* out) const {
  struct Sym {
    int32_t piece, prev, next;
    uint32_t start, len;
  };
  struct Cand {
    int32_t rank, left, right, left_piece, right_piece, result;
  };
  // Lowest rank first; on a tie the leftmost pair (llama.cpp's order).
  auto later = [](const Cand& a, const Cand& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); };
  std::priority_queue<Cand, std::vector<Cand>, decltype(later)> queue(later);

  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Sym> sym(n);
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = Sym{byte_piece_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, uint32_t(i), 1};
  }
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    auto it = merges_.find(key(sym[l].piece, sym[r].piece));
    if (it != merges_.end()) queue.push(Cand{it->second.rank, l, r, sym[l].piece, sym[r].piece, it->second.result});
  };
  for (int32_t i = 1; i < n; ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    // Stale when either side has merged since (its piece grew) or was absorbed (len 0).
    if (l.len == 0 || r.len == 0 || l.piece != c.left_piece || r.piece != c.right_piece) continue;
    l.piece = c.result;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }

  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[i].next) {
    const Sym& s = sym[i];
    if (s.piece < n_vocab_) {
      out->push_back(s.piece);
      continue;
    }
    // Not a token: llama.cpp looks up each byte of the piece's GPT-2 text on its own.
    std::string text;
    for (uint32_t k = s.start; k < s.start + s.len; ++k) {
      unicode::append_utf8(byte_to_code_point(static_cast<uint8_t>(word[k])), &text);
    }
    for (char ch : text) {
      const int32_t t = single_char_token_[static_cast<uint8_t>(ch)];
      if (t >= 0) out->push_back(t);
    }
  }
}

}  // namespace qd::tok
