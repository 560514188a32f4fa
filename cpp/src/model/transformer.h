// The decoder-only transformer shared by every supported family: weights viewed in place, and the
// per-ubatch state a family's layer() works on. One file per family implements load + layer().
#pragma once
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "cpu/matmul.h"
#include "cpu/repack.h"
#include "model/model.h"

namespace qd {

class KvCache;

namespace model {

class RecurrentState;

// Shapes are given GGML-style [rows][cols]: cols (ne[0]) is the reduction dimension.
struct LayerWeights {
  cpu::Matrix wq;                  // [n_head * head_dim][n_embd]
  cpu::Matrix wk, wv;              // [n_head_kv * head_dim][n_embd]
  cpu::Matrix wo;                  // [n_embd][n_head * head_dim]
  cpu::Matrix ffn_gate, ffn_up;    // [n_ff][n_embd]
  cpu::Matrix ffn_down;            // [n_embd][n_ff]
  const float* attn_norm = nullptr;       // [n_embd]
  const float* ffn_norm = nullptr;        // [n_embd]
  const float* bq = nullptr;              // [n_head * head_dim]     qwen2 only
  const float* bk = nullptr;              // [n_head_kv * head_dim]  qwen2 only
  const float* bv = nullptr;              // [n_head_kv * head_dim]  qwen2 only
  const float* q_norm = nullptr;          // [head_dim]              gemma3, qwen3
  const float* k_norm = nullptr;          // [head_dim]              gemma3, qwen3
  const float* post_attn_norm = nullptr;  // [n_embd]                gemma3 only
  const float* post_ffw_norm = nullptr;   // [n_embd]                gemma3 only
  // Mixture of experts (qwen3moe), in place of ffn_gate / ffn_up / ffn_down: the router and one
  // view per expert into the 3-D tensors blk.N.ffn_{gate,up,down}_exps.weight.
  cpu::Matrix ffn_gate_inp;                 // [n_expert][n_embd]
  std::vector<cpu::Matrix> gate_exps, up_exps;  // [n_expert] x [n_ff_exp][n_embd]
  std::vector<cpu::Matrix> down_exps;           // [n_expert] x [n_embd][n_ff_exp]
  // Gated DeltaNet (qwen35's recurrent layers), in place of wq / wk / wv / wo; with
  // key_dim = ssm_n_k_heads * ssm_d_state, value_dim = ssm_n_v_heads * ssm_d_state:
  cpu::Matrix ssm_qkv;             // [2 key_dim + value_dim][n_embd]  blk.N.attn_qkv: q, k, v before the conv
  cpu::Matrix ssm_z;               // [value_dim][n_embd]              blk.N.attn_gate: the output gate z
  cpu::Matrix ssm_alpha, ssm_beta;  // [ssm_n_v_heads][n_embd]
  cpu::Matrix ssm_out;             // [n_embd][value_dim]
  const float* ssm_conv1d = nullptr;  // [2 key_dim + value_dim][ssm_d_conv]
  const float* ssm_dt = nullptr;      // [ssm_n_v_heads]  added to alpha before the softplus
  const float* ssm_a = nullptr;       // [ssm_n_v_heads]  -exp(A_log), multiplies it
  const float* ssm_norm = nullptr;    // [ssm_d_state]    gated RMS norm of each head's output
  // Multi-token prediction (qwen35 blk.<n_layer + i>.nextn.*); the block's attention and FFN use
  // the fields above, its pre-FFN norm is ffn_norm (post_attention_norm in the file).
  cpu::Matrix eh_proj;                 // [n_embd][2 n_embd]  [enorm(embedding) | hnorm(h)] -> x
  cpu::Matrix mtp_embd, mtp_head;      // [n_vocab][n_embd]; absent (null): token_embd / output
  const float* mtp_enorm = nullptr;    // [n_embd]
  const float* mtp_hnorm = nullptr;    // [n_embd]
  const float* mtp_head_norm = nullptr;  // [n_embd]; null: output_norm
  bool fused_qkv = false;       // wq, wk, wv are row ranges of blk.N.attn_qkv.weight (phi3)
  bool fused_gate_up = false;   // ffn_gate, ffn_up are row ranges of blk.N.ffn_up.weight (phi3)
};

struct Weights {
  cpu::Matrix token_embd;            // [n_vocab][n_embd]
  cpu::Matrix output;                // [n_vocab][n_embd]; token_embd when tied; its first rows only
                                     // when loaded so (LoadOptions::output_rows)
  cpu::Matrix output_stored;         // then the whole output matrix as stored (rows past output's)
  const float* output_norm = nullptr;  // [n_embd]
  const float* rope_freqs = nullptr;   // [n_rot / 2] frequency divisors (Llama 3.1), or null
  // LongRoPE (phi3): frequency divisors for contexts longer than rope_n_ctx_orig, and for the
  // others; a context picks one by its size, as llama.cpp does. Null when absent.
  const float* rope_long = nullptr;    // [n_rot / 2]
  const float* rope_short = nullptr;   // [n_rot / 2]
  std::vector<LayerWeights> layers;
  std::vector<LayerWeights> mtp;  // [n_mtp] multi-token-prediction layers (qwen35), after the trunk
};

// Cos/sin of every rotated pair for the rows of one ubatch: [n][n_rot / 2] each.
struct RopeRows {
  const float* cos = nullptr;
  const float* sin = nullptr;
};

// f(name, matrix) for every weight matrix of w (Weights or const Weights), by GGUF tensor name;
// a tied output (the same bytes as token_embd) is visited too, after token_embd.
template <class W, class F>
void for_each_matrix(W& w, F&& visit) {
  auto f = [&visit](const std::string& name, auto& m) {  // a layer's absent parts are skipped
    if (m.data) visit(name, m);
  };
  f("token_embd.weight", w.token_embd);
  f("output.weight", w.output);
  for (size_t il = 0; il < w.layers.size() + w.mtp.size(); il++) {
    auto& L = il < w.layers.size() ? w.layers[il] : w.mtp[il - w.layers.size()];
    const std::string b = "blk." + std::to_string(il) + ".";
    // Row ranges of a fused tensor are named after it: "blk.N.attn_qkv.weight[q]".
    const bool qkv = L.fused_qkv, gu = L.fused_gate_up;
    f(b + (qkv ? "attn_qkv.weight[q]" : "attn_q.weight"), L.wq);
    f(b + (qkv ? "attn_qkv.weight[k]" : "attn_k.weight"), L.wk);
    f(b + (qkv ? "attn_qkv.weight[v]" : "attn_v.weight"), L.wv);
    f(b + "attn_output.weight", L.wo);
    f(b + (gu ? "ffn_up.weight[gate]" : "ffn_gate.weight"), L.ffn_gate);
    f(b + (gu ? "ffn_up.weight[up]" : "ffn_up.weight"), L.ffn_up);
    f(b + "ffn_down.weight", L.ffn_down);
    f(b + "ffn_gate_inp.weight", L.ffn_gate_inp);
    f(b + "attn_qkv.weight", L.ssm_qkv);
    f(b + "attn_gate.weight", L.ssm_z);
    f(b + "ssm_alpha.weight", L.ssm_alpha);
    f(b + "ssm_beta.weight", L.ssm_beta);
    f(b + "ssm_out.weight", L.ssm_out);
    f(b + "nextn.eh_proj.weight", L.eh_proj);
    f(b + "nextn.embed_tokens.weight", L.mtp_embd);
    f(b + "nextn.shared_head_head.weight", L.mtp_head);
    for (size_t e = 0; e < L.gate_exps.size(); e++) {
      const std::string x = "[" + std::to_string(e) + "]";
      f(b + "ffn_gate_exps.weight" + x, L.gate_exps[e]);
      f(b + "ffn_up_exps.weight" + x, L.up_exps[e]);
      f(b + "ffn_down_exps.weight" + x, L.down_exps[e]);
    }
  }
}

// State of one forward step over n consecutive positions pos0..pos0+n-1. Every buffer is
// [n][width] row-major; layer() transforms x (the residual stream) in place.
struct Step {
  Step(const Hparams& h, ThreadPool& p, KvCache& c) : hp(h), pool(p), kv(c) {}
  const Hparams& hp;
  ThreadPool& pool;
  KvCache& kv;
  int n = 0;
  int pos0 = 0;
  float* x = nullptr;     // [n][n_embd]      residual stream
  float* xn = nullptr;    // [n][n_embd]      normalised input of a sub-block
  float* tmp = nullptr;   // [n][n_embd]      sub-block output
  float* q = nullptr;     // [n][n_head * head_dim]
  float* k = nullptr;     // [n][n_head_kv * head_dim]
  float* v = nullptr;     // [n][n_head_kv * head_dim]
  float* att = nullptr;   // [n][n_head * head_dim]  attention output before wo
  float* gate = nullptr;  // [n][max(n_ff, n_ff_exp)]
  float* up = nullptr;    // [n][max(n_ff, n_ff_exp)]
  // Mixture of experts only (model/moe.cpp):
  float* moe_probs = nullptr;   // [n][n_expert]        router probabilities
  int32_t* moe_sel = nullptr;   // [n][n_expert_used]   the experts chosen per row, best first
  float* moe_w = nullptr;       // [n][n_expert_used]   their normalised weights
  int32_t* moe_rows = nullptr;  // [n * n_expert_used]  (row, slot) pairs grouped by expert
  float* moe_x = nullptr;       // [n][n_embd]          the rows routed to one expert, gathered
  float* moe_y = nullptr;       // [n][n_expert_used][n_embd] each chosen expert's output
  // Hybrid recurrent models only (qwen35):
  float* qgate = nullptr;  // [n][2 * n_head * head_dim]  gated attention: [q | gate] per head
  float* mix = nullptr;    // [n][2 key_dim + value_dim]  Gated DeltaNet input projection, before the conv
  float* z = nullptr;      // [n][value_dim]              its output gate
  RecurrentState* rs = nullptr;
  int kv_layer = -1;       // >= 0: the KV cache layer attention uses instead of il (the MTP head)
  RopeRows rope_global, rope_swa;
  const Context::TraceFn* trace = nullptr;  // Context::set_trace, or null

  void note(const char* name, int il, const float* data, int cols) const {
    if (trace) (*trace)(name, il, data, n, cols);
  }

  void matmul(const cpu::Matrix& w, const float* in, float* out) const { cpu::matmul(w, in, n, out, pool); }
  // Products of up to 4 matrices sharing the input `in`, as (matrix, output) pairs: one
  // quantization of `in`, one pool run.
  void matmul_shared(const float* in, std::initializer_list<std::pair<const cpu::Matrix*, float*>> products) const {
    const cpu::Matrix* ws[4];
    float* ys[4];
    int count = 0;
    for (const auto& [w, y] : products) {
      if (count == 4) throw ArgError("matmul_shared: at most 4 products");
      ws[count] = w;
      ys[count++] = y;
    }
    cpu::matmul_group(ws, ys, count, in, n, pool);
  }
};

// A loaded model of one family. Weights point into the GGUF mapping, except the few small
// vectors (norms, biases) that are stored in another float type: those are converted once.
class TransformerModel : public Model {
 public:
  const Weights& weights() const { return w_; }
  // One transformer block over the rows of `s`, in place on s.x.
  virtual void layer(Step& s, int il) const = 0;
  // The multi-token-prediction block m (model/mtp_head.h) over s.x = eh_proj's output, in place;
  // UnsupportedError for a family without one.
  virtual void mtp_layer(Step& s, int m) const;

 protected:
  friend class Loader;
  Weights w_;
  std::deque<std::vector<float>> owned_;  // converted small vectors; deque keeps pointers stable
  cpu::Rows8Buffer repacked_;  // the weights in the rows8 layout, one buffer (cpu/repack.h)
  std::vector<std::unique_ptr<uint8_t[]>> requantized_;  // weights requantized at load (requantize)
  // Matrices (by their data) that requantize left to repack_for_kernels, and the type for each.
  std::map<const uint8_t*, uint32_t> requantize_later_;

 public:
  std::vector<MatrixInfo> matrices() const override;
  // Row `id` of the output layer as the model computes it (GGUF layout, w_.output's type): past a
  // trimmed output (trim_output), the stored row requantized as the others were at load.
  void output_row(int64_t id, uint8_t* dst) const;
  // Requantizes every matrix stored in a type wider than `to` (model/requantize.cpp); before
  // repack_for_kernels, which requantizes those the kernels read repacked straight into the
  // rows8 layout and rearranges the requantized copies of any others.
  void requantize(const std::string& to);
  // Keeps the first `rows` rows of an untied output matrix (rounded up to a chunk of the rows8
  // layout), before requantize and repack_for_kernels, which then touch no more of it: a draft
  // model that scores only its draft head (Context::set_head_subset). The stored matrix stays
  // mapped for the rows past them (output_row).
  void trim_output(int64_t rows);
  // Rearranges every weight the active ISA's kernels read in another layout (cpu/repack.h); the
  // copies replace the mapped pages of the originals (or of the requantized copies, then freed).
  void repack_for_kernels();
};

// Shared block pieces used by the family files (model/blocks.cpp).
// Self-attention of layer il from s.xn into s.tmp: q/k/v projections (with optional biases and
// per-head q/k norms), rope, KV cache append, attention, output projection.
void attention_block(Step& s, const LayerWeights& L, int il);
// Gated feed-forward from s.xn into s.tmp: down(act(gate(x)) * up(x)); act is SiLU or GELU(tanh).
enum class Act { SiLU, GeluTanh };
void ffn_block(Step& s, const LayerWeights& L, int il, Act act);
// The plain pre-norm block: x += attn(rmsnorm(x)); x += ffn(rmsnorm(x)).
void prenorm_layer(Step& s, const LayerWeights& L, int il, Act act);
// Mixture-of-experts feed-forward from s.xn into s.tmp (model/moe.cpp): softmax router, top
// n_expert_used experts per row with weights renormalised to sum 1, SwiGLU experts.
void moe_ffn_block(Step& s, const LayerWeights& L, int il);

// One loader per family file; Model::load picks by general.architecture.
std::shared_ptr<TransformerModel> load_llama(const gguf::File& file);
std::shared_ptr<TransformerModel> load_qwen2(const gguf::File& file);
std::shared_ptr<TransformerModel> load_gemma3(const gguf::File& file);
std::shared_ptr<TransformerModel> load_qwen3(const gguf::File& file);
std::shared_ptr<TransformerModel> load_smollm3(const gguf::File& file);
std::shared_ptr<TransformerModel> load_phi3(const gguf::File& file);
std::shared_ptr<TransformerModel> load_qwen3moe(const gguf::File& file);
std::shared_ptr<TransformerModel> load_qwen35(const gguf::File& file);

}  // namespace model
}  // namespace qd
