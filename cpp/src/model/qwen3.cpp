// Qwen3 family (GGUF architecture "qwen3"): Qwen3 0.6B to 32B, dense.
//
// The Qwen2 block without the q/k/v biases, with a per-head RMS norm of q and k (over head_dim,
// before rope) as llama.cpp's qwen3 graph does; rope in NEOX mode. head_dim comes from
// attention.key_length and is not n_embd / n_head (Qwen3-0.6B: 1024 = 16 x 64, heads of 128).
#include "model/loader.h"

namespace qd::model {

namespace {

class Qwen3Model : public TransformerModel {
 public:
  void layer(Step& s, int il) const override { prenorm_layer(s, w_.layers[(size_t)il], il, Act::SiLU); }
};

}  // namespace

std::shared_ptr<TransformerModel> load_qwen3(const gguf::File& file) {
  auto m = std::make_shared<Qwen3Model>();
  Loader ld(file, *m);
  ld.hp().arch = "qwen3";
  ld.read_common_hparams();
  ld.hp().rope_neox = true;
  LayerParts parts;
  parts.qk_norm = true;
  ld.read_common_weights(parts);
  return m;
}

}  // namespace qd::model
