// Pre-tokenizers of byte-level BPE vocabularies: the regexes named by tokenizer.ggml.pre,
// written out by hand over code points (std::regex is slow and knows no Unicode classes).
// Each follows llama.cpp's reading of the regex, so that word boundaries match it exactly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qd::tok {

enum class PreType {
  Default,  // [\p{P}$+<=>^~|]+ , then the GPT-2 regex, then \p{N}+, then [0-9]{3}
  Gpt2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  Smollm,   // \p{N} (each digit alone), then the GPT-2 regex (also starcoder, refact, ...)
  Qwen2,    // (?i:'s|..)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,   // as Qwen2 but \p{N}{1,3}
};

struct PreInfo {
  PreType type = PreType::Default;
  bool known = true;          // false: the name was not recognised (Default used)
  bool ignore_merges = false;  // a word that is itself a token is taken whole (llama3)
  bool add_bos = false;        // llama.cpp's default for tokenizer.ggml.add_bos_token
};

// Maps a tokenizer.ggml.pre name to its pre-tokenizer (llama.cpp's aliases included).
PreInfo pre_info_from_name(const std::string& name);

// Splits code points cp[0..n) into words; appends each word's length (in code points).
void pretokenize(PreType type, const uint32_t* cp, size_t n, std::vector<uint32_t>* lengths);

}  // namespace qd::tok
