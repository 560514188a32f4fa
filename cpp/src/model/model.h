// A loaded model (weights viewed in place in the GGUF mapping) and the contexts that run it.
//
// The interface between the forward pass (cpp/src/model/) and the speculative loop
// (cpp/src/speculative/):
//
//   auto model = qd::Model::load("m.gguf");              // validates, maps, no weight copy
//   qd::Context ctx(model, /*n_ctx=*/4096, /*n_threads=*/2);
//   std::vector<float> logits(n * model->n_vocab());
//   ctx.eval(tokens, n, logits.data());                   // continues from ctx.n_past()
//   ctx.truncate(ctx.n_past() - 3);                       // drop the last 3 positions of KV
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"

namespace qd {

class ThreadPool;

struct LoadOptions {
  // A GGML type name ("q4_0"; its type-table row must have from_float): every weight matrix
  // stored in a wider type (more bytes per weight) is requantized to it at load, through float32
  // row by row, into memory that replaces the mapped pages. Empty: the weights as stored.
  std::string requantize;
  // Map the file (true) or read it into memory (false: immune to the file being truncated or
  // rewritten while in use). Repacked and requantized weights live in memory either way.
  bool mmap = true;
  // The rows of the output layer the model will compute, given its vocabulary size: the rest
  // are neither requantized nor repacked, and a context computes only a draft head within those
  // rows (Context::set_head_subset; its extra ids past them are read from the stored matrix).
  // Empty, or <= 0 or >= n_vocab: all of them.
  std::function<int64_t(int64_t n_vocab)> output_rows;
};

struct Hparams {
  std::string arch;  // general.architecture: "llama", "qwen2", "gemma3", "qwen3", ...
  int n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
  int head_dim = 0, n_ff = 0;
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // mixture of experts (qwen3moe); 0: dense
  float rms_eps = 1e-5f, rope_base = 10000.0f, rope_base_swa = 10000.0f;
  int sliding_window = 0;      // 0: none
  float logit_softcap = 0.0f;  // 0: none

  int n_rot = 0;                   // rotated dimensions per head (<= head_dim, even)
  bool rope_neox = false;          // pairs (i, i + n_rot/2) (NEOX) instead of (2i, 2i+1) (normal)
  std::string rope_scaling = "none";  // rope.scaling.type: "none", "linear", "yarn"
  float rope_freq_scale = 1.0f;    // rope scaling of the global layers: 1 / rope.scaling.factor
  // YaRN (rope_scaling "yarn"), as llama.cpp computes it: pair i's angle blends the interpolated
  // (scaled) and the original angle by a ramp over the pairs between the correction dims (from
  // n_ctx_orig and betas 32 / 1); cos and sin are multiplied by rope_attn_factor * (1 + 0.1 ln factor).
  float rope_ext_factor = 0.0f;    // 1 for yarn, 0 otherwise
  float rope_attn_factor = 1.0f;   // rope.scaling.attn_factor: multiplies cos and sin (any scaling)
  int rope_n_ctx_orig = 0;         // rope.scaling.original_context_length, else context_length
  float attn_scale = 0.0f;         // multiplies q.k before the softmax
  bool attn_scale_q = false;       // phi3: multiplies q instead, before q is rounded to half
  float embd_scale = 1.0f;         // multiplies the token embeddings
  std::vector<uint8_t> swa_layers; // [n_layer]: 1 where the layer attends within sliding_window
  std::vector<uint8_t> nope_layers;  // [n_layer]: 1 where q and k get no rope (SmolLM3's every 4th)
  // rope.dimension_sections (qwen35's interleaved M-RoPE): for text every section sees the position
  // except the 4th, so a rotated pair whose interleaved sector is the 4th's keeps angle 0.
  std::vector<uint8_t> rope_pair_static;  // [n_rot / 2]: 1 where the pair is not rotated; empty: none

  // Hybrid recurrent models (qwen35): Gated DeltaNet layers carry a recurrent state, not a KV cache.
  std::vector<uint8_t> recurrent_layers;  // [n_layer]: 1 for a Gated DeltaNet layer; empty: none
  int ssm_d_conv = 0;     // ssm.conv_kernel: causal conv1d taps
  int ssm_d_state = 0;    // ssm.state_size: head dim of the linear attention's q, k and v
  int ssm_n_k_heads = 0;  // ssm.group_count: q and k heads
  int ssm_n_v_heads = 0;  // ssm.time_step_rank: v heads (= state heads)
  bool attn_output_gate = false;  // qwen35: wq gives [q | gate] per head; out *= sigmoid(gate)
  int n_mtp = 0;  // nextn_predict_layers: multi-token-prediction layers stored after the n_layer trunk layers

  bool recurrent() const { return !recurrent_layers.empty(); }
};

class Model {
 public:
  // Loads and validates; throws GGUFError / UnsupportedError naming what is wrong, ArgError for
  // bad options.
  static std::shared_ptr<const Model> load(const std::string& path, const LoadOptions& opt = {});
  // The architectures load() accepts, in the order error messages list them.
  static const std::vector<std::string>& supported_archs();
  virtual ~Model() = default;

  const Hparams& hparams() const { return hp_; }
  int n_vocab() const { return hp_.n_vocab; }
  int n_layer() const { return hp_.n_layer; }
  const gguf::File& file() const { return *file_; }
  std::shared_ptr<const gguf::File> file_ptr() const { return file_; }
  // Every weight matrix as computed with, in load order (a tied output layer is listed once, as
  // its embedding): its GGUF tensor name, GGML type id (after any requantization) and storage.
  struct MatrixInfo {
    std::string name;
    uint32_t type = 0;
    const uint8_t* data = nullptr;  // in the file's mapping, a requantized copy, or the rows8 buffer
    size_t bytes = 0;
    bool rows8 = false;  // repacked into the rows8 layout (cpu/repack.h)
  };
  virtual std::vector<MatrixInfo> matrices() const = 0;

 protected:
  Hparams hp_;
  std::shared_ptr<const gguf::File> file_;
};

// KV cache + scratch for one sequence over a shared Model. Not thread-safe; one per user.
class Context {
 public:
  Context(std::shared_ptr<const Model> model, int n_ctx, int n_threads);
  // Runs on `pool`, which other contexts may share: a drafter and its target never run at the
  // same time, and one set of threads for both never leaves a spinning worker competing with
  // the other's (on 2 cores that costs a measurable share of every switch).
  Context(std::shared_ptr<const Model> model, int n_ctx, std::shared_ptr<ThreadPool> pool);
  // Self-speculation's drafter: a view of `base` (its model, threads and KV cache) that runs only
  // the layers not in skip_layers. It attends to base's keys and values at positions below
  // base.n_past() (truncate() moves it up to there: nothing to catch up on) and writes its own
  // after them, where base overwrites them as it evaluates those positions (it never reads a
  // position it has not written). Once base has evaluated or truncated, the view must truncate()
  // before it evaluates again (ArgError). base must outlive it and not evaluate while it does. Not for
  // a recurrent model, whose state is not per position (ArgError).
  Context(Context& base, std::vector<int> skip_layers);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> model_ptr() const { return model_; }
  int n_ctx() const { return n_ctx_; }
  int n_past() const { return n_past_; }
  int n_threads() const;
  std::shared_ptr<ThreadPool> thread_pool() const;
  const Context* base() const { return base_; }  // the context a view reads, else nullptr

  // Evaluate n tokens at positions n_past()..n_past()+n-1, appending them to the KV cache.
  // logits: [n][n_vocab] for every position (nullptr: skip the output layer entirely),
  // or only for the last position when last_only is true ([1][n_vocab]).
  // Throws ArgError on n == 0, out-of-vocab ids, or exceeding n_ctx (state unchanged then).
  void eval(const int32_t* tokens, int n, float* logits, bool last_only = false);

  // Keep the first n_past positions of the sequence state, drop the rest. A transformer can return
  // to any n_past; a hybrid recurrent model (qwen35) only to 0 or to n_past >= truncate_floor()
  // (the states inside its rollback window, rollback.h); ArgError otherwise, state unchanged.
  void truncate(int n_past);
  void reset() { truncate(0); }
  // The smallest n_past > 0 truncate() accepts now (0 for a transformer: any).
  int truncate_floor() const;

  // Recurrent models: how the state returns to a position inside the window (rows of the last
  // evals): Rollback::snapshot keeps the state after each of the last `window` positions,
  // Rollback::recompute keeps the state before the last eval and replays the recurrence. Resets
  // the sequence. No effect on a transformer.
  enum class Rollback { snapshot, recompute };
  void set_rollback(Rollback mode, int window);
  Rollback rollback_mode() const;
  int rollback_window() const;
  size_t recurrent_state_bytes() const;  // 0 for a transformer

  // Called after every micro-batch with its rows' final hidden states after the output norm
  // (llama.cpp's h_nextn: what an MTP head reads), [n][n_embd] at positions pos0..; empty: off.
  using HiddenFn = std::function<void(int pos0, int n, const float* h)>;
  void set_hidden_sink(HiddenFn fn);

  // Draft head: the output layer for ids [0, n_top) only (BPE vocabularies put frequent tokens
  // first), for the ids in `always`, and for every id this context evaluates from now on (the
  // text's own tokens, at most kMaxHeadExtra of them); every other logit is -inf. Computed
  // logits are bit-identical to the full layer's. n_top <= 0 or >= n_vocab: the full layer.
  // For a drafter only: the verifier must see full logits.
  void set_head_subset(int n_top, const std::vector<int32_t>& always = {});
  int head_subset() const;  // n_top, 0 when the full layer is computed
  static constexpr int kMaxHeadExtra = 16384;

  // Self-speculation: layers to skip in the forward pass (empty = none; a view must skip some).
  // Skipped layers hold no keys and values for the positions evaluated meanwhile.
  void set_skip_layers(std::vector<int> layers);
  const std::vector<int>& skip_layers() const { return skip_layers_; }

  // Debugging: called with each intermediate of the forward pass (name as llama.cpp's graph
  // names it, layer or -1, [rows][cols] floats) while set; an empty function turns it off.
  using TraceFn = std::function<void(const char* name, int il, const float* x, int rows, int cols)>;
  void set_trace(TraceFn fn);

 private:
  struct Impl;
  std::shared_ptr<const Model> model_;
  int n_ctx_ = 0;
  int n_past_ = 0;
  Context* base_ = nullptr;  // a view's full context
  uint64_t changes_ = 0;     // evals and truncations so far
  uint64_t base_seen_ = 0;   // a view: base_->changes_ at its last truncate(), which eval() requires
  std::vector<int> skip_layers_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qd
