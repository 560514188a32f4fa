// Drafting with a language model: a small draft model, or the target's own weights run with
// layers skipped (self-speculation, over the target's own KV cache: no catch-up, no prefill).
// The drafter samples from q (the same logit processing as the verifier; greedy settings give
// the q = one-hot case) and ends a draft at its first token whose top probability is below p_min,
// that token included: its logits are paid already (the catch-up's, or the step before's), and
// one more verify row costs little next to a token won, where the token after it would cost a
// full draft step to be kept only if both are.
#pragma once
#include <memory>
#include <string>

#include "speculative/drafter.h"
#include "speculative/drafter_ngram.h"
#include "speculative/logit_source.h"

namespace qd::speculative {

class ModelDrafter : public Drafter {
 public:
  // max_lag: when the drafter is further behind the history than this (after plain steps),
  // it restarts from the last max_lag tokens instead of evaluating them all.
  // cost_hint: a drafted token's expected cost as a share of a target step (< 0 unknown).
  // window: prefill reads at most the last `window` tokens of a prompt (0 or kWholePrompt: all).
  static constexpr int kWholePrompt = 1 << 30;
  ModelDrafter(std::unique_ptr<LogitSource> model, std::string name, int max_lag = 64, double cost_hint = -1.0,
               int window = kWholePrompt);
  const char* name() const override { return name_.c_str(); }
  // With a lookup (set_lookup), source 1 drafts by n-gram lookup in the text the draft's cache
  // does not hold: a long prompt's start, before the window (a file the answer rewrites).
  int n_sources() const override { return lookup_ ? 2 : 1; }
  const char* source_name(int s) const override { return s == 1 ? "lookup" : name(); }
  int next_source(const std::vector<int32_t>& history) override;
  int alternative_source(int s) const override { return s == 1 ? 0 : -1; }
  double cost_hint(int s) const override { return s == 1 ? 0.0 : cost_hint_; }
  int max_catch_up(int s) const override { return s == 1 || model_->shared_prefix() >= 0 ? 0 : max_lag_; }
  // Drafts from source 1 where the text copies what the draft model did not read (runs of
  // NgramDrafter::kCopyRun tokens or more); for a draft model with a window of its own cache.
  void set_lookup() { lookup_ = std::make_unique<NgramDrafter>(NgramDrafter::copies()); }
  void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) override;
  // Evaluates up to max_tokens more of the prompt: the last `window` tokens of history[:-1], or
  // all of them after what the cache already holds when that is no more (a chat's next turn).
  bool prefill(const std::vector<int32_t>& history, int max_tokens, int* evaluated) override;
  // Only before the first generation: the cache is emptied after it.
  double time_step() override;

  LogitSource& model() { return *model_; }

 private:
  // Brings the KV cache in line with history[:-1] plus history.back(), leaving the logits
  // after history.back() in logits_.
  // Returns the number of tokens evaluated and their wall time.
  int catch_up(const std::vector<int32_t>& history, double* seconds);
  // Drops cached tokens that differ from history (keeping at most history.size() - 1).
  void sync(const std::vector<int32_t>& history);
  void reset(size_t offset);
  // model_->eval of target ids, each id the draft's vocabulary lacks (a target's appended
  // special token, compat.h) fed as id 0: a stand-in only lowers acceptance, never exactness.
  void eval_ids(const int32_t* ids, int n, float* logits, bool last_only);

  std::unique_ptr<LogitSource> model_;
  std::unique_ptr<NgramDrafter> lookup_;  // null: no lookup source
  std::string name_;
  int max_lag_;
  double cost_hint_;
  int window_;
  size_t offset_ = 0;            // cached_[i] is history[offset_ + i]
  std::vector<int32_t> cached_;  // tokens in the draft's KV cache, in order
  std::vector<float> logits_;    // [n_vocab]
  std::vector<int32_t> ctx_;     // history + tokens drafted so far (penalty window)
  std::vector<int32_t> stand_in_;  // eval_ids' copy when some id is outside the draft vocabulary
  double step_seconds_ = -1.0;   // last measured time of one single-token eval, < 0 unknown
};

}  // namespace qd::speculative
