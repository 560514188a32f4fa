#include "speculative/verifier.h"

#include "common/error.h"
#include "sampling/race.h"

namespace qd::speculative {

bool accept_draft_token(const Distribution& p, float q_x, int32_t x, sampling::Rng& rng) {
  const float p_x = p.prob(x);  // p: target
  return rng.uniform() * q_x < p_x;
}

int32_t sample_residual(const Distribution& p, const Distribution* q, int32_t q_one_hot, sampling::Rng& rng,
                        std::vector<float>& dense) {
  // dense[id] = p(id) - q(id) over p's support; ids outside it have max(0 - q, 0) = 0.
  for (size_t i = 0; i < p.size(); i++) dense[p.ids[i]] = p.probs[i];
  if (q) {
    for (size_t i = 0; i < q->size(); i++)
      if ((size_t)q->ids[i] < dense.size()) dense[q->ids[i]] -= q->probs[i];
  } else if (q_one_hot >= 0 && (size_t)q_one_hot < dense.size()) {
    dense[q_one_hot] -= 1.0f;
  }
  double total = 0.0;
  for (int32_t id : p.ids) total += dense[id] > 0.0f ? dense[id] : 0.0f;
  int32_t chosen = -1;
  if (total > 0.0) {
    const double u = rng.uniform() * total;
    double cum = 0.0;
    for (int32_t id : p.ids) {
      if (dense[id] <= 0.0f) continue;
      cum += dense[id];
      chosen = id;
      if (u < cum) break;
    }
  }
  for (int32_t id : p.ids) dense[id] = 0.0f;
  if (q)
    for (int32_t id : q->ids)
      if ((size_t)id < dense.size()) dense[id] = 0.0f;
  if (q_one_hot >= 0 && (size_t)q_one_hot < dense.size()) dense[q_one_hot] = 0.0f;
  // No positive residual only happens through rounding (p == q): p itself is then the answer.
  return chosen >= 0 ? chosen : sampling::sample(p, rng);
}

Verdict Verifier::verify(const float* logits, int n_vocab, const std::vector<int32_t>& history, const Draft& draft,
                         sampling::Rng& rng) {
  const int k = (int)draft.tokens.size();
  const bool sampled_q = !draft.q.empty();
  if (sampled_q && (int)draft.q.size() != k) throw Error("verify: draft has " + std::to_string(k) +
                                                          " tokens but " + std::to_string(draft.q.size()) + " q rows");
  ctx_.assign(history.begin(), history.end());
  Verdict v;
  for (int i = 0; i <= k; i++) {
    const float* row = logits + (size_t)i * n_vocab;
    if (params().greedy() || race_) {
      // The target's own token at this position, as plain decoding picks it (the argmax, or the
      // seeded race's draw): the draft is kept where it agrees and only saves the target passes.
      int32_t t;
      if (params().greedy()) {
        t = proc_.argmax(row, n_vocab, ctx_.data(), ctx_.size());
      } else {
        proc_.process(row, n_vocab, ctx_.data(), ctx_.size(), &p_);
        t = sampling::sample_race(p_, params().seed, history.size() + i);
      }
      if (i < k && t == draft.tokens[i]) {
        ctx_.push_back(t);
        continue;
      }
      v.n_accepted = i;
      v.token = t;
      return v;
    }
    proc_.process(row, n_vocab, ctx_.data(), ctx_.size(), &p_);
    if (i == k) {  // every draft token accepted: a bonus token from p
      v.n_accepted = k;
      v.token = sampling::sample(p_, rng);
      return v;
    }
    const int32_t x = draft.tokens[i];
    const float q_x = sampled_q ? draft.q[i].prob(x) : 1.0f;
    if (accept_draft_token(p_, q_x, x, rng)) {
      ctx_.push_back(x);
      continue;
    }
    if ((int)dense_.size() < n_vocab) dense_.assign(n_vocab, 0.0f);
    v.n_accepted = i;
    v.token = sample_residual(p_, sampled_q ? &draft.q[i] : nullptr, sampled_q ? -1 : x, rng, dense_);
    return v;
  }
  return v;  // unreachable: the loop returns at i == k
}

}  // namespace qd::speculative
