// The recurrent state of a hybrid model's Gated DeltaNet layers (qwen35) for one sequence, and how
// it returns to an earlier position: speculation evaluates [last] + draft in one batch and then
// keeps only the accepted prefix, which a KV cache does by forgetting positions but a recurrent
// state cannot (it holds a sum over every position it has seen).
//
// Two ways back, chosen per context (Context::set_rollback):
//   snapshot   the state after each of the last `window` positions is kept, in a ring of
//              window + 1 slots: row p reads the slot of position p and writes the next, so
//              the snapshots cost no copy, only memory; returning is picking a slot.
//   recompute  two slots: the state before the last eval and the live one; the eval's
//              recurrence inputs (q, k, v, gate, beta per row) are kept, and returning to a
//              position inside it replays the recurrence from the saved state for the kept rows.
// The conv1d state is the last d_conv - 1 input rows, kept in a ring by position either way.
//
// Layouts (per recurrent layer r; S = ssm_d_state, H = ssm_n_v_heads, C = conv_dim):
//   state  [slot][H][S][S]  row j of a head's matrix is v-index j over k-index i (llama.cpp's
//                            ggml_gated_delta_net layout: s[j * S + i] = S[i][j])
//   conv   [window + d_conv][C]  the input row of position p at p % (window + d_conv)
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace qd {

class ThreadPool;

namespace model {

class RecurrentState {
 public:
  RecurrentState(const Hparams& hp, Context::Rollback mode, int window);

  Context::Rollback mode() const { return mode_; }
  int window() const { return window_; }
  size_t bytes() const;
  int conv_dim() const { return C_; }
  // Index among the recurrent layers of layer il, or -1 for an attention layer.
  int index(int il) const { return index_[(size_t)il]; }

  // Sequence bookkeeping, by the Context.
  void reset();                          // n_past 0: zero state
  int floor() const { return lo_; }      // the smallest n_past truncate() can return to (0 always works too)
  void truncate(int n_past_now, int n_past);  // lo_ <= n_past <= n_past_now
  void begin_ubatch(int pos0, int n);    // before the layers run over n rows at pos0
  void end_ubatch();                     // after

  // The rows of layer r's recurrence inputs for this ubatch: [n][C] (q, k, v after the conv) and
  // [n][2][H] (gate g, then beta). Kept for replay in recompute mode, scratch otherwise.
  float* qkv_rows(int r);
  float* gb_rows(int r);
  // Causal conv1d over the ubatch's input rows mix [n][C] with taps w [C][d_conv], earlier
  // positions' rows from the ring (zeros before position 0), then SiLU, into qkv_rows(r); then
  // the ring remembers mix's rows.
  void conv_silu(int r, const float* mix, const float* w);
  // The delta rule of layer r over the ubatch's rows (inputs in qkv_rows / gb_rows), from the state
  // at pos0: out [n][H][S]. Each head runs its rows in order; heads are split over the threads.
  void delta_rule(int r, float* out, ThreadPool& pool);

 private:
  float* slot(int r, int s) { return state_.data() + ((size_t)r * n_slots_ + (size_t)s) * state_floats_; }
  // Rows [0, n) of layer r's recurrence from slot `from`, the first row writing slot `to` and each
  // later row the slot next_slot() gives; out may be null (replay).
  void run_rows(int r, const float* qkv, const float* gb, int pos0, int n, float* out, ThreadPool* pool);
  int slot_after(int pos) const;  // snapshot: the slot of the state after position pos (n_past pos + 1)

  Context::Rollback mode_;
  int window_;
  int n_r_ = 0;  // recurrent layers
  int S_, H_, Hk_, C_, d_conv_, ring_;
  int n_slots_;
  size_t state_floats_;                 // H * S * S
  std::vector<int> index_;              // [n_layer]
  std::vector<float> state_;            // [n_r][n_slots][H][S][S]
  std::vector<float> conv_;             // [n_r][ring][C]
  std::vector<float> rec_qkv_, rec_gb_;  // recompute: [n_r][window][C], [n_r][window][2H]
  std::vector<float> tmp_qkv_, tmp_gb_;  // one layer's rows when not recorded: [rows][C], [rows][2H]

  int lo_ = 0;        // smallest reachable n_past
  // The ubatch being run / the last one run.
  int pos0_ = 0, n_ = 0;
  bool recorded_ = false;   // recompute: this ubatch's inputs are kept in rec_*
  int live_ = 0;            // recompute: the slot holding the current state
  int start_ = 0;           // recompute: the slot holding the state at pos0_ (after the ubatch)
  int rec_pos0_ = 0, rec_n_ = 0;  // recompute: the recorded eval
};

}  // namespace model
}  // namespace qd
