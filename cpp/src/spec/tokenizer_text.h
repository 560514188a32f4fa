// Generated text through the tokenizer's streaming decoder (never splits a UTF-8 character).
#pragma once
#include <memory>

#include "spec/token_text.h"
#include "tokenizer/tokenizer.h"

namespace qd::spec {

class TokenizerText : public TokenText {
 public:
  explicit TokenizerText(std::shared_ptr<const Tokenizer> tok) : tok_(std::move(tok)) {}
  std::unique_ptr<TokenStream> stream(const std::vector<int32_t>& context) const override;
  const Tokenizer& tokenizer() const { return *tok_; }

 private:
  std::shared_ptr<const Tokenizer> tok_;
};

}  // namespace qd::spec
