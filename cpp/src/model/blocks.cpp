// The two sub-blocks every supported family is made of: self-attention and a gated feed-forward.
#include <algorithm>

#include "common/thread_pool.h"
#include "model/kv_cache.h"
#include "model/ops.h"
#include "model/transformer.h"

namespace qd::model {

void attention_block(Step& s, const LayerWeights& L, int il) {
  const Hparams& hp = s.hp;
  const int n = s.n, hd = hp.head_dim;
  const int q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
  s.matmul(L.wq, s.xn, s.q);
  s.matmul(L.wk, s.xn, s.k);
  s.matmul(L.wv, s.xn, s.v);
  if (L.bq) {
    add_rows(s.q, L.bq, n, q_dim);
    add_rows(s.k, L.bk, n, kv_dim);
    add_rows(s.v, L.bv, n, kv_dim);
  }
  if (L.q_norm) {  // per-head RMS norm of q and k before rope (Gemma 3)
    rmsnorm(s.q, L.q_norm, n * hp.n_head, hd, hp.rms_eps, s.q);
    rmsnorm(s.k, L.k_norm, n * hp.n_head_kv, hd, hp.rms_eps, s.k);
  }
  const bool swa = hp.swa_layers[(size_t)il] != 0;
  const RopeRows& r = swa ? s.rope_swa : s.rope_global;
  rope(s.q, n, hp.n_head, hd, hp.n_rot, hp.rope_neox, r.cos, r.sin);
  rope(s.k, n, hp.n_head_kv, hd, hp.n_rot, hp.rope_neox, r.cos, r.sin);
  round_to_half(s.q, (int64_t)n * q_dim);  // as llama.cpp's KQ matmul against F16 keys does

  s.kv.store(il, s.pos0, n, s.k, s.v);
  AttentionShape shape;
  shape.n_head = hp.n_head;
  shape.n_head_kv = hp.n_head_kv;
  shape.head_dim = hd;
  shape.scale = hp.attn_scale;
  shape.window = swa ? hp.sliding_window : 0;
  attention(s.kv, il, s.q, n, s.pos0, shape, s.att, s.pool);
  s.matmul(L.wo, s.att, s.tmp);
}

void ffn_block(Step& s, const LayerWeights& L, Act act) {
  s.matmul(L.ffn_gate, s.xn, s.gate);
  s.matmul(L.ffn_up, s.xn, s.up);
  // Element-wise, so any split gives the same bits; one task per few rows of a long batch.
  const int64_t count = (int64_t)s.n * s.hp.n_ff, chunk = 8192;
  auto gated = [&](int task) {
    const int64_t i0 = task * chunk, m = std::min(chunk, count - i0);
    if (act == Act::SiLU) {
      silu_mul(s.gate + i0, s.up + i0, m);
    } else {
      gelu_tanh_mul(s.gate + i0, s.up + i0, m);
    }
  };
  const int n_tasks = (int)((count + chunk - 1) / chunk);
  if (n_tasks == 1) {
    gated(0);
  } else {
    s.pool.run(n_tasks, gated);
  }
  s.matmul(L.ffn_down, s.gate, s.tmp);
}

void prenorm_layer(Step& s, const LayerWeights& L, int il, Act act) {
  const Hparams& hp = s.hp;
  const int64_t count = (int64_t)s.n * hp.n_embd;
  rmsnorm(s.x, L.attn_norm, s.n, hp.n_embd, hp.rms_eps, s.xn);
  attention_block(s, L, il);
  add(s.x, s.tmp, count);
  rmsnorm(s.x, L.ffn_norm, s.n, hp.n_embd, hp.rms_eps, s.xn);
  ffn_block(s, L, act);
  add(s.x, s.tmp, count);
}

}  // namespace qd::model
