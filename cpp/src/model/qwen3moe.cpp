// Qwen3 mixture-of-experts family (GGUF architecture "qwen3moe"): Qwen3-30B-A3B, Qwen3-235B-A22B.
//
// The Qwen3 attention block (q/k norms, NEOX rope, no biases, head_dim from key_length), and in
// place of the dense feed-forward a router over expert_count SwiGLU experts of
// expert_feed_forward_length, of which each token uses the expert_used_count most likely, with
// their probabilities renormalised (model/moe.cpp). There are no shared experts. The expert
// weights are 3-D tensors viewed in place, one matrix per expert.
#include "model/loader.h"
#include "model/ops.h"

namespace qd::model {

namespace {

class Qwen3MoeModel : public TransformerModel {
 public:
  void layer(Step& s, int il) const override {
    const LayerWeights& L = w_.layers[(size_t)il];
    const int64_t count = (int64_t)s.n * hp_.n_embd;
    rmsnorm(s.x, L.attn_norm, s.n, hp_.n_embd, hp_.rms_eps, s.xn);
    attention_block(s, L, il);
    add(s.x, s.tmp, count);
    s.note("ffn_inp", il, s.x, hp_.n_embd);
    rmsnorm(s.x, L.ffn_norm, s.n, hp_.n_embd, hp_.rms_eps, s.xn);
    moe_ffn_block(s, L, il);
    add(s.x, s.tmp, count);
    s.note("l_out", il, s.x, hp_.n_embd);
  }
};

}  // namespace

std::shared_ptr<TransformerModel> load_qwen3moe(const gguf::File& file) {
  auto m = std::make_shared<Qwen3MoeModel>();
  Loader ld(file, *m);
  Hparams& hp = ld.hp();
  hp.arch = "qwen3moe";
  ld.read_common_hparams();
  hp.rope_neox = true;
  hp.n_expert = ld.int_in("expert_count", std::nullopt, 1, 256);
  hp.n_expert_used = ld.int_in("expert_used_count", std::nullopt, 1, hp.n_expert);
  hp.n_ff_exp = ld.int_in("expert_feed_forward_length", hp.n_ff / hp.n_expert_used, 1, int64_t(1) << 24);
  LayerParts parts;
  parts.qk_norm = true;
  parts.moe = true;
  ld.read_common_weights(parts);
  return m;
}

}  // namespace qd::model
