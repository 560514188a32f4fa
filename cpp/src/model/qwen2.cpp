// Qwen2 family (GGUF architecture "qwen2"): Qwen2 and Qwen2.5, including Qwen2.5-Coder.
//
// The Llama block with biases on the q, k and v projections and rope in NEOX mode (element i
// paired with i + n_rot/2); the output layer is tied to the embedding in the small models.
#include "model/loader.h"

namespace qd::model {

namespace {

class Qwen2Model : public TransformerModel {
 public:
  void layer(Step& s, int il) const override { prenorm_layer(s, w_.layers[(size_t)il], il, Act::SiLU); }
};

}  // namespace

std::shared_ptr<TransformerModel> load_qwen2(const gguf::File& file) {
  auto m = std::make_shared<Qwen2Model>();
  Loader ld(file, *m);
  ld.hp().arch = "qwen2";
  ld.read_common_hparams();
  ld.hp().rope_neox = true;
  LayerParts parts;
  parts.qkv_bias = true;
  ld.read_common_weights(parts);
  return m;
}

}  // namespace qd::model
