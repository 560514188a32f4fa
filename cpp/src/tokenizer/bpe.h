// Byte-level BPE (tokenizer.ggml.model = gpt2): ranked merges applied to each pre-tokenized word.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace qd::tok {

// GPT-2's reversible map between bytes and printable code points (bytes_to_unicode()).
uint32_t byte_to_code_point(uint8_t b);
int byte_of_code_point(uint32_t cp);  // -1 when cp stands for no byte

class Bpe {
 public:
  // merges: "left right" strings in rank order, in the byte-to-code-point alphabet.
  Bpe(const Vocab& vocab, const std::vector<std::string_view>& merges, PreInfo pre);

  // Tokenizes text that holds no special tokens; appends ids.
  void encode(std::string_view text, std::vector<int32_t>* out) const;

  // The bytes a token stands for (its text mapped back through bytes_to_unicode()). A code
  // point outside the map is kept as llama.cpp does: "[UNK_BYTE_0x..<text>]".
  static std::string decode_token_text(std::string_view text);

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // piece id of the merged bytes
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  int32_t intern(const std::string& bytes);  // piece id for a byte string, made when missing
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;
  void merge_word(std::string_view word, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  PreInfo pre_;
  int32_t n_vocab_;
  // Pieces: byte strings that BPE can build. Ids below n_vocab are tokens; the rest are merge
  // operands or results that the vocabulary lacks.
  std::vector<std::unique_ptr<std::string>> extra_bytes_;
  std::unordered_map<std::string_view, int32_t> piece_of_bytes_;
  std::vector<std::string> token_bytes_;  // [n_vocab] decoded texts (keys of piece_of_bytes_)
  int32_t byte_piece_[256];
  int32_t single_char_token_[256];  // token whose GGUF text is that one byte, or -1
  std::unordered_map<uint64_t, Merge> merges_;

  // Words repeat a lot in real text: remember their tokens (guarded: encode is const).
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace qd::tok
