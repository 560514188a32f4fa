// MTP self-speculation: the target file's own multi-token-prediction head (model/mtp_head.h)
// drafts, as llama.cpp's draft-mtp does. The head reads the target's hidden states, so a step
// costs one target pass (the verify, whose hidden rows feed the next draft) plus k small MTP
// passes, and needs no second model.
//
// MtpSource is the head as a LogitSource, so the ModelDrafter loop (sync by tokens, catch-up in
// one batch, the p_min / greedy / q rules, the cost reports the draft-length controller reads)
// drafts with it unchanged. It pairs each token at position p with a hidden state of p - 1:
// the target's (received through Context::set_hidden_sink) once the target has kept position
// p - 1, else the head's own from the row before (a drafted position); position 0 pairs with
// zeros, as llama.cpp's first row does. Rows paired with the head's own state are recomputed
// with the target's as soon as the target has accepted their positions.
#pragma once
#include <memory>
#include <vector>

#include "model/mtp_head.h"
#include "speculative/drafter_model.h"
#include "speculative/logit_source.h"

namespace qd::speculative {

class MtpSource : public LogitSource {
 public:
  // target: the context the head drafts for (it installs a hidden sink there; outlives this).
  MtpSource(Context& target, std::shared_ptr<ThreadPool> pool);
  ~MtpSource() override;
  int n_vocab() const override { return head_.model().n_vocab(); }
  int n_ctx() const override { return head_.n_ctx(); }
  int n_past() const override { return n_past_; }
  void eval(const int32_t* tokens, int n, float* logits, bool last_only) override;
  void truncate(int n_past) override;
  double weight_bytes() const { return head_.weight_bytes(); }

 private:
  Context& target_;
  model::MtpHead head_;
  int E_;
  int n_past_ = 0;                 // positions this source has been given
  std::vector<int32_t> tokens_;    // [n_past_] the tokens at those positions
  int n_exact_ = 0;                // the head's rows [0, n_exact_) paired with the target's states
  std::vector<float> h_target_;    // [n_ctx][n_embd] the target's h_nextn by position
  std::vector<float> h_self_;      // [n_ctx][n_embd] the head's own h_nextn by position
  std::vector<float> rows_h_;      // one eval's paired states
  std::vector<float> logits_all_;  // [n][n_vocab] when an eval wants every row's logits
};

// The MTP drafter over `target` (a qwen35 context whose file has nextn layers): a ModelDrafter
// named "mtp" over an MtpSource. Its cost hint: the head's weight bytes over target_bytes (the
// target's per decoded token).
std::unique_ptr<ModelDrafter> make_mtp_drafter(Context& target, std::shared_ptr<ThreadPool> pool, double target_bytes);

}  // namespace qd::speculative
