// Per-call drafting (GenerateOptions::drafter): which of the drafters an engine loaded drafts
// for one generation. An engine can always draft by n-gram lookup (it costs no memory) or not
// at all; a draft model, self-speculation and hybrid only when the engine loaded them.
#pragma once
#include <memory>
#include <string>

#include "speculative/drafter.h"
#include "speculative/drafter_ngram.h"

namespace qd::speculative {

class DrafterChoice {
 public:
  // main: the engine's own drafter (may be null), outliving this.
  DrafterChoice(Drafter* main, int ngram_min, int ngram_max);
  // The drafter `name` means for this engine: "" its own, "none" (null), "ngram", "model",
  // "self", "hybrid", "mtp". ArgError for a name it did not load (or does not know).
  Drafter* pick(const std::string& name);

 private:
  Drafter* main_;
  int ngram_min_, ngram_max_;
  std::unique_ptr<NgramDrafter> ngram_;  // made on first use when main has none
};

}  // namespace qd::speculative
