#include "speculative/compat.h"

#include <cstdint>
#include <optional>
#include <string>

#include "common/error.h"

namespace qd::speculative {

namespace {

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += (unsigned char)c < 0x20 ? '?' : c;
  return out + (s.size() > 40 ? "...'" : "'");
}

std::string show(const std::optional<std::string>& s) { return s ? quoted(*s) : "(none)"; }
std::string show(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "(none)"; }

}  // namespace

void check_compatible(const gguf::File& target, const gguf::File& draft) {
  auto fail = [&](const std::string& what) {
    throw IncompatibleModelsError("draft model " + draft.path() + " cannot draft for target " + target.path() + ": " +
                                  what);
  };
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre"}) {
    const auto t = target.get_string(key), d = draft.get_string(key);
    if (t != d) fail(std::string("different ") + key + ": target " + show(t) + ", draft " + show(d));
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const auto t = target.get_int(key), d = draft.get_int(key);
    if (t != d) fail(std::string("different ") + key + ": target " + show(t) + ", draft " + show(d));
  }
  const gguf::Value* tt = target.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  const gguf::Value* dt = draft.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  if (!tt && !dt) return;  // neither has a tokenizer: ids are just ids (test models)
  if (!tt || !dt) fail(std::string("no tokenizer.ggml.tokens in the ") + (tt ? "draft" : "target"));
  const int64_t nt = (int64_t)tt->strings.size(), nd = (int64_t)dt->strings.size();
  if (nt - nd > kMaxVocabPadding || nd - nt > kMaxVocabPadding)
    fail("vocabulary sizes " + std::to_string(nt) + " (target) and " + std::to_string(nd) +
         " (draft) differ by more than " + std::to_string(kMaxVocabPadding));
  for (int64_t i = 0; i < std::min(nt, nd); i++) {
    if (tt->strings[i] != dt->strings[i])
      fail("token " + std::to_string(i) + " is " + quoted(tt->strings[i]) + " in the target but " +
           quoted(dt->strings[i]) + " in the draft");
  }
}

}  // namespace qd::speculative
