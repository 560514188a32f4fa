// Prompt-lookup drafting: find the most recent earlier occurrence of the longest suffix of the
// history (n_max down to n_min tokens) and propose the tokens that followed it, no more of them
// than the match's run (the tokens before the match that agree with the history's end): on new
// text a 2-token chance match is right about half the time for its first token and rarely for
// more. It reads the history in place, so it costs no memory and no model.
//
// With min_run > 0 it drafts only copies: from the earlier place whose preceding tokens match
// the history's end for the longest run (at least min_run tokens; the most recent of equals).
// A lookup beside a draft model uses this mode (copies()). In new text the model drafts better
// than a match of 2-3 tokens, whose first proposed token was right 47-56 % of the time against
// 72-90 % from 8 tokens on and 99-100 % in text being copied (the 1.5B's greedy text on 15
// prompts: bench/ngram_runs.py, docs/benchmarks.md, eleventh session).
#pragma once
#include "speculative/drafter.h"

namespace qd::speculative {

class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int n_min = 2, int n_max = 4, int min_run = 0);
  const char* name() const override { return "ngram"; }
  double cost_hint(int) const override { return 0.0; }  // a lookup: nothing next to a model step
  void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) override;

  // Start of the continuation after the best match, or -1 when there is none; with `before`,
  // only a match whose continuation starts before that index.
  int find(const std::vector<int32_t>& history, int before = kAnywhere) const;
  // propose() from the match find(history, before) gives.
  void propose_before(const std::vector<int32_t>& history, int before, const DraftRequest& req, Draft* out) const;
  static constexpr int kAnywhere = 1 << 30;
  // The run that makes a match a copy, and a lookup that drafts only copies.
  static constexpr int kCopyRun = 8;
  static NgramDrafter copies() { return NgramDrafter(2, 4, kCopyRun); }

 private:
  int find_copy(const std::vector<int32_t>& history, int before) const;

  int n_min_, n_max_, min_run_;
};

}  // namespace qd::speculative
