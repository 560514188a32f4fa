// Qwen3.5 family (GGUF architecture "qwen35"): Qwen3.5 0.8B to 27B, dense, hybrid recurrent.
//
// As llama.cpp's src/models/qwen35.cpp builds it. Three layers in four (attention.recurrent_layers,
// else every layer but each full_attention_interval-th) are Gated DeltaNet "linear attention":
//   [q k v] = conv1d(attn_qkv x) then SiLU (causal, ssm.conv_kernel taps); q, k L2-normalised per head
//   g = softplus(ssm_alpha x + ssm_dt) * ssm_a,  beta = sigmoid(ssm_beta x)      per v head
//   o = delta rule over the recurrent state (model/recurrent_state.h), per v head
//   out = ssm_out (rmsnorm(o) * ssm_norm * silu(attn_gate x))
// The others are gated attention: attn_q gives [q | gate] per head, q and k are RMS-normed per
// head, rope (NEOX pairing) turns rope.dimension_count dims with rope.dimension_sections, and the
// attention output is multiplied by sigmoid(gate) before attn_output. Every block is
//   x += mixer(attn_norm(x));  x += ffn(post_attention_norm(x))      (SwiGLU FFN)
// Files may end with nextn_predict_layers multi-token-prediction blocks (blk.<n_layer + i>, their
// nextn.* tensors; model/mtp_head.h), counted in block_count; the trunk is the layers before them.
#include <cmath>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"
#include "model/kv_cache.h"
#include "model/loader.h"
#include "model/ops.h"
#include "model/recurrent_state.h"

namespace qd::model {

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }  // ggml's threshold

// ggml's L2 norm as llama.cpp builds it for Gated DeltaNet: rms_norm(x, eps / n) / sqrt(n).
void l2norm_rows(float* x, int n_rows, int dim, int stride, float eps) {
  const float eps_n = eps / (float)dim, inv_sqrt_n = 1.0f / std::sqrt((float)dim);
  for (int r = 0; r < n_rows; r++) {
    float* xr = x + (int64_t)r * stride;
    double sum = 0.0;
    for (int i = 0; i < dim; i++) sum += (double)(xr[i] * xr[i]);
    const float inv = 1.0f / std::sqrt((float)(sum / dim) + eps_n);
    for (int i = 0; i < dim; i++) xr[i] = xr[i] * inv * inv_sqrt_n;
  }
}

class Qwen35Model : public TransformerModel {
 public:
  void layer(Step& s, int il) const override {
    block(s, w_.layers[(size_t)il], il, hp_.recurrent_layers[(size_t)il] != 0);
  }
  void mtp_layer(Step& s, int m) const override { block(s, w_.mtp[(size_t)m], hp_.n_layer + m, false); }

 private:
  void block(Step& s, const LayerWeights& L, int il, bool recurrent) const {
    const int64_t count = (int64_t)s.n * hp_.n_embd;
    rmsnorm(s.x, L.attn_norm, s.n, hp_.n_embd, hp_.rms_eps, s.xn);
    s.note("attn_norm", il, s.xn, hp_.n_embd);
    if (recurrent) {
      linear_attention(s, L, il);
    } else {
      gated_attention(s, L, il);
    }
    add(s.x, s.tmp, count);
    s.note("attn_residual", il, s.x, hp_.n_embd);
    rmsnorm(s.x, L.ffn_norm, s.n, hp_.n_embd, hp_.rms_eps, s.xn);
    s.note("attn_post_norm", il, s.xn, hp_.n_embd);
    ffn_block(s, L, il, Act::SiLU);
    add(s.x, s.tmp, count);
    s.note("l_out", il, s.x, hp_.n_embd);
  }

  // s.xn -> s.tmp through gated self-attention (a trunk layer, or an MTP block's on s.kv_layer).
  void gated_attention(Step& s, const LayerWeights& L, int il) const {
    const int n = s.n, hd = hp_.head_dim, H = hp_.n_head, q_dim = H * hd, kv_dim = hp_.n_head_kv * hd;
    s.matmul(L.wq, s.xn, s.qgate);  // [n][H][q | gate]
    s.matmul(L.wk, s.xn, s.k);
    s.matmul(L.wv, s.xn, s.v);
    for (int t = 0; t < n; t++)
      for (int h = 0; h < H; h++)
        for (int d = 0; d < hd; d++) s.q[(size_t)t * q_dim + h * hd + d] = s.qgate[((size_t)t * H + h) * 2 * hd + d];
    rmsnorm(s.q, L.q_norm, n * H, hd, hp_.rms_eps, s.q);
    rmsnorm(s.k, L.k_norm, n * hp_.n_head_kv, hd, hp_.rms_eps, s.k);
    rope(s.q, n, H, hd, hp_.n_rot, true, s.rope_global.cos, s.rope_global.sin);
    rope(s.k, n, hp_.n_head_kv, hd, hp_.n_rot, true, s.rope_global.cos, s.rope_global.sin);
    s.note("Qcur", il, s.q, q_dim);
    s.note("Kcur", il, s.k, kv_dim);
    round_to_half(s.q, (int64_t)n * q_dim);  // as llama.cpp's KQ matmul against F16 keys does
    const int kv_layer = s.kv_layer >= 0 ? s.kv_layer : il;
    s.kv.store(kv_layer, s.pos0, n, s.k, s.v);
    AttentionShape shape;
    shape.n_head = H;
    shape.n_head_kv = hp_.n_head_kv;
    shape.head_dim = hd;
    shape.scale = hp_.attn_scale;
    attention(s.kv, kv_layer, s.q, n, s.pos0, shape, s.att, s.pool);
    s.note("attn_pregate", il, s.att, q_dim);
    for (int t = 0; t < n; t++)
      for (int h = 0; h < H; h++)
        for (int d = 0; d < hd; d++)
          s.att[(size_t)t * q_dim + h * hd + d] *= sigmoid(s.qgate[((size_t)t * H + h) * 2 * hd + hd + d]);
    s.matmul(L.wo, s.att, s.tmp);
    s.note("attn_output", il, s.tmp, hp_.n_embd);
  }

  // s.xn -> s.tmp through a Gated DeltaNet layer, advancing its recurrent state.
  void linear_attention(Step& s, const LayerWeights& L, int il) const {
    RecurrentState& rs = *s.rs;
    const int r = rs.index(il);
    const int n = s.n, S = hp_.ssm_d_state, H = hp_.ssm_n_v_heads, Hk = hp_.ssm_n_k_heads;
    const int key_dim = Hk * S, value_dim = H * S, C = rs.conv_dim();
    s.matmul(L.ssm_qkv, s.xn, s.mix);
    s.matmul(L.ssm_z, s.xn, s.z);
    float* gb = rs.gb_rows(r);  // [n][g | beta]
    cpu::matmul(L.ssm_alpha, s.xn, n, gb, 2 * H, s.pool);
    cpu::matmul(L.ssm_beta, s.xn, n, gb + H, 2 * H, s.pool);
    for (int t = 0; t < n; t++) {
      float* g = gb + (size_t)t * 2 * H;
      for (int h = 0; h < H; h++) {
        g[h] = softplus(g[h] + L.ssm_dt[h]) * L.ssm_a[h];
        g[H + h] = sigmoid(g[H + h]);
      }
    }
    s.note("linear_attn_qkv_mixed", il, s.mix, C);
    rs.conv_silu(r, s.mix, L.ssm_conv1d);
    float* qkv = rs.qkv_rows(r);
    s.note("conv_output_silu", il, qkv, C);
    for (int t = 0; t < n; t++) {  // q and k heads, each L2-normalised
      l2norm_rows(qkv + (size_t)t * C, Hk, S, S, hp_.rms_eps);
      l2norm_rows(qkv + (size_t)t * C + key_dim, Hk, S, S, hp_.rms_eps);
    }
    rs.delta_rule(r, s.att, s.pool);  // [n][H][S]
    s.note("attn_output", il, s.att, value_dim);
    rmsnorm(s.att, L.ssm_norm, n * H, S, hp_.rms_eps, s.att);
    silu_mul(s.z, s.att, (int64_t)n * value_dim);  // z = silu(z) * norm(o)
    s.note("final_output", il, s.z, value_dim);
    s.matmul(L.ssm_out, s.z, s.tmp);
    s.note("linear_attn_out", il, s.tmp, hp_.n_embd);
  }
};

// attention.recurrent_layers (one flag per layer, trunk and MTP), else full_attention_interval.
void read_layer_kinds(Loader& ld, int n_layer_all) {
  Hparams& hp = ld.hp();
  hp.recurrent_layers.assign((size_t)hp.n_layer, 0);
  const std::string key = "qwen35.attention.recurrent_layers";
  if (const gguf::Value* v = ld.file().find(key)) {
    if (v->type != gguf::ValueType::ARRAY || (!v->data && v->count > 0))
      ld.fail("metadata '" + key + "' must be an array of bools or integers");
    if (v->count != (uint64_t)n_layer_all && v->count != (uint64_t)hp.n_layer)
      ld.fail("metadata '" + key + "' has " + std::to_string(v->count) + " entries, expected " + std::to_string(n_layer_all));
    for (int il = 0; il < hp.n_layer; il++) hp.recurrent_layers[(size_t)il] = v->element((uint64_t)il).u64 != 0;
    return;
  }
  const int interval = ld.int_in("full_attention_interval", 4, 1, 4096);
  for (int il = 0; il < hp.n_layer; il++) hp.recurrent_layers[(size_t)il] = (il + 1) % interval != 0;
}

// rope.dimension_sections [4] -> the pairs that keep angle 0: ggml_mrope_cache_init's interleaved
// sectors (IMROPE), where text positions are (p, p, p, 0).
void read_rope_sections(Loader& ld) {
  Hparams& hp = ld.hp();
  const std::string key = "qwen35.rope.dimension_sections";
  const gguf::Value* v = ld.file().find(key);
  if (!v) return;
  if (v->type != gguf::ValueType::ARRAY || v->count < 3 || v->count > 4 || !v->data)
    ld.fail("metadata '" + key + "' must be an array of 3 or 4 integers");
  int sec[4] = {0, 0, 0, 0};
  for (uint64_t i = 0; i < v->count; i++) {
    const gguf::Value e = v->element(i);
    if (!e.is_integer() || e.i64 < 0 || e.i64 > 65536) ld.fail("metadata '" + key + "' has a bad entry");
    sec[i] = (int)e.i64;
  }
  const int total = sec[0] + sec[1] + sec[2] + sec[3];
  if (total <= 0) ld.fail("metadata '" + key + "' sums to 0");
  hp.rope_pair_static.assign((size_t)hp.n_rot / 2, 0);
  for (int j = 0; j < hp.n_rot / 2; j++) {
    const int sector = j % total;
    const bool positional = (sector % 3 == 1 && sector < 3 * sec[1]) || (sector % 3 == 2 && sector < 3 * sec[2]) ||
                            (sector % 3 == 0 && sector < 3 * sec[0]);
    hp.rope_pair_static[(size_t)j] = !positional;
  }
}

void read_ffn(Loader& ld, LayerWeights& L, int il) {
  const Hparams& hp = ld.hp();
  const std::string b = "blk." + std::to_string(il) + ".";
  L.ffn_norm = ld.vector(b + "post_attention_norm.weight", hp.n_embd);
  L.ffn_gate = ld.matrix(b + "ffn_gate.weight", hp.n_embd, hp.n_ff);
  L.ffn_up = ld.matrix(b + "ffn_up.weight", hp.n_embd, hp.n_ff);
  L.ffn_down = ld.matrix(b + "ffn_down.weight", hp.n_ff, hp.n_embd);
}

void read_attention(Loader& ld, LayerWeights& L, int il) {
  const Hparams& hp = ld.hp();
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t E = hp.n_embd, Q = (int64_t)hp.n_head * hp.head_dim, KV = (int64_t)hp.n_head_kv * hp.head_dim;
  L.wq = ld.matrix(b + "attn_q.weight", E, 2 * Q);
  L.wk = ld.matrix(b + "attn_k.weight", E, KV);
  L.wv = ld.matrix(b + "attn_v.weight", E, KV);
  L.wo = ld.matrix(b + "attn_output.weight", Q, E);
  L.q_norm = ld.vector(b + "attn_q_norm.weight", hp.head_dim);
  L.k_norm = ld.vector(b + "attn_k_norm.weight", hp.head_dim);
}

void read_linear_attention(Loader& ld, LayerWeights& L, int il) {
  const Hparams& hp = ld.hp();
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t E = hp.n_embd, S = hp.ssm_d_state, H = hp.ssm_n_v_heads;
  const int64_t value_dim = H * S, C = 2 * hp.ssm_n_k_heads * S + value_dim;
  L.ssm_qkv = ld.matrix(b + "attn_qkv.weight", E, C);
  L.ssm_z = ld.matrix(b + "attn_gate.weight", E, value_dim);
  L.ssm_alpha = ld.matrix(b + "ssm_alpha.weight", E, H);
  L.ssm_beta = ld.matrix(b + "ssm_beta.weight", E, H);
  L.ssm_out = ld.matrix(b + "ssm_out.weight", value_dim, E);
  L.ssm_conv1d = ld.floats(b + "ssm_conv1d.weight", hp.ssm_d_conv, C);
  L.ssm_dt = ld.vector(b + "ssm_dt.bias", H);
  L.ssm_a = ld.vector(b + "ssm_a", H);
  L.ssm_norm = ld.vector(b + "ssm_norm.weight", S);
}

void read_mtp(Loader& ld, LayerWeights& L, int il) {
  const Hparams& hp = ld.hp();
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t E = hp.n_embd;
  L.attn_norm = ld.vector(b + "attn_norm.weight", E);
  read_attention(ld, L, il);
  read_ffn(ld, L, il);
  L.eh_proj = ld.matrix(b + "nextn.eh_proj.weight", 2 * E, E);
  L.mtp_enorm = ld.vector(b + "nextn.enorm.weight", E);
  L.mtp_hnorm = ld.vector(b + "nextn.hnorm.weight", E);
  if (ld.has_tensor(b + "nextn.embed_tokens.weight")) L.mtp_embd = ld.matrix(b + "nextn.embed_tokens.weight", E, hp.n_vocab);
  if (ld.has_tensor(b + "nextn.shared_head_head.weight")) L.mtp_head = ld.matrix(b + "nextn.shared_head_head.weight", E, hp.n_vocab);
  if (ld.has_tensor(b + "nextn.shared_head_norm.weight")) L.mtp_head_norm = ld.vector(b + "nextn.shared_head_norm.weight", E);
}

}  // namespace

std::shared_ptr<TransformerModel> load_qwen35(const gguf::File& file) {
  auto m = std::make_shared<Qwen35Model>();
  Loader ld(file, *m);
  Hparams& hp = ld.hp();
  hp.arch = "qwen35";
  ld.read_common_hparams();
  const int n_layer_all = hp.n_layer;
  hp.n_mtp = ld.int_in("nextn_predict_layers", 0, 0, n_layer_all - 1);
  if (hp.n_mtp > 1) ld.unsupported("nextn_predict_layers " + std::to_string(hp.n_mtp) + " (llama.cpp and quickdraft run one MTP block)");
  hp.n_layer = n_layer_all - hp.n_mtp;
  hp.swa_layers.assign((size_t)hp.n_layer, 0);
  hp.nope_layers.assign((size_t)hp.n_layer, 0);
  hp.rope_neox = true;
  hp.attn_output_gate = true;
  hp.attn_scale = ld.float_in("attention.scale", 0.0, 0.0, 1e6);
  if (hp.attn_scale == 0.0f) hp.attn_scale = 1.0f / std::sqrt((float)hp.head_dim);
  hp.ssm_d_conv = ld.int_in("ssm.conv_kernel", std::nullopt, 1, 16);
  hp.ssm_d_state = ld.int_in("ssm.state_size", std::nullopt, 8, 1024);
  hp.ssm_n_k_heads = ld.int_in("ssm.group_count", std::nullopt, 1, 1024);
  hp.ssm_n_v_heads = ld.int_in("ssm.time_step_rank", std::nullopt, 1, 1024);
  if (hp.ssm_d_state % 8 != 0) ld.unsupported("ssm.state_size " + std::to_string(hp.ssm_d_state) + " is not a multiple of 8");
  if (hp.ssm_n_v_heads % hp.ssm_n_k_heads != 0) ld.fail("ssm.time_step_rank is not a multiple of ssm.group_count");
  const int d_inner = ld.int_in("ssm.inner_size", (int64_t)hp.ssm_n_v_heads * hp.ssm_d_state, 1, int64_t(1) << 24);
  if (d_inner != hp.ssm_n_v_heads * hp.ssm_d_state) ld.fail("ssm.inner_size is not ssm.time_step_rank x ssm.state_size");
  read_layer_kinds(ld, n_layer_all);
  read_rope_sections(ld);

  Weights& w = ld.w();
  const gguf::TensorInfo* emb = file.find_tensor("token_embd.weight");
  if (!emb) ld.fail("missing tensor 'token_embd.weight' (required by architecture qwen35)");
  if (emb->ne[1] < 1 || emb->ne[1] > INT32_MAX) ld.fail("tensor 'token_embd.weight' has a bad vocabulary size");
  hp.n_vocab = (int)emb->ne[1];
  w.token_embd = ld.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  w.output = ld.has_tensor("output.weight") ? ld.matrix("output.weight", hp.n_embd, hp.n_vocab) : w.token_embd;
  w.output_norm = ld.vector("output_norm.weight", hp.n_embd);
  w.layers.resize((size_t)hp.n_layer);
  for (int il = 0; il < hp.n_layer; il++) {
    LayerWeights& L = w.layers[(size_t)il];
    L.attn_norm = ld.vector("blk." + std::to_string(il) + ".attn_norm.weight", hp.n_embd);
    if (hp.recurrent_layers[(size_t)il]) {
      read_linear_attention(ld, L, il);
    } else {
      read_attention(ld, L, il);
    }
    read_ffn(ld, L, il);
  }
  w.mtp.resize((size_t)hp.n_mtp);
  for (int i = 0; i < hp.n_mtp; i++) read_mtp(ld, w.mtp[(size_t)i], hp.n_layer + i);
  return m;
}

}  // namespace qd::model
