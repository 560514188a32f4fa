#include "sampling/logit_processor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

namespace {
// exp(x) for x <= 0: Cephes' expf (within about 1 ulp of it), and 0 below -87.3 where a float
// turns subnormal. Plain float arithmetic without branches or calls, so that the loop in exp_row
// vectorizes at the baseline target (with -fno-trapping-math, CMakeLists.txt) with the same
// results on every ISA; std::exp, one call per id, cost about 5 ns each over a 150k-id vocabulary
// (0.8 ms a token, 3 % of a 1.5B's decode step, and a tenth of a 0.5B draft's).
inline float exp_nonpositive(float x) {
  const float big = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float lo = std::max(x, -87.3f);
  const float n = (lo * 1.44269504088896341f + big) - big;
  float r = lo - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t keep = -(int32_t)(x >= -87.3f);  // all ones, or 0: a scale of 0 below the range
  const int32_t bits = (((int32_t)n + 127) << 23) & keep;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}

// out[i] = exp((l[i] - mx) * inv_t), every l[i] <= mx.
void exp_row(const float* __restrict l, int n, float mx, float inv_t, float* __restrict out) {
  for (int i = 0; i < n; i++) out[i] = exp_nonpositive((l[i] - mx) * inv_t);
}

// The largest of x[0..n) (n >= 1): 8 running maxima, so that no chain of dependent compares
// bounds the loop (the maximum is the same in any order).
float row_max(const float* x, int n) {
  float m[8];
  for (int j = 0; j < 8; j++) m[j] = x[0];
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) m[j] = std::max(m[j], x[i + j]);
  for (; i < n; i++) m[0] = std::max(m[0], x[i]);
  for (int j = 1; j < 8; j++) m[0] = std::max(m[0], m[j]);
  return m[0];
}

// The sum of x[0..n) in double, over 4 running sums added in a fixed order at the end.
double row_sum(const float* x, int n) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  int i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; j++) s[j] += x[i + j];
  for (; i < n; i++) s[0] += x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}
}  // namespace

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
  if (n <= 0) return out->clear();
  const float inv_t = 1.0f / params_.temperature;
  // Softmax at temperature T over the candidates (unnormalized; normalized at the end).
  if (params_.top_k > 0 && params_.top_k < n) {  // the k highest logits, then their softmax
    cand_.resize(n);
    for (int i = 0; i < n; i++) cand_[i] = {l[i], i};
    keep_top_k(params_.top_k);
    float mx = -INFINITY;
    for (const Cand& c : cand_) mx = std::max(mx, c.p);
    for (Cand& c : cand_) c.p = exp_nonpositive((c.p - mx) * inv_t);
  } else {
    exp_.resize(n);
    float* e = exp_.data();
    exp_row(l, n, row_max(l, n), inv_t, e);
    if (params_.top_p >= 1.0f && params_.min_p <= 0.0f) {  // every id: no candidate list to filter
      const double inv_sum = 1.0 / row_sum(e, n);
      out->ids.resize(n);
      out->probs.resize(n);
      int32_t* ids = out->ids.data();
      float* probs = out->probs.data();
      for (int i = 0; i < n; i++) ids[i] = i;
      for (int i = 0; i < n; i++) probs[i] = (float)(e[i] * inv_sum);
      return;
    }
    cand_.resize(n);
    for (int i = 0; i < n; i++) cand_[i] = {exp_[i], i};
  }

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
  // The inverse CDF a block of ids at a time (each block's sum by row_sum, which pipelines), then
  // id by id inside the block where u falls: a chain of dependent adds per id costs 0.3 ms over
  // a 150k-id vocabulary.
  constexpr int kBlock = 256;
  const int n = (int)d.size();
  const float* p = d.probs.data();
  double total = 0.0;
  for (int b = 0; b < n; b += kBlock) total += row_sum(p + b, std::min(kBlock, n - b));
  const double u = rng.uniform() * total;
  double cum = 0.0;
  for (int b = 0; b < n; b += kBlock) {
    const int m = std::min(kBlock, n - b);
    const double block = row_sum(p + b, m);
    if (!(u < cum + block)) {
      cum += block;
      continue;
    }
    for (int i = b; i < b + m; i++) {
      cum += p[i];
      if (u < cum) return d.ids[i];
    }
    // Rounding: u lies past the block's ids summed one by one; its last id of nonzero probability.
    for (int i = b + m; i-- > b;)
      if (p[i] > 0.0f) return d.ids[i];
  }
  // Rounding left u at the very top: the last token with nonzero probability.
  for (size_t i = d.size(); i-- > 0;)
    if (d.probs[i] > 0.0f) return d.ids[i];
  return d.ids.back();
}

}  // namespace qd::sampling
