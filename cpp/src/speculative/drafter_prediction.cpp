#include "speculative/drafter_prediction.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/error.h"

namespace qd::speculative {

PredictionDrafter::PredictionDrafter(std::vector<int32_t> prediction, Drafter* fallback, size_t prompt_len, int n_min,
                                     int n_max)
    : pred_(std::move(prediction)), fallback_(fallback), prompt_len_(prompt_len), n_min_(n_min), n_max_(n_max) {
  if (n_min < 1 || n_max < n_min)
    throw ArgError("prediction drafter: need 1 <= n_min <= n_max, got " + std::to_string(n_min) + ", " +
                   std::to_string(n_max));
}

const char* PredictionDrafter::source_name(int s) const {
  return s == source() ? name() : fallback_->source_name(s);
}

long PredictionDrafter::expected(size_t history_len) const {
  if (anchor_pred_ < 0) return (long)(history_len - prompt_len_);  // no match yet: token for token
  return anchor_pred_ + (long)(history_len - anchor_history_);
}

PredictionDrafter::Match PredictionDrafter::match(const std::vector<int32_t>& history) const {
  const long P = (long)pred_.size();
  if (history.size() < prompt_len_ || P == 0) return {};
  const long g = (long)(history.size() - prompt_len_);  // generated tokens
  if (g == 0) return {0, false, false};
  const long e = expected(history.size());
  if (anchor_pred_ >= 0 && e <= P) {
    // The tokens emitted since the last proposal against the prediction from where it proposed.
    const long d = (long)(history.size() - anchor_history_);
    const int32_t* since = history.data() + anchor_history_;
    const int32_t* from = pred_.data() + anchor_pred_;
    if (std::equal(since, since + d, from)) return {e < P ? (int)e : -1, false, true};
    if (!anchor_guess_ && std::equal(since, since + d - 1, from) && e < P) return {(int)e, true, false};
  }
  return {search(history, g, e), false, false};
}

int PredictionDrafter::search(const std::vector<int32_t>& history, long g, long e) const {
  const long P = (long)pred_.size();
  const int32_t* gen_end = history.data() + history.size();
  for (long n = std::min(g, (long)n_max_); n >= n_min_; n--) {
    const int32_t* suffix = gen_end - n;
    long best = -1;
    for (long start = 0; start + n < P; start++) {
      if (pred_[start] != suffix[0] || !std::equal(suffix, gen_end, pred_.data() + start)) continue;
      const long at = start + n;
      if (best < 0 || std::labs(at - e) < std::labs(best - e)) best = at;
    }
    if (best >= 0) return (int)best;
  }
  return -1;
}

int PredictionDrafter::next_source(const std::vector<int32_t>& history) {
  cached_ = match(history);
  cached_len_ = history.size();
  have_cached_ = true;
  if (cached_.at >= 0 || !fallback_) return source();
  return fallback_->next_source(history);
}

void PredictionDrafter::propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) {
  const Match m = have_cached_ && cached_len_ == history.size() ? cached_ : match(history);
  have_cached_ = false;
  out->clear();
  if (m.at >= 0) {
    anchor_history_ = history.size();
    anchor_pred_ = m.at;
    anchor_guess_ = m.guess;
    for (int i = m.at; i < (int)pred_.size() && (int)out->tokens.size() < req.k; i++) {
      if (pred_[i] < 0 || pred_[i] >= req.n_target_vocab) break;
      out->tokens.push_back(pred_[i]);
    }
    out->source = source();
    return;
  }
  if (fallback_) fallback_->propose(history, req, out);
}

}  // namespace qd::speculative
