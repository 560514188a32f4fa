// Generated token ids turned into text one token at a time, for streaming and stop strings.
// TokenStreamSource opens one TokenStream per generation; TokenizerStreams is the real source
// (the tokenizer's StreamDecoder, which never splits a UTF-8 character).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace qd {

// One generation's text, token by token.
class TokenStream {
 public:
  virtual ~TokenStream() = default;
  // Text completed by this token (may be empty while a UTF-8 character is incomplete).
  virtual std::string push(int32_t id) = 0;
  // Whatever is still held back at the end of generation.
  virtual std::string flush() = 0;
};

// Opens a TokenStream per generation.
class TokenStreamSource {
 public:
  virtual ~TokenStreamSource() = default;
  // A fresh stream; `context` is the prompt, for decoders whose first piece depends on it.
  virtual std::unique_ptr<TokenStream> open(const std::vector<int32_t>& context) const = 0;
};

// Streams through the tokenizer's StreamDecoder.
class TokenizerStreams : public TokenStreamSource {
 public:
  explicit TokenizerStreams(std::shared_ptr<const Tokenizer> tok) : tok_(std::move(tok)) {}
  std::unique_ptr<TokenStream> open(const std::vector<int32_t>& context) const override;
  const Tokenizer& tokenizer() const { return *tok_; }

 private:
  std::shared_ptr<const Tokenizer> tok_;
};

}  // namespace qd
