#include "sampling/logit_processor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace qd::sampling {

void SamplerParams::validate() const {
  auto bad = [](const std::string& what) { throw ArgError("sampler: " + what); };
  if (!std::isfinite(temperature)) bad("temperature must be a finite number");
  if (temperature < 0.0f) bad("temperature must be >= 0 (0: greedy), got " + std::to_string(temperature));
  if (top_k < 0) bad("top_k must be >= 0 (0 turns it off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p < 1.0f)) bad("min_p must be in [0, 1), got " + std::to_string(min_p));
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty))
    bad("repeat_penalty must be > 0 (1 turns it off), got " + std::to_string(repeat_penalty));
  if (!std::isfinite(presence_penalty)) bad("presence_penalty must be finite");
  if (!std::isfinite(frequency_penalty)) bad("frequency_penalty must be finite");
  if (penalty_last_n < -1) bad("penalty_last_n must be >= -1");
}

LogitProcessor::LogitProcessor(const SamplerParams& params) : params_(params) { params_.validate(); }

const float* LogitProcessor::penalize(const float* logits, int n_vocab, const int32_t* history, size_t n_history,
                                     int n_allowed, int* n_out) {
  const int n = (n_allowed < 0 || n_allowed > n_vocab) ? n_vocab : n_allowed;
  *n_out = n;
  if (!params_.has_penalties() || n_history == 0) return logits;  // no copy on the common path
  work_.assign(logits, logits + n);
  size_t w = params_.penalty_last_n < 0 ? n_history : std::min(n_history, (size_t)params_.penalty_last_n);
  window_.assign(history + n_history - w, history + n_history);
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    size_t j = i;
    while (j < window_.size() && window_[j] == window_[i]) j++;
    const int32_t id = window_[i];
    const float count = (float)(j - i);
    i = j;
    if (id < 0 || id >= n) continue;
    float& l = work_[id];
    l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    l -= count * params_.frequency_penalty + params_.presence_penalty;
  }
  return work_.data();
}

int32_t LogitProcessor::argmax(const float* logits, int n_vocab, const int32_t* history, size_t n_history,
                               float* top_prob, int n_allowed) {
  int n;
  const float* l = penalize(logits, n_vocab, history, n_history, n_allowed, &n);
  int32_t best = 0;
  for (int i = 1; i < n; i++)
    if (l[i] > l[best]) best = i;
  if (top_prob) {
    // Terms more than 24 nats below the top add under 4e-11 each (under 1e-5 over 200k ids):
    // skipping their exp makes this a compare per id for a peaked distribution.
    double sum = 0.0;
    const float m = l[best];
    for (int i = 0; i < n; i++) {
      const float d = l[i] - m;
      if (d > -24.0f) sum += std::exp((double)d);
    }
    *top_prob = (float)(1.0 / sum);
  }
  return best;
}

// Keeps the k largest candidates (ties broken toward the lower id, so the set is well defined).
void LogitProcessor::keep_top_k(int k) {
  auto higher = [](const Cand& a, const Cand& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); };
  std::nth_element(cand_.begin(), cand_.begin() + (k - 1), cand_.end(), higher);
  cand_.resize(k);
}

// Keeps the shortest prefix (by falling probability) whose mass reaches top_p. Sorting all
// 150k entries costs more than the rest of processing, so sort a growing head instead.
void LogitProcessor::keep_top_p() {
  auto higher = [](const Cand& a, const Cand& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); };
  double total = 0.0;
  for (const Cand& c : cand_) total += c.p;
  const double target = params_.top_p * total;
  size_t m = std::min<size_t>(cand_.size(), 64);
  for (;;) {
    std::partial_sort(cand_.begin(), cand_.begin() + m, cand_.end(), higher);
    double cum = 0.0;
    for (size_t i = 0; i < m; i++) {
      cum += cand_[i].p;
      if (cum >= target) {
        cand_.resize(i + 1);
        return;
      }
    }
    if (m == cand_.size()) return;  // rounding: keep everything
    m = std::min(cand_.size(), m * 4);
  }
}

void LogitProcessor::process(const float* logits, int n_vocab, const int32_t* history, size_t n_history,
                             Distribution* out, int n_allowed) {
  if (params_.greedy()) {
    out->set_one_hot(argmax(logits, n_vocab, history, n_history, nullptr, n_allowed));
    return;
  }
  int n;
  const float* l = penalize(logits, n_vocab, history, n_history, n_allowed, &n);
  cand_.resize(n);
  for (int i = 0; i < n; i++) cand_[i] = {l[i], i};
  if (params_.top_k > 0 && params_.top_k < n) keep_top_k(params_.top_k);

  // Softmax at temperature T over the remaining candidates (unnormalized; normalized at the end).
  float mx = -INFINITY;
  for (const Cand& c : cand_) mx = std::max(mx, c.p);
  const float inv_t = 1.0f / params_.temperature;
  for (Cand& c : cand_) c.p = std::exp((c.p - mx) * inv_t);

  if (params_.top_p < 1.0f) keep_top_p();
  if (params_.min_p > 0.0f) {
    float pmax = 0.0f;
    for (const Cand& c : cand_) pmax = std::max(pmax, c.p);
    const float cut = params_.min_p * pmax;
    cand_.erase(std::remove_if(cand_.begin(), cand_.end(), [cut](const Cand& c) { return c.p < cut; }), cand_.end());
  }

  double sum = 0.0;
  for (const Cand& c : cand_) sum += c.p;
  out->ids.resize(cand_.size());
  out->probs.resize(cand_.size());
  for (size_t i = 0; i < cand_.size(); i++) {
    out->ids[i] = cand_[i].id;
    out->probs[i] = (float)(cand_[i].p / sum);
  }
}

int32_t sample(const Distribution& d, Rng& rng) {
  if (d.size() == 0) throw Error("sample: empty distribution");
  double total = 0.0;
  for (float p : d.probs) total += p;
  const double u = rng.uniform() * total;
  double cum = 0.0;
  for (size_t i = 0; i < d.size(); i++) {
    cum += d.probs[i];
    if (u < cum) return d.ids[i];
  }
  // Rounding left u at the very top: the last token with nonzero probability.
  for (size_t i = d.size(); i-- > 0;)
    if (d.probs[i] > 0.0f) return d.ids[i];
  return d.ids.back();
}

}  // namespace qd::sampling
