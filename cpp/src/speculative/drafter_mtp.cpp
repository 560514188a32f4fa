#include "speculative/drafter_mtp.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"

namespace qd::speculative {

MtpSource::MtpSource(Context& target, std::shared_ptr<ThreadPool> pool)
    : target_(target),
      head_(target.model_ptr(), target.n_ctx(), std::move(pool)),
      E_(target.model().hparams().n_embd) {
  h_target_.assign((size_t)target.n_ctx() * E_, 0.0f);
  h_self_.assign((size_t)target.n_ctx() * E_, 0.0f);
  target_.set_hidden_sink([this](int pos0, int n, const float* h) {
    const int rows = std::min(n, target_.n_ctx() - pos0);
    if (rows > 0) std::memcpy(h_target_.data() + (size_t)pos0 * E_, h, (size_t)rows * E_ * sizeof(float));
  });
}

MtpSource::~MtpSource() { target_.set_hidden_sink({}); }

void MtpSource::truncate(int n_past) {
  if (n_past < 0 || n_past > n_past_)
    throw ArgError("MtpSource::truncate: n_past " + std::to_string(n_past) + " is outside [0, " + std::to_string(n_past_) + "]");
  n_past_ = n_past;
  tokens_.resize((size_t)n_past);
  n_exact_ = std::min(n_exact_, n_past);
  if (head_.n_past() > n_past) head_.truncate(n_past);
}

void MtpSource::eval(const int32_t* tokens, int n, float* logits, bool last_only) {
  if (n <= 0) throw ArgError("MtpSource::eval: no tokens");
  if (n > n_ctx() - n_past_) throw ArgError("MtpSource::eval: " + std::to_string(n) + " tokens exceed n_ctx");
  tokens_.insert(tokens_.end(), tokens, tokens + n);
  const int end = n_past_ + n;
  const int kept = target_.n_past();  // the target's states of positions < kept are final
  // Rows the head paired with its own states, whose positions the target has kept since, are
  // redone with the target's.
  int from = std::min(head_.n_past(), n_past_);
  if (n_exact_ < from && n_exact_ - 1 < kept) from = n_exact_;
  const bool exact_before = n_exact_ >= from;
  head_.truncate(from);
  const int V = n_vocab();
  // Runs of rows whose pairing states are all known when the run starts: a row after a drafted
  // position reads the head's own state of the row before, so it starts a new run.
  for (int p = from; p < end;) {
    int q = p + 1;
    while (q < end && q - 1 < kept) q++;
    rows_h_.resize((size_t)(q - p) * E_);
    for (int r = p; r < q; r++) {
      float* h = rows_h_.data() + (size_t)(r - p) * E_;
      if (r == 0) {
        std::fill(h, h + E_, 0.0f);
      } else {
        const std::vector<float>& src = r - 1 < kept ? h_target_ : h_self_;
        std::memcpy(h, src.data() + (size_t)(r - 1) * E_, (size_t)E_ * sizeof(float));
      }
    }
    const bool last_run = q == end;
    float* lg = nullptr;
    if (last_run && logits) {
      if (!last_only && q - p < n) throw ArgError("MtpSource::eval: every row's logits across drafted positions");
      if (!last_only) logits_all_.resize((size_t)(q - p) * V);
      lg = last_only ? logits : logits_all_.data();
    }
    head_.eval(tokens_.data() + p, rows_h_.data(), q - p, lg, last_only, h_self_.data() + (size_t)p * E_);
    if (lg && !last_only) std::memcpy(logits, logits_all_.data() + (size_t)(q - p - n) * V, (size_t)n * V * sizeof(float));
    p = q;
  }
  if (exact_before) n_exact_ = std::min(end, std::max(from, kept + 1));
  n_past_ = end;
}

std::unique_ptr<ModelDrafter> make_mtp_drafter(Context& target, std::shared_ptr<ThreadPool> pool, double target_bytes) {
  auto src = std::make_unique<MtpSource>(target, std::move(pool));
  const double cost_hint = target_bytes > 0 ? src->weight_bytes() / target_bytes : -1.0;
  // max_lag n_ctx: the source's positions are the target's, so it never restarts from an offset
  // (a catch-up of many rows is one batched pass of a single block).
  return std::make_unique<ModelDrafter>(std::move(src), "mtp", target.n_ctx(), cost_hint);
}

}  // namespace qd::speculative
