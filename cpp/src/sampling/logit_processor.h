// Logit processing: penalties -> temperature -> top_k -> softmax -> top_p -> min_p.
//
// The verifier runs this on the target's logits (p) and the drafter on the draft's logits (q)
// with the same settings and the same history, which the speculative-sampling rule requires.
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/distribution.h"
#include "sampling/rng.h"
#include "sampling/sampler_params.h"

namespace qd::sampling {

class LogitProcessor {
 public:
  explicit LogitProcessor(const SamplerParams& params);

  const SamplerParams& params() const { return params_; }

  // Next-token distribution from logits[n_vocab] after `history` (penalty window).
  // Only ids < n_allowed can get probability (a draft vocabulary may be padded past the
  // target's). Greedy settings give a one-hot distribution at the argmax.
  void process(const float* logits, int n_vocab, const int32_t* history, size_t n_history, Distribution* out,
               int n_allowed = -1);

  // Greedy choice: argmax of the penalized logits (lowest id on ties). When top_prob is given it
  // receives softmax(penalized logits)[argmax], the drafter's confidence for p_min.
  int32_t argmax(const float* logits, int n_vocab, const int32_t* history, size_t n_history, float* top_prob = nullptr,
                 int n_allowed = -1);

 private:
  struct Cand {
    float p;
    int32_t id;
  };
  // The logits with penalties applied (a copy in work_ when there are any; logits itself
  // otherwise); *n gets the number of usable ids.
  const float* penalize(const float* logits, int n_vocab, const int32_t* history, size_t n_history, int n_allowed,
                        int* n);
  void keep_top_k(int n);
  void keep_top_p();

  SamplerParams params_;
  std::vector<float> work_;  // [n_vocab] penalized logits (only when penalties apply)
  std::vector<Cand> cand_;   // candidates still in the running
  std::vector<float> exp_;   // [n_vocab] unnormalized softmax (without top_k)
  std::vector<int32_t> window_;
};

// Inverse-CDF sample from d with one uniform draw.
int32_t sample(const Distribution& d, Rng& rng);

}  // namespace qd::sampling
