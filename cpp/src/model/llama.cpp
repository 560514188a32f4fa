// Llama family (GGUF architecture "llama"): SmolLM2, Llama 2/3, Mistral, TinyLlama.
//
// Pre-norm blocks with RMS norm, grouped-query attention, rope in normal mode (neighbouring
// pairs: the GGUF converter permutes the q/k rows for it), SwiGLU feed-forward, and an output
// layer tied to the token embedding when output.weight is absent.
#include "model/loader.h"

namespace qd::model {

namespace {

class LlamaModel : public TransformerModel {
 public:
  void layer(Step& s, int il) const override { prenorm_layer(s, w_.layers[(size_t)il], il, Act::SiLU); }
};

}  // namespace

std::shared_ptr<TransformerModel> load_llama(const gguf::File& file) {
  auto m = std::make_shared<LlamaModel>();
  Loader ld(file, *m);
  ld.hp().arch = "llama";
  ld.read_common_hparams();
  ld.hp().rope_neox = false;
  ld.read_common_weights(LayerParts{});
  return m;
}

}  // namespace qd::model
