// Gemma 3 family (GGUF architecture "gemma3").
//
// Differences from Llama, following llama.cpp's gemma3 graph:
//  * token embeddings are multiplied by sqrt(n_embd);
//  * q and k get a per-head RMS norm before rope; rope in NEOX mode;
//  * the attention and feed-forward outputs are RMS-normed again (post_attention_norm,
//    post_ffw_norm) before joining the residual stream;
//  * the feed-forward is GeGLU with the tanh approximation of GELU;
//  * sliding-window layers (see read_swa_layers): local layers see the last `sliding_window`
//    positions and use rope base 10000 without scaling, global layers rope.freq_base and the
//    linear rope scaling if any;
//  * attention scale 1/sqrt(query_pre_attn_scalar): head_dim, except n_embd/n_head for the
//    62-layer (27B) model, unless the file gives attention.query_pre_attn_scalar;
//  * the output layer is tied to the embedding; final logit soft-capping when the file sets it.
// The GGUF converter already stores Gemma's RMS norm weights as (1 + w), so the norms are plain.
#include <cmath>

#include "model/loader.h"
#include "model/ops.h"

namespace qd::model {

namespace {

class Gemma3Model : public TransformerModel {
 public:
  void layer(Step& s, int il) const override {
    const LayerWeights& L = w_.layers[(size_t)il];
    const int n = s.n, E = hp_.n_embd;
    const int64_t count = (int64_t)n * E;
    rmsnorm(s.x, L.attn_norm, n, E, hp_.rms_eps, s.xn);
    attention_block(s, L, il);
    rmsnorm(s.tmp, L.post_attn_norm, n, E, hp_.rms_eps, s.tmp);
    add(s.x, s.tmp, count);
    rmsnorm(s.x, L.ffn_norm, n, E, hp_.rms_eps, s.xn);
    ffn_block(s, L, il, Act::GeluTanh);
    rmsnorm(s.tmp, L.post_ffw_norm, n, E, hp_.rms_eps, s.tmp);
    add(s.x, s.tmp, count);
  }
};

// attention.sliding_window_pattern is either a period P (layer il is local unless
// (il + 1) % P == 0; 6 when absent, as llama.cpp assumes for Gemma 3) or one bool per layer
// (true: local).
void read_swa_layers(Loader& ld) {
  Hparams& hp = ld.hp();
  const std::string key = "gemma3.attention.sliding_window_pattern";
  const gguf::Value* v = ld.file().find(key);
  if (v && v->type == gguf::ValueType::ARRAY) {
    const gguf::Value* arr = ld.file().get_array(key, gguf::ValueType::BOOL);
    if (arr->count != (uint64_t)hp.n_layer) ld.fail("metadata '" + key + "' must have one entry per layer");
    for (int il = 0; il < hp.n_layer; il++) hp.swa_layers[(size_t)il] = arr->element((uint64_t)il).u64 != 0;
    return;
  }
  const int pattern = ld.int_in("attention.sliding_window_pattern", 6, 1, 4096);
  for (int il = 0; il < hp.n_layer; il++) hp.swa_layers[(size_t)il] = (il + 1) % pattern != 0;
}

}  // namespace

std::shared_ptr<TransformerModel> load_gemma3(const gguf::File& file) {
  auto m = std::make_shared<Gemma3Model>();
  Loader ld(file, *m);
  Hparams& hp = ld.hp();
  hp.arch = "gemma3";
  ld.read_common_hparams();
  hp.rope_neox = true;
  hp.embd_scale = std::sqrt((float)hp.n_embd);
  hp.rms_eps = ld.float_in("attention.layer_norm_rms_epsilon", 1e-6, 0.0, 1.0);

  hp.sliding_window = ld.int_in("attention.sliding_window", 0, 0, INT32_MAX);
  if (hp.sliding_window > 0) {
    read_swa_layers(ld);
    hp.rope_base_swa = 10000.0f;
  }

  float pre_attn = (float)hp.head_dim;
  if (hp.n_layer == 62) pre_attn = (float)hp.n_embd / (float)hp.n_head;
  pre_attn = ld.float_in("attention.query_pre_attn_scalar", pre_attn, 1e-6, 1e9);
  hp.attn_scale = 1.0f / std::sqrt(pre_attn);

  LayerParts parts;
  parts.qk_norm = true;
  parts.post_norms = true;
  ld.read_common_weights(parts);
  return m;
}

}  // namespace qd::model
