#include "tokenizer/token_stream.h"

namespace qd {

namespace {
class DecoderStream : public TokenStream {
 public:
  explicit DecoderStream(const Tokenizer& tok) : dec_(tok) {}
  std::string push(int32_t id) override { return dec_.feed(id); }
  std::string flush() override { return dec_.flush(); }

 private:
  StreamDecoder dec_;
};
}  // namespace

// The generated text starts mid-sequence: a leading space of its first piece is real text
// (no BOS precedes it in this stream), so the decoder needs no context.
std::unique_ptr<TokenStream> TokenizerStreams::open(const std::vector<int32_t>&) const {
  return std::make_unique<DecoderStream>(*tok_);
}

}  // namespace qd
