// Turning generated token ids into text, one token at a time, for streaming and stop strings.
// The tokenizer's streaming detokenizer is the real implementation (engine_text.cpp); tests use
// PieceText, a fixed string per id.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qd::spec {

class TokenStream {
 public:
  virtual ~TokenStream() = default;
  // Text completed by this token (may be empty while a UTF-8 character is incomplete).
  virtual std::string push(int32_t id) = 0;
  // Whatever is still held back at the end of generation.
  virtual std::string flush() = 0;
};

class TokenText {
 public:
  virtual ~TokenText() = default;
  // A fresh decoder; `context` is the prompt, for decoders whose first piece depends on it.
  virtual std::unique_ptr<TokenStream> stream(const std::vector<int32_t>& context) const = 0;
};

// Each id maps to a fixed piece of text (tests).
class PieceText : public TokenText {
 public:
  explicit PieceText(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::unique_ptr<TokenStream> stream(const std::vector<int32_t>&) const override;

 private:
  std::vector<std::string> pieces_;
};

}  // namespace qd::spec
