// SmolLM3 family (GGUF architecture "smollm3"): SmolLM3-3B.
//
// The Llama block (RMS norm, GQA, rope in normal mode, SwiGLU, output tied to the embedding when
// output.weight is absent), except that every 4th layer (il + 1 divisible by 4) applies no rope
// to q and k ("NoPE" layers). The period is not in the GGUF metadata: llama.cpp fixes it at 4
// (n_no_rope_layer_step), and so do we.
#include "model/loader.h"

namespace qd::model {

namespace {

constexpr int kNoRopeLayerStep = 4;

class SmolLM3Model : public TransformerModel {
 public:
  void layer(Step& s, int il) const override { prenorm_layer(s, w_.layers[(size_t)il], il, Act::SiLU); }
};

}  // namespace

std::shared_ptr<TransformerModel> load_smollm3(const gguf::File& file) {
  auto m = std::make_shared<SmolLM3Model>();
  Loader ld(file, *m);
  Hparams& hp = ld.hp();
  hp.arch = "smollm3";
  ld.read_common_hparams();
  hp.rope_neox = false;
  for (int il = 0; il < hp.n_layer; il++) hp.nope_layers[(size_t)il] = (il + 1) % kNoRopeLayerStep == 0;
  ld.read_common_weights(LayerParts{});
  return m;
}

}  // namespace qd::model
