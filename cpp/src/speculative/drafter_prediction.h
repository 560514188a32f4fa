// Predicted outputs: the caller's guess at the output (the file being edited, say) as a draft
// source. The generated text is matched against the prediction and the prediction's
// continuation proposed; where it no longer matches (the edited lines), the fallback drafter
// (the call's configured one, or none) proposes instead, until the text matches again.
//
// Matching, in order: nothing generated yet, the prediction's start. Continuity: the tokens
// emitted since the last proposal are the prediction's (the draft was accepted, and the
// target's own token agreed): go on from there. A substitution: they are, but for the target's
// last token (an edited word: "height" became "h"): guess the prediction goes on after it,
// once; a guess that fails at once is not repeated. Otherwise the longest suffix of the
// generated tokens (n_max down to n_min) that occurs in the prediction, the occurrence nearest
// the expected position (prediction lines repeat: "    return x"). The prediction is one more draft-length source, after the
// fallback's, so the controller learns its acceptance apart from the fallback's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "speculative/drafter.h"

namespace qd::speculative {

class PredictionDrafter : public Drafter {
 public:
  // prediction: token ids of the expected output. fallback: may be null (plain steps where the
  // prediction does not match); must outlive this drafter. prompt_len: history tokens that
  // precede the generation (matching only looks at what was generated).
  PredictionDrafter(std::vector<int32_t> prediction, Drafter* fallback, size_t prompt_len, int n_min = 2,
                    int n_max = 8);
  const char* name() const override { return "prediction"; }
  int n_sources() const override { return source() + 1; }
  const char* source_name(int s) const override;
  // The fallback's sources as the fallback has them; the prediction's own costs a lookup.
  double cost_hint(int s) const override { return s < source() ? fallback_->cost_hint(s) : 0.0; }
  int max_catch_up(int s) const override { return s < source() ? fallback_->max_catch_up(s) : 0; }
  int next_source(const std::vector<int32_t>& history) override;
  int alternative_source(int s) const override { return s < source() ? fallback_->alternative_source(s) : -1; }
  // A continuity match: the text has followed the prediction since the last proposal.
  bool draft_in_full() const override { return have_cached_ && cached_.at >= 0 && cached_.continuing; }
  void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) override;
  bool prefill(const std::vector<int32_t>& history, int max_tokens, int* evaluated) override {
    return fallback_ ? fallback_->prefill(history, max_tokens, evaluated) : true;
  }

  // The prediction's draft-length source (the fallback's come first).
  int source() const { return fallback_ ? fallback_->n_sources() : 0; }
  struct Match {
    int at = -1;         // index in the prediction where the continuation starts, -1: none
    bool guess = false;  // a substitution guess
    bool continuing = false;  // the tokens since the last proposal were the prediction's
  };
  // Where the prediction continues history.
  Match match(const std::vector<int32_t>& history) const;

 private:
  // The prediction index the generated text has reached if it followed the last match.
  long expected(size_t history_len) const;
  int search(const std::vector<int32_t>& history, long g, long e) const;

  std::vector<int32_t> pred_;
  Drafter* fallback_;
  size_t prompt_len_;
  int n_min_, n_max_;
  size_t anchor_history_ = 0;  // the last match: history length then ...
  long anchor_pred_ = -1;      // ... and the prediction index continuing it (-1: none yet)
  bool anchor_guess_ = false;  // ... and whether it was a substitution guess
  size_t cached_len_ = 0;      // next_source()'s match, for the propose() on the same history
  Match cached_;
  bool have_cached_ = false;
};

}  // namespace qd::speculative
