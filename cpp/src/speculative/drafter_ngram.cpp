#include "speculative/drafter_ngram.h"

#include <string>

#include "common/error.h"

namespace qd::speculative {

NgramDrafter::NgramDrafter(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {
  if (n_min < 1 || n_max < n_min)
    throw ArgError("ngram drafter: need 1 <= ngram_min <= ngram_max, got " + std::to_string(n_min) + ", " +
                   std::to_string(n_max));
}

int NgramDrafter::find(const std::vector<int32_t>& history, int before) const {
  const int len = (int)history.size();
  for (int n = std::min(n_max_, len - 1); n >= n_min_; n--) {
    const int32_t* suffix = history.data() + len - n;
    // Most recent earlier occurrence: its continuation is the likeliest to repeat.
    for (int start = std::min(len - n - 1, before - n - 1); start >= 0; start--) {
      int j = 0;
      while (j < n && history[start + j] == suffix[j]) j++;
      if (j == n) return start + n;
    }
  }
  return -1;
}

void NgramDrafter::propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) {
  propose_before(history, kAnywhere, req, out);
}

void NgramDrafter::propose_before(const std::vector<int32_t>& history, int before, const DraftRequest& req,
                                  Draft* out) const {
  out->clear();
  if (req.k <= 0) return;
  const int at = find(history, before);
  if (at < 0) return;
  for (int i = at; i < (int)history.size() && (int)out->tokens.size() < req.k; i++) {
    if (history[i] >= req.n_target_vocab) break;
    out->tokens.push_back(history[i]);
  }
}

}  // namespace qd::speculative
