#include "speculative/drafter_model.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "sampling/race.h"

namespace qd::speculative {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

ModelDrafter::ModelDrafter(std::unique_ptr<LogitSource> model, std::string name, int max_lag, double cost_hint,
                           int window)
    : model_(std::move(model)), name_(std::move(name)), max_lag_(max_lag), cost_hint_(cost_hint),
      window_(window == 0 ? kWholePrompt : window) {
  if (!model_) throw ArgError("ModelDrafter: no model");
  if (max_lag < 1) throw ArgError("ModelDrafter: max_lag must be >= 1");
  if (window < 0) throw ArgError("ModelDrafter: window must be >= 0 (0: the whole prompt)");
  logits_.resize(model_->n_vocab());
}

void ModelDrafter::eval_ids(const int32_t* ids, int n, float* logits, bool last_only) {
  const int32_t V = model_->n_vocab();
  if (std::any_of(ids, ids + n, [V](int32_t t) { return t >= V; })) {
    stand_in_.assign(ids, ids + n);
    for (int32_t& t : stand_in_) t = t >= V ? 0 : t;
    ids = stand_in_.data();
  }
  model_->eval(ids, n, logits, last_only);
}

void ModelDrafter::reset(size_t offset) {
  model_->truncate(0);
  cached_.clear();
  offset_ = offset;
}

void ModelDrafter::sync(const std::vector<int32_t>& history) {
  if (const int shared = model_->shared_prefix(); shared >= 0) {
    // The target's cache holds history[:shared] (the generator keeps it so): ours up to there.
    const size_t keep = std::min((size_t)shared, history.size() - 1);
    offset_ = 0;
    cached_.assign(history.begin(), history.begin() + keep);
    model_->truncate((int)keep);
    return;
  }
  if (offset_ + 1 > history.size()) return reset(0);
  size_t keep = 0;
  const size_t limit = std::min(cached_.size(), history.size() - 1 - offset_);
  while (keep < limit && cached_[keep] == history[offset_ + keep]) keep++;
  if (keep < cached_.size()) {
    if ((int)keep < model_->truncate_floor()) keep = 0;  // a recurrent draft model returns only to recent positions
    model_->truncate((int)keep);
    cached_.resize(keep);
  }
}

bool ModelDrafter::prefill(const std::vector<int32_t>& history, int max_tokens, int* evaluated) {
  // A long prompt's prefill would cost the draft model nearly as much time, relative to its
  // size, as it costs the target, before the first token: 3000 tokens took the 0.5B 11 s beside
  // the 1.5B's 27 s (forced AVX2, Zen 4), more than speculation wins back over hundreds of tokens.
  // The drafts need little of it: fixed drafts of 3 after that prompt accepted 85-88 % of tokens
  // reading its last 64, 256 or 1024 tokens, and 89-90 % reading it all. Any context is exact
  // for the verifier; a shorter one only lowers acceptance.
  const size_t want = history.size() - 1;  // the tokens to cache: the last one is fed by a draft
  const size_t start = want > (size_t)window_ ? want - (size_t)window_ : 0;
  sync(history);
  // Restart at the window when the cached text begins after it, or leaves more than the window
  // to read (a view of the target's cache, shared_prefix() >= 0, holds what it holds).
  if (model_->shared_prefix() < 0 && (offset_ > start || want - offset_ - cached_.size() > (size_t)window_)) {
    reset(start);
  }
  const size_t done = offset_ + cached_.size();
  const int todo = (int)(want - done);
  const int n = std::min(todo, max_tokens);
  if (n > 0) {
    eval_ids(history.data() + done, n, nullptr, false);
    cached_.insert(cached_.end(), history.begin() + done, history.begin() + done + n);
    *evaluated += n;
  }
  return n == todo;
}

double ModelDrafter::time_step() {
  reset(0);
  const int32_t id = 0;
  const double t0 = now();
  model_->eval(&id, 1, logits_.data(), /*last_only=*/true);
  const double seconds = now() - t0;
  reset(0);
  return seconds;
}

int ModelDrafter::catch_up(const std::vector<int32_t>& history, double* seconds) {
  // The cache keeps what it shares with history, but at least the last token is evaluated
  // again: its logits are the ones the next draft token comes from.
  sync(history);
  if (history.size() - offset_ - cached_.size() > (size_t)max_lag_) {
    // Far behind (after plain steps): catching up on everything would cost more than the
    // drafts can win back, so continue from the recent tokens only. Any q is exact for the
    // verifier; a shorter context only lowers acceptance.
    reset(history.size() - max_lag_);
  }
  const size_t keep = offset_ + cached_.size();
  const double t0 = now();
  eval_ids(history.data() + keep, (int)(history.size() - keep), logits_.data(), /*last_only=*/true);
  *seconds = now() - t0;
  cached_.insert(cached_.end(), history.begin() + keep, history.end());
  return (int)(history.size() - keep);
}

int ModelDrafter::next_source(const std::vector<int32_t>& history) {
  return lookup_ && offset_ > 0 && lookup_->find(history, (int)offset_) >= 0 ? 1 : 0;
}

void ModelDrafter::propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) {
  if (req.source == 1 && lookup_) {
    lookup_->propose_before(history, (int)offset_, req, out);
    out->source = 1;
    return;
  }
  out->clear();
  out->n_sure = 0;
  // Room for the drafted tokens we evaluate (all but the last) in the draft's own context.
  const int k = std::min(req.k, model_->n_ctx() - (int)history.size() + 1);
  if (k <= 0) return;
  double catch_up_seconds = 0.0, step_seconds = 0.0;
  const int n_caught_up = catch_up(history, &catch_up_seconds);
  int n_steps = 0;
  const int n_vocab = model_->n_vocab();
  const int n_allowed = std::min(n_vocab, req.n_target_vocab);
  sampling::LogitProcessor proc(*req.params);
  ctx_.assign(history.begin(), history.end());
  const bool greedy = req.params->greedy();
  Distribution q;
  const double t_loop = now();
  for (int i = 0; i < k; i++) {
    int32_t x;
    float top = 1.0f;
    if (greedy) {
      x = proc.argmax(logits_.data(), n_vocab, ctx_.data(), ctx_.size(), req.p_min > 0.0f ? &top : nullptr, n_allowed);
    } else {
      proc.process(logits_.data(), n_vocab, ctx_.data(), ctx_.size(), &q, n_allowed);
      top = q.max_prob();
      x = req.race ? sampling::sample_race(q, req.params->seed, history.size() + i) : sampling::sample(q, *req.rng);
    }
    out->tokens.push_back(x);
    if (!greedy) out->q.push_back(q);
    ctx_.push_back(x);
    // The last draft token is evaluated next step, if accepted. A token below p_min is proposed
    // (its logits are paid; one more verify row costs little next to the chance of a token won)
    // but ends the draft: what follows it would be drafted at a full step's cost and kept only
    // if it is.
    if (top >= req.p_min) out->n_sure = i + 1;
    if (i + 1 == k || top < req.p_min) break;
    const double t0 = now();
    model_->eval(&x, 1, logits_.data(), true);
    step_seconds += now() - t0;
    n_steps++;
    cached_.push_back(x);
  }
  // Costs as in steady state, where the catch-up is one or two tokens: a catch-up of many
  // (after plain steps) is reported apart, since only a draft from k = 0 pays it.
  const int n = (int)out->tokens.size();
  if (n == 0) return;
  const double choose = (now() - t_loop - step_seconds) / n;  // sampling, per token
  if (n_steps > 0) {
    step_seconds_ = step_seconds / n_steps;
    out->step_seconds = step_seconds_ + choose;
  }
  if (n_caught_up <= 2) {
    out->first_seconds = catch_up_seconds + choose;
    return;
  }
  if (step_seconds_ > 0.0) {
    out->first_seconds = step_seconds_ + choose;  // a low guess: the usual catch-up is 2 tokens
  } else {  // no single step timed yet: the catch-up's per-token cost (batched, so lower still)
    out->first_seconds = catch_up_seconds / n_caught_up + choose;
  }
  out->catch_up_seconds = std::max(0.0, catch_up_seconds + choose - out->first_seconds);
  out->catch_up_tokens = n_caught_up - 2;
}

}  // namespace qd::speculative
