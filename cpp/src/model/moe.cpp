// The mixture-of-experts feed-forward (qwen3moe), as llama.cpp's build_moe_ffn computes it with
// softmax gating and normalised weights:
//
//   p   = softmax(router . x)                       over n_expert, per row
//   sel = the n_expert_used largest p, best first    (ties: the lower expert id)
//   w   = p[sel] / max(sum p[sel], 2^-14)
//   out = w0 * E_sel0(x) + w1 * E_sel1(x) + ...       each product rounded, summed in slot order
//   E_e(x) = down_e(silu(gate_e(x)) * up_e(x))
//
// A batch reads each chosen expert once: the rows routed to expert e are gathered and go through
// its three matrices in one matmul each. Every row's result is independent of which other rows
// share its experts (matmuls are batch invariant, the slot sum is per row), so a row's logits do
// not depend on the batch.
#include <algorithm>
#include <cstring>

#include "model/attention_ops.h"
#include "model/ops.h"
#include "model/transformer.h"

namespace qd::model {

namespace {

// Router probabilities, top-k and normalised weights of every row.
void route(Step& s, const LayerWeights& L) {
  const Hparams& hp = s.hp;
  const int X = hp.n_expert, K = hp.n_expert_used;
  s.matmul(L.ffn_gate_inp, s.xn, s.moe_probs);
  int32_t order[256];  // n_expert <= 256 (Loader)
  for (int r = 0; r < s.n; r++) {
    float* p = s.moe_probs + (size_t)r * X;
    softmax(p, X, 0);  // ggml_soft_max's order (16-lane chunks on AVX-512, a double sum)
    for (int e = 0; e < X; e++) order[e] = e;
    std::partial_sort(order, order + K, order + X, [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    int32_t* sel = s.moe_sel + (size_t)r * K;
    float* w = s.moe_w + (size_t)r * K;
    double sum = 0.0;  // ggml_sum_rows accumulates in double
    for (int j = 0; j < K; j++) {
      sel[j] = order[j];
      w[j] = p[order[j]];
      sum += (double)w[j];
    }
    const float total = std::max((float)sum, 6.103515625e-5f);
    for (int j = 0; j < K; j++) w[j] = w[j] / total;
  }
}

}  // namespace

void moe_ffn_block(Step& s, const LayerWeights& L, int il) {
  const Hparams& hp = s.hp;
  const int n = s.n, X = hp.n_expert, K = hp.n_expert_used, E = hp.n_embd, F = hp.n_ff_exp;
  route(s, L);
  s.note("ffn_moe_probs", il, s.moe_probs, X);

  // (row, slot) pairs grouped by expert, by counting: start[e] .. start[e + 1] in moe_rows.
  int start[257] = {0};
  for (int i = 0; i < n * K; i++) start[s.moe_sel[i] + 1]++;
  for (int e = 0; e < X; e++) start[e + 1] += start[e];
  int fill[256];
  std::copy(start, start + X, fill);
  for (int i = 0; i < n * K; i++) s.moe_rows[fill[s.moe_sel[i]]++] = i;  // i = row * K + slot

  for (int e = 0; e < X; e++) {
    const int m = start[e + 1] - start[e];
    if (m == 0) continue;  // an expert no row chose is not read
    const int32_t* pairs = s.moe_rows + start[e];
    for (int j = 0; j < m; j++) std::memcpy(s.moe_x + (size_t)j * E, s.xn + (size_t)(pairs[j] / K) * E, sizeof(float) * E);
    cpu::matmul(L.gate_exps[(size_t)e], s.moe_x, m, s.gate, s.pool);
    cpu::matmul(L.up_exps[(size_t)e], s.moe_x, m, s.up, s.pool);
    if (s.trace) (*s.trace)("ffn_moe_gate", il, s.gate, m, F);  // one note per expert read, of its m rows
    for (int j = 0; j < m; j++) silu_mul(s.gate + (size_t)j * F, s.up + (size_t)j * F, F);
    cpu::matmul(L.down_exps[(size_t)e], s.gate, m, s.moe_x, s.pool);
    for (int j = 0; j < m; j++) {
      std::memcpy(s.moe_y + (size_t)pairs[j] * E, s.moe_x + (size_t)j * E, sizeof(float) * E);
    }
  }

  // out = sum over slots of w * E(x), in slot order, each product rounded first (ggml_mul, then
  // ggml_add of the slots' views one after another).
  for (int r = 0; r < n; r++) {
    float* out = s.tmp + (size_t)r * E;
    const float* w = s.moe_w + (size_t)r * K;
    const float* y = s.moe_y + (size_t)r * K * E;
    for (int i = 0; i < E; i++) out[i] = y[i] * w[0];
    for (int j = 1; j < K; j++) {
      const float* yj = y + (size_t)j * E;
      for (int i = 0; i < E; i++) out[i] += yj[i] * w[j];
    }
  }
  s.note("ffn_moe_out", il, s.tmp, E);
}

}  // namespace qd::model
