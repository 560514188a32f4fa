#include "speculative/drafter_ngram.h"

#include <string>

#include "common/error.h"

namespace qd::speculative {
namespace {

// Past this run a longer one predicts no better; stopping there bounds a scan of copies at
// O(len * kEnough) on periodic text, O(len) on most.
constexpr int kEnough = 64;

// How many tokens before `at` match the history's last ones, up to kEnough (at < size).
int run_before(const std::vector<int32_t>& history, int at) {
  const int len = (int)history.size();
  int run = 0;
  while (run < kEnough && at - 1 - run >= 0 && history[at - 1 - run] == history[len - 1 - run]) run++;
  return run;
}

}  // namespace

NgramDrafter::NgramDrafter(int n_min, int n_max, int min_run) : n_min_(n_min), n_max_(n_max), min_run_(min_run) {
  if (n_min < 1 || n_max < n_min)
    throw ArgError("ngram drafter: need 1 <= ngram_min <= ngram_max, got " + std::to_string(n_min) + ", " +
                   std::to_string(n_max));
}

int NgramDrafter::find(const std::vector<int32_t>& history, int before) const {
  if (min_run_ > 0) return find_copy(history, before);
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

int NgramDrafter::find_copy(const std::vector<int32_t>& history, int before) const {
  const int len = (int)history.size();
  const int32_t last = len > 0 ? history[len - 1] : 0;
  int best = -1, best_run = min_run_ - 1;
  // `at` is where a continuation would start; history[at - 1] must equal the last token.
  for (int at = std::min(len - 1, before - 1); at >= 1 && best_run < kEnough; at--) {
    if (history[at - 1] != last) continue;
    const int run = run_before(history, at);
    if (run > best_run) best = at, best_run = run;
  }
  return best;
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
  // No more tokens than the match is long: a 2-token chance match in new text proposes a right
  // first token about half the time and rarely more, a copy (a long run) all of them.
  const int k = std::min(req.k, run_before(history, at));
  for (int i = at; i < (int)history.size() && (int)out->tokens.size() < k; i++) {
    if (history[i] >= req.n_target_vocab) break;
    out->tokens.push_back(history[i]);
  }
}

}  // namespace qd::speculative
