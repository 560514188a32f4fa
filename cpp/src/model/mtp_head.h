// The multi-token-prediction head of a qwen35 file (blk.<n_layer>.nextn.*), as llama.cpp's
// qwen35 graph_mtp runs it: row p pairs the token at position p with a hidden state h of position
// p - 1 (the trunk's output-normed final state, llama.cpp's h_nextn, or this head's own for a
// position it drafted), and predicts the token at p + 1:
//   x = eh_proj [enorm(embed(token)) | hnorm(h)]
//   x = one gated-attention Qwen3.5 block over x (its own KV cache, rope at p)
//   h' = head_norm(x)  (nextn.shared_head_norm, else output_norm);  logits = head(h')
// h' is what the next drafted position pairs with. One KV cache layer; no recurrent state.
//
//   MtpHead head(model, n_ctx, pool);
//   head.eval(ids, h, n, logits_last, /*last_only=*/true, h_out);   // continues from n_past()
//   head.truncate(p);
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace qd {

class KvCache;
class ThreadPool;

namespace model {

class TransformerModel;

class MtpHead {
 public:
  // UnsupportedError when the model has no MTP block.
  MtpHead(std::shared_ptr<const Model> model, int n_ctx, std::shared_ptr<ThreadPool> pool);
  ~MtpHead();
  MtpHead(const MtpHead&) = delete;
  MtpHead& operator=(const MtpHead&) = delete;

  const Model& model() const { return *model_; }
  int n_ctx() const { return n_ctx_; }
  int n_past() const { return n_past_; }
  void truncate(int n_past);  // any position (attention only); ArgError outside [0, n_past()]

  // n rows at positions n_past().. : ids [n], h [n][n_embd]. logits: [n][n_vocab], or the last
  // row's [n_vocab] when last_only (nullptr: skip the output layer); h_out: every row's own
  // hidden state [n][n_embd] (nullptr: none).
  void eval(const int32_t* ids, const float* h, int n, float* logits, bool last_only, float* h_out);
  // Bytes of weights one row reads (eh_proj, the block, the head): for the drafter's cost hint.
  double weight_bytes() const;

 private:
  struct Impl;
  std::shared_ptr<const Model> model_;
  int n_ctx_ = 0, n_past_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace model
}  // namespace qd
