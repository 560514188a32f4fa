#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace qd {

using tok::Vocab;

struct Tokenizer::Impl {
  std::string model, pre;
  bool is_spm = false;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  std::vector<int32_t> eog;
  std::optional<std::string> chat_template;
  Vocab vocab;
  std::vector<std::string> pieces;  // [n_vocab] what each token renders as (special form)
  std::unique_ptr<tok::SpecialTokens> special;
  std::unique_ptr<tok::Bpe> bpe;
  std::unique_ptr<tok::Spm> spm;
};

namespace {

void warn_unknown_pre_once(const std::string& pre) {
  static std::mutex m;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(m);
  if (warned.insert(pre).second) {
    std::fprintf(stderr, "quickdraft: unknown tokenizer.ggml.pre '%s': using the default pre-tokenizer\n", pre.c_str());
  }
}

int32_t find_first(const Vocab& v, std::initializer_list<const char*> texts) {
  for (const char* t : texts) {
    const int32_t id = v.find(t);
    if (id >= 0) return id;
  }
  return -1;
}

// Reads tokenizer.ggml.<key>_token_id; keeps `id` when absent or out of range (llama.cpp).
void read_id(const gguf::File& f, const char* key, int32_t n_vocab, int32_t* id) {
  if (*id >= n_vocab) *id = -1;
  const std::optional<int64_t> v = f.get_int(std::string("tokenizer.ggml.") + key);
  if (v && *v >= 0 && *v < n_vocab) *id = static_cast<int32_t>(*v);
}

void load_vocab(const gguf::File& f, Vocab* v) {
  const gguf::Value* tokens = f.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  if (!tokens) throw GGUFError(f.path() + ": no tokenizer.ggml.tokens: the file has no vocabulary");
  const size_t n = tokens->strings.size();
  if (n == 0 || n > 0x7FFFFFF0u) throw GGUFError(f.path() + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  auto checked_array = [&](const char* key, gguf::ValueType want) -> const gguf::Value* {
    const gguf::Value* a = f.find(key);
    if (!a) return nullptr;
    if (a->type != gguf::ValueType::ARRAY || a->elem_type != want || a->count != n) {
      throw GGUFError(f.path() + ": metadata '" + key + "' must be an array of " + gguf::value_type_name(want) +
                      " with one entry per token (" + std::to_string(n) + ")");
    }
    return a;
  };
  const gguf::Value* scores = checked_array("tokenizer.ggml.scores", gguf::ValueType::FLOAT32);
  const gguf::Value* types = checked_array("tokenizer.ggml.token_type", gguf::ValueType::INT32);

  size_t total = 0;
  for (const auto& s : tokens->strings) total += s.empty() ? 24 : s.size();
  if (total > 0xFFFFFFF0u) throw GGUFError(f.path() + ": tokenizer.ggml.tokens holds more than 4 GiB of text");
  v->blob.reserve(total);
  v->offsets.resize(n + 1);
  v->scores.assign(n, 0.0f);
  v->types.assign(n, TokenType::Normal);
  for (size_t i = 0; i < n; ++i) {
    v->offsets[i] = static_cast<uint32_t>(v->blob.size());
    const std::string_view s = tokens->strings[i];
    if (s.empty()) {
      v->blob += "[EMPTY_" + std::to_string(i) + "]";  // llama.cpp's stand-in text
    } else {
      v->blob.append(s.data(), s.size());
    }
    if (scores) v->scores[i] = static_cast<float>(scores->element(i).f64);
    if (types) {
      const int64_t t = types->element(i).i64;
      v->types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::Undefined;
    }
  }
  v->offsets[n] = static_cast<uint32_t>(v->blob.size());
  v->text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) v->text_to_id[v->text(static_cast<int32_t>(i))] = static_cast<int32_t>(i);
}

// DeepSeek's "<｜end▁of▁sentence｜>".
constexpr const char* kDeepseekEnd = "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>";

// End-of-generation and FIM tokens that llama.cpp recognises by their text; they are treated as
// control tokens whatever the file says.
void detect_special_ids(const gguf::File& f, Tokenizer::Impl* m) {
  Vocab& v = m->vocab;
  const int32_t n = v.size();
  auto make_control = [&](int32_t id) {
    if (id >= 0) v.types[id] = TokenType::Control;
  };
  read_id(f, "eot_token_id", n, &m->eot);
  read_id(f, "eom_token_id", n, &m->eom);
  if (m->eot < 0) {
    m->eot = find_first(v, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                            "<EOT>", "_<EOT>", "[EOT]", kDeepseekEnd, "<end_of_utterance>"});
    make_control(m->eot);
  }
  if (m->eom < 0) make_control(m->eom = find_first(v, {"<|eom_id|>"}));
  // FIM tokens are control tokens; pad, repo and file separator also end generation.
  auto fim = [&](const char* key, std::initializer_list<const char*> texts) {
    int32_t id = -1;
    read_id(f, key, n, &id);
    if (id < 0) make_control(id = find_first(v, texts));
    return id;
  };
  fim("fim_pre_token_id", {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xE2\x96\x81<PRE>",
                           "<|code_prefix|>", "<|prefix|>"});
  fim("fim_suf_token_id", {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xE2\x96\x81<SUF>",
                           "<|code_suffix|>", "<|suffix|>"});
  fim("fim_mid_token_id", {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xE2\x96\x81<MID>",
                           "<|code_middle|>", "<|middle|>"});
  const int32_t fim_pad = fim("fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  const int32_t fim_rep =
      fim("fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  const int32_t fim_sep = fim("fim_sep_token_id", {"<|file_sep|>"});

  std::set<int32_t> eog;
  for (int32_t id : {fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) eog.insert(id);
  }
  static const char* const kEogTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      kDeepseekEnd, "[e~["};
  for (const char* t : kEogTexts) {
    const int32_t id = v.find(t);
    if (id >= 0) {
      eog.insert(id);
      make_control(id);
    }
  }
  for (int32_t id : {m->eos, m->eot, m->eom}) {
    if (id >= 0) eog.insert(id);
  }
  m->eog.assign(eog.begin(), eog.end());
}

std::string render_piece(const Tokenizer::Impl& m, int32_t id) {
  const std::string_view text = m.vocab.text(id);
  switch (m.vocab.types[id]) {
    case TokenType::Control:
    case TokenType::Unknown:
    case TokenType::UserDefined:
      return std::string(text);
    case TokenType::Normal: {
      if (!m.is_spm) return tok::Bpe::decode_token_text(text);
      std::string out;  // U+2581 stands for a space
      for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
          out.push_back(' ');
          i += 2;
        } else {
          out.push_back(text[i]);
        }
      }
      return out;
    }
    case TokenType::Byte: {
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0) {
        return std::string(1, static_cast<char>(std::strtol(std::string(text.substr(3, 2)).c_str(), nullptr, 16)));
      }
      return std::string();
    }
    default:
      return std::string();  // unused and undefined tokens render as nothing
  }
}

}  // namespace

Tokenizer::Tokenizer(const gguf::File& f) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) throw GGUFError(f.path() + ": no tokenizer.ggml.model: the file has no tokenizer");
  m.model = *model;
  tok::PreInfo pre;
  if (m.model == "llama") {
    m.is_spm = true;
    m.bos = 1, m.eos = 2, m.unk = 0;
    m.add_bos = true, m.add_space_prefix = true;
  } else if (m.model == "gpt2") {
    m.pre = f.get_string("tokenizer.ggml.pre").value_or("");
    pre = tok::pre_info_from_name(m.pre);
    if (!pre.known) warn_unknown_pre_once(m.pre);
    m.bos = 11, m.eos = 11;
    m.add_bos = pre.add_bos;
  } else {
    throw UnsupportedError(f.path() + ": tokenizer.ggml.model '" + m.model +
                           "' is not supported (supported: 'llama' SentencePiece, 'gpt2' byte-level BPE)");
  }
  m.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(m.add_space_prefix);
  load_vocab(f, &m.vocab);
  const int32_t n = m.vocab.size();
  read_id(f, "bos_token_id", n, &m.bos);
  read_id(f, "eos_token_id", n, &m.eos);
  read_id(f, "unknown_token_id", n, &m.unk);
  read_id(f, "padding_token_id", n, &m.pad);
  m.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(m.add_bos);
  m.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(m.add_eos);
  m.chat_template = f.get_string("tokenizer.chat_template");
  detect_special_ids(f, &m);

  m.pieces.resize(n);
  for (int32_t id = 0; id < n; ++id) m.pieces[id] = render_piece(m, id);
  m.special = std::make_unique<tok::SpecialTokens>(m.vocab);
  if (m.is_spm) {
    m.spm = std::make_unique<tok::Spm>(m.vocab, m.unk);
  } else {
    const gguf::Value* merges = f.get_array("tokenizer.ggml.merges", gguf::ValueType::STRING);
    if (!merges) throw GGUFError(f.path() + ": a gpt2 tokenizer needs tokenizer.ggml.merges");
    m.bpe = std::make_unique<tok::Bpe>(m.vocab, merges->strings, pre);
  }
}

Tokenizer::~Tokenizer() = default;

std::shared_ptr<Tokenizer> Tokenizer::from_file(const std::string& path) {
  gguf::File f(path);
  return std::make_shared<Tokenizer>(f);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && m.add_bos && m.bos >= 0) out.push_back(m.bos);
  bool prev_special = true;  // SentencePiece adds its space prefix at the start and after a special token
  for (const tok::Fragment& f : m.special->split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.offset, f.length);
    if (m.is_spm) {
      std::string escaped;
      escaped.reserve(raw.size() + 8);
      if (m.add_space_prefix && prev_special) escaped += "\xE2\x96\x81";
      for (char c : raw) {
        if (c == ' ') {
          escaped += "\xE2\x96\x81";
        } else {
          escaped.push_back(c);
        }
      }
      m.spm->encode(escaped, &out);
    } else {
      m.bpe->encode(raw, &out);
    }
    prev_special = false;
  }
  if (add_special && m.add_eos && m.eos >= 0) out.push_back(m.eos);
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= impl_->vocab.size()) {
    throw ArgError("token id " + std::to_string(id) + " is out of range (vocabulary of " +
                   std::to_string(impl_->vocab.size()) + " tokens)");
  }
}

const std::string& Tokenizer::piece_ref(int32_t id) const { return impl_->pieces[id]; }

bool Tokenizer::renders(int32_t id, bool special) const {
  const TokenType t = impl_->vocab.types[id];
  return special || (t != TokenType::Control && t != TokenType::Unknown);
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  check_id(id);
  return renders(id, special) ? impl_->pieces[id] : std::string();
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  for (int32_t id : ids) check_id(id);
  std::string bytes;
  for (int32_t id : ids) {
    if (renders(id, special)) bytes += impl_->pieces[id];
  }
  if (!ids.empty() && ids[0] == impl_->bos && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  return unicode::sanitize_utf8(bytes);
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }
TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return impl_->vocab.types[id];
}
std::string_view Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return impl_->vocab.text(id);
}
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::eot_id() const { return impl_->eot; }
int32_t Tokenizer::unk_id() const { return impl_->unk; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog; }
bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id); }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
const std::string& Tokenizer::model_name() const { return impl_->model; }
const std::string& Tokenizer::pre_name() const { return impl_->pre; }
const std::optional<std::string>& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace qd
