// Phi-3 family (GGUF architecture "phi3"): Phi-3 / Phi-3.5 mini and medium, Phi-4-mini, Phi-4.
//
// Differences from Llama, following llama.cpp's phi3 graph:
//  * q, k and v come from one fused matrix (attn_qkv) and the gate and up projections from one
//    (ffn_up: gate rows first), viewed in place as row ranges;
//  * rope in NEOX mode over rope.dimension_count dims of each head (Phi-4-mini rotates 3/4);
//  * LongRoPE: per-pair frequency divisors rope_factors_long / rope_factors_short, the long ones
//    for a context longer than rope.scaling.original_context_length, and cos / sin multiplied by
//    rope.scaling.attn_factor (the converter writes no rope.scaling.type for it);
//  * q is multiplied by 1/sqrt(head_dim) itself, then attends with scale 1.
// attention.sliding_window is read by llama.cpp and then switched off for this family (its
// "Phi SWA is currently disabled"): every layer attends to the whole context, here too.
#include "model/loader.h"

namespace qd::model {

namespace {

class Phi3Model : public TransformerModel {
 public:
  void layer(Step& s, int il) const override { prenorm_layer(s, w_.layers[(size_t)il], il, Act::SiLU); }
};

}  // namespace

std::shared_ptr<TransformerModel> load_phi3(const gguf::File& file) {
  auto m = std::make_shared<Phi3Model>();
  Loader ld(file, *m);
  Hparams& hp = ld.hp();
  hp.arch = "phi3";
  ld.read_common_hparams();
  if (hp.head_dim * hp.n_head != hp.n_embd) {
    ld.fail("attention.key_length " + std::to_string(hp.head_dim) + " x head_count " + std::to_string(hp.n_head) +
            " is not embedding_length " + std::to_string(hp.n_embd) + " (phi3 projects q to n_embd)");
  }
  hp.rope_neox = true;
  hp.attn_scale_q = true;
  LayerParts parts;
  parts.fused_gate_up = true;
  ld.read_common_weights(parts);
  Weights& w = ld.w();
  if (ld.has_tensor("rope_factors_long.weight")) w.rope_long = ld.vector("rope_factors_long.weight", hp.n_rot / 2);
  if (ld.has_tensor("rope_factors_short.weight")) w.rope_short = ld.vector("rope_factors_short.weight", hp.n_rot / 2);
  return m;
}

}  // namespace qd::model
