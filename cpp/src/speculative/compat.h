// Can this draft model draft for this target? Token ids pass between them unchanged, so they
// must mean the same text: same tokenizer model and pre-tokenizer, the same token text for
// every shared id, the same BOS / EOS / EOT ids (pre-tokenizer names that are aliases of one
// pre-tokenizer, as deepseek-r1-qwen of qwen2, count as the same). Vocabularies may differ in
// special tokens appended past the shared range, any number of them (the drafter never proposes
// an id the target lacks), or by up to 128 padding ids when the files give no token types. Two
// files without any tokenizer metadata pass: their ids are plain numbers. A refusal lists
// everything that differs.
#pragma once
#include "gguf/gguf_file.h"

namespace qd::speculative {

constexpr int kMaxVocabPadding = 128;

// Throws IncompatibleModelsError saying what differs.
void check_compatible(const gguf::File& target, const gguf::File& draft);

}  // namespace qd::speculative
