// SentencePiece-style BPE (tokenizer.ggml.model = llama): the highest-scoring adjacent pair
// that is itself a token merges first; characters that end up in no token become byte tokens.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace qd::tok {

class Spm {
 public:
  Spm(const Vocab& vocab, int32_t unk_id);

  // Tokenizes text whose spaces are already escaped as U+2581; appends ids.
  void encode(std::string_view text, std::vector<int32_t>* out) const;

 private:
  const Vocab& vocab_;
  int32_t unk_id_;
  int32_t byte_token_[256];  // <0xNN>, else the one-byte token, else unk (-1 when none)
};

}  // namespace qd::tok
