// Drafters propose the next few tokens cheaply; the target then checks them in one batch.
//
//   NgramDrafter   prompt lookup over the whole context (no model, no extra memory)
//   ModelDrafter   a small model (reading a window of a long prompt, drafting from the rest by
//                  lookup), or the target itself with layers skipped (self-speculation)
//   HybridDrafter  the n-gram proposal or the model's where there is one, the model's otherwise
//                  (the "hybrid" drafter, and "self" beside its skipped layers)
//   PredictionDrafter  the caller's predicted output where it matches, another drafter elsewhere
// "No drafter" is plain decoding through the same loop (the generator takes a null Drafter).
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/logit_processor.h"
#include "sampling/rng.h"
#include "speculative/verifier.h"

namespace qd::speculative {

// What a drafter needs to draw its tokens the way the verifier expects them.
struct DraftRequest {
  int k = 0;                                 // at most this many tokens
  const sampling::SamplerParams* params = nullptr;
  sampling::Rng* rng = nullptr;              // the generator's, so one seed fixes the whole run
  float p_min = 0.0f;                        // end the draft at the first token whose top probability is below
  int n_target_vocab = 0;                    // never propose ids >= this
  int source = 0;                            // the source to draw from: next_source()'s, or its alternative
  // Sampled tokens drawn by the exponential race at their position (sampling/race.h), with
  // params->seed, instead of from rng: a seeded generation, verified by the same race.
  bool race = false;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  // Number of proposal sources whose acceptance and cost are tracked separately.
  virtual int n_sources() const { return 1; }
  // What source s is called in stats ("draft", "ngram", "prediction"...).
  virtual const char* source_name(int s) const { return name(); }
  // The source the next proposal for `history` will come from (hybrid: 1 if n-gram matches).
  virtual int next_source(const std::vector<int32_t>& history) { return 0; }
  // Another source that could propose in place of next_source()'s `source` for the same
  // history, or -1 (hybrid: the model, when the n-gram matched). The generator drafts from
  // whichever the draft-length controller expects to yield more tokens per second.
  virtual int alternative_source(int source) const { return -1; }
  // What one drafted token of `source` is expected to cost as a share of a target decode step,
  // before any timing (the draft-length controller's starting point); < 0 when unknown.
  virtual double cost_hint(int source) const { return -1.0; }
  // The most tokens a proposal after plain steps catches up on (a model drafter's KV cache
  // lags the text while the target decodes alone); 0 for drafters without a cache.
  virtual int max_catch_up(int source) const { return 0; }
  // After next_source(): true when the next proposal is all but certain and free to make (a
  // prediction the text has followed so far), so the step drafts the most it may instead of
  // the length the controller picks from timings (which a load spike can mislead).
  virtual bool draft_in_full() const { return false; }
  // Proposes up to req.k tokens from req.source continuing history (history is never empty).
  // A drafter with a KV cache brings it in line with history first: it drops what the target
  // rejected and evaluates what it did not produce itself.
  virtual void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) = 0;
  // Prompt processing: evaluates up to max_tokens more of history[:-1] into the drafter's KV
  // cache (a batched pass, no logits), adding their number to *evaluated. Returns true when
  // nothing is left to evaluate.
  virtual bool prefill(const std::vector<int32_t>& history, int max_tokens, int* evaluated) { return true; }
  // The engine's warm-up at load: one draft token's step of source 0 run and timed, leaving
  // the drafter as it was (an empty cache); seconds, or < 0 for a drafter with nothing to time.
  virtual double time_step() { return -1.0; }
};

}  // namespace qd::speculative
