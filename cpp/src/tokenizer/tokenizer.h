// Tokenizer built from a GGUF file's tokenizer.ggml.* metadata (no weights are touched).
//
// Basic usage:
//   auto tok = qd::Tokenizer::from_file("model.gguf");
//   std::vector<int32_t> ids = tok->encode("Hello", /*add_special=*/true);
//   std::string text = tok->decode(ids);
//   qd::StreamDecoder stream(*tok);
//   for (int32_t id : ids) std::cout << stream.feed(id);
//   std::cout << stream.flush();
//
// Two vocabulary kinds: SentencePiece-style (tokenizer.ggml.model = "llama", e.g. Gemma-3) and
// byte-level BPE ("gpt2", e.g. Qwen2.5, SmolLM2) with the pre-tokenizer named by
// tokenizer.ggml.pre. Token ids and text match llama.cpp's.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qd {

namespace gguf {
class File;
}

// GGUF's tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,      // <bos>, <|im_end|>, ...: text only with parse_special / special
  UserDefined = 4,  // always matched in raw text, always rendered
  Unused = 5,
  Byte = 6,         // <0xNN>
};

class Tokenizer {
 public:
  explicit Tokenizer(const gguf::File& file);  // throws GGUFError / UnsupportedError
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Opens the file only for its metadata.
  static std::shared_ptr<Tokenizer> from_file(const std::string& path);

  // add_special: BOS/EOS where the metadata asks for them (tokenizer.ggml.add_bos_token, ...).
  // parse_special: recognise control-token text such as "<|im_start|>" in `text`.
  std::vector<int32_t> encode(std::string_view text, bool add_special = false, bool parse_special = false) const;

  // Concatenated pieces as well-formed UTF-8 (ill-formed bytes become U+FFFD, as Python's
  // bytes.decode("utf-8", "replace")). Control tokens render only when special is true. A
  // leading space right after a leading BOS is dropped (the SentencePiece convention, as
  // llama.cpp's Python binding does). Throws ArgError for an id out of range.
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  // The raw bytes of one token (may be part of a UTF-8 character). Control tokens give their
  // text when special is true, else nothing.
  std::string token_to_piece(int32_t id, bool special = true) const;

  int32_t n_vocab() const;
  TokenType token_type(int32_t id) const;  // ArgError when out of range
  std::string_view token_text(int32_t id) const;  // the text stored in the GGUF
  int32_t bos_id() const;  // -1 when none
  int32_t eos_id() const;
  int32_t eot_id() const;
  int32_t unk_id() const;
  int32_t pad_id() const;
  const std::vector<int32_t>& eog_ids() const;  // every end-of-generation id, ascending
  bool is_eog(int32_t id) const;
  bool add_bos() const;
  bool add_eos() const;
  const std::string& model_name() const;  // tokenizer.ggml.model
  const std::string& pre_name() const;    // tokenizer.ggml.pre ("" for SentencePiece)
  const std::optional<std::string>& chat_template() const;  // tokenizer.chat_template

  struct Impl;  // internal

  // Internal: the rendering rule shared with StreamDecoder.
  const std::string& piece_ref(int32_t id) const;  // special form, unchecked id
  bool renders(int32_t id, bool special) const;

 private:
  std::unique_ptr<Impl> impl_;
  void check_id(int32_t id) const;
};

// Turns ids into text one at a time. feed() returns only complete UTF-8 characters; a
// character split across tokens waits for its last byte. The pieces joined (with flush())
// equal Tokenizer::decode of all ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false);
  std::string feed(int32_t id);  // ArgError for an id out of range
  std::string flush();           // what is held back, ill-formed bytes as U+FFFD; then reset
  void reset();

 private:
  const Tokenizer& tok_;
  bool special_;
  bool first_token_ = true;
  bool strip_space_ = false;  // the first token was BOS: drop one leading space
  std::string pending_;       // bytes of an incomplete character
};

}  // namespace qd
