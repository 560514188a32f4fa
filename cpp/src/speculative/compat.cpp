#include "speculative/compat.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "tokenizer/pretokenizer.h"

namespace qd::speculative {

namespace {

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += (unsigned char)c < 0x20 ? '?' : c;
  return out + (s.size() > 40 ? "...'" : "'");
}

std::string show(const std::optional<std::string>& s) { return s ? quoted(*s) : "(none)"; }
std::string show(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "(none)"; }

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
constexpr int64_t kNormal = 1, kByte = 6;

// The token types of a file, or empty when it has none (every token then counts as normal).
std::vector<int64_t> token_types(const gguf::File& f, size_t n_tokens) {
  const gguf::Value* v = f.get_array("tokenizer.ggml.token_type", gguf::ValueType::INT32);
  std::vector<int64_t> out;
  if (!v || v->count != n_tokens) return out;
  out.reserve(n_tokens);
  for (uint64_t i = 0; i < v->count; i++) out.push_back(v->element(i).i64);
  return out;
}

// Special: control, user-defined, unused or unknown tokens, which text never tokenizes into by
// the BPE merges (only by their exact spelling, when special tokens are parsed).
bool special(const std::vector<int64_t>& types, size_t i) {
  return !types.empty() && types[i] != kNormal && types[i] != kByte;
}

// Two pre-tokenizer names are the same when they name one pre-tokenizer (llama.cpp's aliases:
// "deepseek-r1-qwen" splits text as "qwen2" does).
bool same_pre(const std::optional<std::string>& t, const std::optional<std::string>& d) {
  if (t == d) return true;
  if (!t || !d) return false;
  const tok::PreInfo a = tok::pre_info_from_name(*t), b = tok::pre_info_from_name(*d);
  return a.known && b.known && a.type == b.type && a.ignore_merges == b.ignore_merges;
}

}  // namespace

void check_compatible(const gguf::File& target, const gguf::File& draft) {
  std::vector<std::string> diffs;  // everything that differs, reported together
  auto fail = [&](std::string what) {
    for (const std::string& d : diffs) what = d + "; " + what;
    throw IncompatibleModelsError("draft model " + draft.path() + " cannot draft for target " + target.path() + ": " +
                                  what);
  };
  {
    const auto t = target.get_string("tokenizer.ggml.model"), d = draft.get_string("tokenizer.ggml.model");
    if (t != d) diffs.push_back("different tokenizer.ggml.model: target " + show(t) + ", draft " + show(d));
    const auto tp = target.get_string("tokenizer.ggml.pre"), dp = draft.get_string("tokenizer.ggml.pre");
    if (!same_pre(tp, dp)) diffs.push_back("different tokenizer.ggml.pre: target " + show(tp) + ", draft " + show(dp));
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const auto t = target.get_int(key), d = draft.get_int(key);
    if (t != d) diffs.push_back(std::string("different ") + key + ": target " + show(t) + ", draft " + show(d));
  }
  const gguf::Value* tt = target.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  const gguf::Value* dt = draft.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  if (!tt && !dt) {  // neither has a tokenizer: ids are just ids (test models)
    if (!diffs.empty()) fail("the tokenizers differ");
    return;
  }
  if (!tt || !dt) fail(std::string("no tokenizer.ggml.tokens in the ") + (tt ? "draft" : "target"));
  const size_t nt = tt->strings.size(), nd = dt->strings.size(), n = std::min(nt, nd);
  const std::vector<int64_t> t_types = token_types(target, nt), d_types = token_types(draft, nd);

  // Ids past the shared range: the drafter never proposes an id the target lacks, and feeds the
  // draft a stand-in for a target id it lacks, so extra ids are harmless when text never
  // tokenizes into them: special tokens (any number), or (files without token types) at most
  // kMaxVocabPadding padding ids.
  const bool target_longer = nt > nd;
  const std::vector<int64_t>& long_types = target_longer ? t_types : d_types;
  const gguf::Value* longer = target_longer ? tt : dt;
  const size_t n_extra = (target_longer ? nt : nd) - n;
  if (n_extra > 0) {
    const std::string sizes = "vocabulary sizes " + std::to_string(nt) + " (target) and " + std::to_string(nd) +
                              " (draft)";
    if (long_types.empty()) {
      if (n_extra > (size_t)kMaxVocabPadding) {
        fail(sizes + " differ by more than " + std::to_string(kMaxVocabPadding) +
             " and the files give no token types to tell special tokens from text");
      }
    } else {
      for (size_t i = n; i < n + n_extra; i++) {
        if (!special(long_types, i)) {
          fail(sizes + " differ, and id " + std::to_string(i) + " past the shared range is the " +
               (target_longer ? "target" : "draft") + "'s ordinary token " + quoted(longer->strings[i]));
        }
      }
    }
  }

  // The shared range: every id must be the same token. Differences in special tokens alone are
  // reported as a list (e.g. DeepSeek-R1-Distill-Qwen against Qwen2.5, which redefines Qwen's
  // special ids 151643..): their ids would mean other control tokens on the two sides.
  std::vector<size_t> special_diffs;
  for (size_t i = 0; i < n; i++) {
    if (tt->strings[i] == dt->strings[i]) continue;
    if (special(t_types, i) && special(d_types, i)) {
      special_diffs.push_back(i);
      continue;
    }
    fail("token " + std::to_string(i) + " is " + quoted(tt->strings[i]) + " in the target but " +
         quoted(dt->strings[i]) + " in the draft");
  }
  if (!special_diffs.empty()) {
    std::string list;
    for (size_t j = 0; j < special_diffs.size() && j < 4; j++) {
      const size_t i = special_diffs[j];
      list += (j ? ", " : "") + std::to_string(i) + " " + quoted(tt->strings[i]) + " vs " + quoted(dt->strings[i]);
    }
    if (special_diffs.size() > 4) list += ", ...";
    fail(std::to_string(special_diffs.size()) + " special token(s) of the shared ids 0.." + std::to_string(n - 1) +
         " differ (ids " + std::to_string(special_diffs.front()) + ".." + std::to_string(special_diffs.back()) +
         ", target vs draft: " + list + "); ids are passed unchanged between the models, so this pair is refused");
  }
  if (!diffs.empty()) fail("the rest of the vocabulary is the same");
}

}  // namespace qd::speculative
