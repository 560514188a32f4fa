// Test double: each token id maps to a fixed piece of text.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/token_stream.h"

namespace qd::testing {

class PieceStreams : public TokenStreamSource {
 public:
  explicit PieceStreams(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::unique_ptr<TokenStream> open(const std::vector<int32_t>&) const override;

 private:
  std::vector<std::string> pieces_;
};

}  // namespace qd::testing
