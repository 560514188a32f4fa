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
  s.matmul_shared(s.xn, {{&L.wq, s.q}, {&L.wk, s.k}, {&L.wv, s.v}});
  if (L.bq) {
    add_rows(s.q, L.bq, n, q_dim);
    add_rows(s.k, L.bk, n, kv_dim);
    add_rows(s.v, L.bv, n, kv_dim);
  }
  s.note("Qcur", il, s.q, q_dim);
  s.note("Kcur", il, s.k, kv_dim);
  s.note("Vcur", il, s.v, kv_dim);
  if (L.q_norm) {  // per-head RMS norm of q and k before rope (Gemma 3, Qwen3)
    rmsnorm(s.q, L.q_norm, n * hp.n_head, hd, hp.rms_eps, s.q);
    rmsnorm(s.k, L.k_norm, n * hp.n_head_kv, hd, hp.rms_eps, s.k);
  }
  const bool swa = hp.swa_layers[(size_t)il] != 0;
  const RopeRows& r = swa ? s.rope_swa : s.rope_global;
  if (!hp.nope_layers[(size_t)il]) {
    rope(s.q, n, hp.n_head, hd, hp.n_rot, hp.rope_neox, r.cos, r.sin);
    rope(s.k, n, hp.n_head_kv, hd, hp.n_rot, hp.rope_neox, r.cos, r.sin);
  }
  s.note("Qrope", il, s.q, q_dim);
  s.note("Krope", il, s.k, kv_dim);
  // Phi-3's graph scales q itself (then attends with scale 1): the rounding to half comes after.
  if (hp.attn_scale_q) scale(s.q, hp.attn_scale, (int64_t)n * q_dim);
  round_to_half(s.q, (int64_t)n * q_dim);  // as llama.cpp's KQ matmul against F16 keys does

  s.kv.store(il, s.pos0, n, s.k, s.v);
  AttentionShape shape;
  shape.n_head = hp.n_head;
  shape.n_head_kv = hp.n_head_kv;
  shape.head_dim = hd;
  shape.scale = hp.attn_scale_q ? 1.0f : hp.attn_scale;
  shape.window = swa ? hp.sliding_window : 0;
  attention(s.kv, il, s.q, n, s.pos0, shape, s.att, s.pool);
  s.note("kqv_out", il, s.att, q_dim);
  s.matmul(L.wo, s.att, s.tmp);
  s.note("attn_out", il, s.tmp, hp.n_embd);
}

void ffn_block(Step& s, const LayerWeights& L, int il, Act act) {
  s.matmul_shared(s.xn, {{&L.ffn_gate, s.gate}, {&L.ffn_up, s.up}});
  s.note("ffn_gate", il, s.gate, s.hp.n_ff);
  s.note("ffn_up", il, s.up, s.hp.n_ff);
  // Element-wise, row by row (the AVX-512 silu goes 16 values at a time from each row's start,
  // as ggml's does), so any split gives the same bits; one task per few rows of a long batch.
  const int F = s.hp.n_ff, rows_per_task = std::max(1, 8192 / F);
  auto gated = [&](int task) {
    const int r0 = task * rows_per_task, r1 = std::min(s.n, r0 + rows_per_task);
    for (int r = r0; r < r1; r++) {
      float* g = s.gate + (int64_t)r * F;
      const float* u = s.up + (int64_t)r * F;
      if (act == Act::SiLU) {
        silu_mul(g, u, F);
      } else {
        gelu_tanh_mul(g, u, F);
      }
    }
  };
  const int n_tasks = (s.n + rows_per_task - 1) / rows_per_task;
  if (n_tasks == 1) {
    gated(0);
  } else {
    s.pool.run(n_tasks, gated);
  }
  s.note("ffn_act", il, s.gate, s.hp.n_ff);
  s.matmul(L.ffn_down, s.gate, s.tmp);
  s.note("ffn_out", il, s.tmp, s.hp.n_embd);
}

void prenorm_layer(Step& s, const LayerWeights& L, int il, Act act) {
  const Hparams& hp = s.hp;
  const int64_t count = (int64_t)s.n * hp.n_embd;
  rmsnorm(s.x, L.attn_norm, s.n, hp.n_embd, hp.rms_eps, s.xn);
  s.note("attn_norm", il, s.xn, hp.n_embd);
  attention_block(s, L, il);
  add(s.x, s.tmp, count);
  s.note("ffn_inp", il, s.x, hp.n_embd);
  rmsnorm(s.x, L.ffn_norm, s.n, hp.n_embd, hp.rms_eps, s.xn);
  s.note("ffn_norm", il, s.xn, hp.n_embd);
  ffn_block(s, L, il, act);
  add(s.x, s.tmp, count);
  s.note("l_out", il, s.x, hp.n_embd);
}

}  // namespace qd::model
