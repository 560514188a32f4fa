// Prompt-lookup drafting: find the most recent earlier occurrence of the longest suffix of the
// history (n_max down to n_min tokens) and propose the tokens that followed it. It reads the
// history in place, so it costs no memory and no model.
#pragma once
#include "speculative/drafter.h"

namespace qd::speculative {

class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int n_min = 2, int n_max = 4);
  const char* name() const override { return "ngram"; }
  double cost_hint(int) const override { return 0.0; }  // a lookup: nothing next to a model step
  void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) override;

  // Start of the continuation after the best match, or -1 when there is none; with `before`,
  // only a match whose continuation starts before that index.
  int find(const std::vector<int32_t>& history, int before = kAnywhere) const;
  // propose() from the match find(history, before) gives.
  void propose_before(const std::vector<int32_t>& history, int before, const DraftRequest& req, Draft* out) const;
  static constexpr int kAnywhere = 1 << 30;

 private:
  int n_min_, n_max_;
};

}  // namespace qd::speculative
