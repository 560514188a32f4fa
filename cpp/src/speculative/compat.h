// Can this draft model draft for this target? Token ids pass between them unchanged, so they
// must mean the same text: same tokenizer model and pre-tokenizer, the same token text for
// every shared id, the same BOS / EOS / EOT ids. Vocabulary sizes may differ by up to 128
// padding ids (the drafter never proposes an id the target lacks). Two files without any
// tokenizer metadata pass: their ids are plain numbers.
#pragma once
#include "gguf/gguf_file.h"

namespace qd::speculative {

constexpr int kMaxVocabPadding = 128;

// Throws IncompatibleModelsError saying what differs.
void check_compatible(const gguf::File& target, const gguf::File& draft);

}  // namespace qd::speculative
