// Verification of a draft against the target's logits for [last] + draft.
//
// Greedy: accept draft tokens while they equal the target's argmax, then emit the target's
// token. Sampling (Leviathan et al. / Chen et al.): accept draft token x with probability
// min(1, p(x) / q(x)), where p is the TARGET distribution and q the DRAFT distribution x was
// sampled from (both after the same logit processing); on rejection emit a sample of
// normalize(max(p - q, 0)); if every draft token is accepted, emit a bonus sample from p.
// The emitted sequence then has exactly the target's distribution.
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/distribution.h"
#include "sampling/logit_processor.h"
#include "sampling/rng.h"

namespace qd::speculative {

using sampling::Distribution;

// A drafter's proposal. q[i] is the distribution tokens[i] was drawn from; an empty q means the
// proposal is deterministic given the history (greedy drafting, n-gram lookup): q is one-hot.
struct Draft {
  std::vector<int32_t> tokens;
  std::vector<Distribution> q;
  int source = 0;  // which drafter produced it (hybrid: 0 model, 1 n-gram)
  // The first n_sure tokens had a top probability of at least p_min, the rest (at most the last,
  // which ended the draft) less; -1 for a drafter without a confidence: all sure.
  int n_sure = -1;
  // Measured cost, < 0 when not measured: a model drafter's first token also pays for bringing
  // its KV cache up to date (usually two tokens in one batch), the later ones one eval each.
  double first_seconds = -1.0;
  double step_seconds = -1.0;
  double catch_up_seconds = -1.0;  // a catch-up on many tokens (after plain steps), not in first_seconds
  int catch_up_tokens = 0;         // ... the tokens it evaluated beyond a usual first token's

  void clear() {
    tokens.clear();
    q.clear();
    source = 0;
    n_sure = -1;
    first_seconds = step_seconds = catch_up_seconds = -1.0;
    catch_up_tokens = 0;
  }
};

// One step's outcome: the first n_accepted draft tokens are kept, then `token` (the target's
// correction or bonus token) follows them.
struct Verdict {
  int n_accepted = 0;
  int32_t token = -1;
};

// The speculative-sampling acceptance test for draft token x: u * q(x) < p(x), u ~ U[0,1).
bool accept_draft_token(const Distribution& p, float q_x, int32_t x, sampling::Rng& rng);

// A sample of normalize(max(p - q, 0)) (q may be one-hot: pass q_one_hot >= 0 and q == nullptr).
// dense: scratch of n_vocab floats, all zero on entry and on return.
int32_t sample_residual(const Distribution& p, const Distribution* q, int32_t q_one_hot, sampling::Rng& rng,
                        std::vector<float>& dense);

// Greedy: the draft's agreeing prefix, then the target's argmax. Sampled: speculative sampling
// (accept_draft_token, then sample_residual or a bonus token from p), or with `race` (a seeded
// generation) the target's own race draw at each position (sampling/race.h), the draft's agreeing
// prefix kept: every emitted token is then the one the target alone draws there, whatever was
// drafted.
class Verifier {
 public:
  explicit Verifier(const sampling::SamplerParams& params, bool race = false) : proc_(params), race_(race) {}

  const sampling::SamplerParams& params() const { return proc_.params(); }
  bool race() const { return race_; }  // sampled tokens are race draws (a seeded generation)

  // logits: [draft.tokens.size() + 1][n_vocab] for [last] + draft. history: every token before
  // the draft (its last element is `last`).
  Verdict verify(const float* logits, int n_vocab, const std::vector<int32_t>& history, const Draft& draft,
                 sampling::Rng& rng);

 private:
  sampling::LogitProcessor proc_;
  bool race_ = false;
  Distribution p_;
  std::vector<int32_t> ctx_;  // history + accepted draft tokens, for the penalties
  std::vector<float> dense_;
};

}  // namespace qd::speculative
