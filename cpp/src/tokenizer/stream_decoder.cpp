#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace qd {

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool special) : tok_(tok), special_(special) {}

std::string StreamDecoder::feed(int32_t id) {
  if (id < 0 || id >= tok_.n_vocab()) tok_.token_to_piece(id);  // throws the ArgError
  if (first_token_) {
    first_token_ = false;
    strip_space_ = id == tok_.bos_id();
  }
  if (tok_.renders(id, special_)) pending_ += tok_.piece_ref(id);
  if (strip_space_ && !pending_.empty()) {
    if (pending_[0] == ' ') pending_.erase(0, 1);
    strip_space_ = false;  // only the very first byte of the text is concerned
  }
  // Emit everything but a trailing character that more bytes could still complete. Up to
  // there the UTF-8 decoder is at a character boundary, so sanitising the parts separately
  // gives the same text as sanitising the whole.
  const size_t keep = unicode::incomplete_tail(pending_);
  std::string out = unicode::sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = unicode::sanitize_utf8(pending_);
  reset();
  return out;
}

void StreamDecoder::reset() {
  pending_.clear();
  first_token_ = true;
  strip_space_ = false;
}

}  // namespace qd
