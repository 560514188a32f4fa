// Reading a family's hyperparameters and weights out of a validated GGUF file, with errors that
// name the file, the key or tensor, and what was expected.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace qd::model {

// Optional per-layer tensors a family asks for (the rest are required by every family).
struct LayerParts {
  bool qkv_bias = false;    // blk.N.attn_{q,k,v}.bias
  bool qk_norm = false;     // blk.N.attn_{q,k}_norm.weight
  bool post_norms = false;  // blk.N.post_attention_norm.weight, blk.N.post_ffw_norm.weight
  bool fused_gate_up = false;  // blk.N.ffn_up.weight is [2 n_ff][n_embd]: gate rows, then up rows
  bool moe = false;  // blk.N.ffn_gate_inp.weight and ffn_{gate,up,down}_exps.weight instead of the dense FFN
};

class Loader {
 public:
  Loader(const gguf::File& file, TransformerModel& model) : f_(file), m_(model) {}

  const gguf::File& file() const { return f_; }
  Hparams& hp() { return m_.hp_; }
  Weights& w() { return m_.w_; }

  // Metadata "<arch>.<key>": nullopt when absent, GGUFError when present with another type.
  std::optional<int64_t> int_key(const std::string& key) const;
  std::optional<double> float_key(const std::string& key) const;
  std::optional<std::string> str_key(const std::string& key) const;
  // An integer key in [lo, hi]; `def` when absent (GGUFError when absent and no default).
  int int_in(const std::string& key, std::optional<int64_t> def, int64_t lo, int64_t hi) const;
  // A finite float key in [lo, hi]; `def` when absent.
  float float_in(const std::string& key, double def, double lo, double hi) const;

  bool has_tensor(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  // A 2-D weight of shape [rows][cols] (GGUF ne = {cols, rows}) of a type we can compute with.
  cpu::Matrix matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // The n 2-D slices of a 3-D weight of shape [n][rows][cols] (GGUF ne = {cols, rows, n}), each a
  // view into the mapped bytes (mixture-of-experts tensors).
  std::vector<cpu::Matrix> matrices(const std::string& name, int64_t cols, int64_t rows, int64_t n) const;
  // Rows [r0, r0 + rows) of m: a view into the same bytes.
  static cpu::Matrix rows_of(const cpu::Matrix& m, int64_t r0, int64_t rows);
  // A 1-D vector of n floats, converted to F32 (into model-owned storage) when stored otherwise.
  const float* vector(const std::string& name, int64_t n);
  // A small 2-D tensor of shape [rows][cols] (GGUF ne = {cols, rows}) as floats, like vector().
  const float* floats(const std::string& name, int64_t cols, int64_t rows);

  [[noreturn]] void fail(const std::string& what) const;          // GGUFError "<path>: what"
  [[noreturn]] void unsupported(const std::string& what) const;   // UnsupportedError "<path>: what"

  // The keys every family shares (embedding_length, block_count, head counts, rope, ...).
  void read_common_hparams();
  // rope.scaling.* (called by read_common_hparams with none, linear, yarn); UnsupportedError
  // naming the type when it is not in `supported`.
  void read_rope_scaling(const std::vector<std::string>& supported);
  // token_embd, output_norm, output (tied to token_embd when absent), rope_freqs, and every
  // layer's norms, projections and feed-forward, plus the optional parts asked for.
  void read_common_weights(LayerParts parts);

 private:
  const gguf::TensorInfo& tensor(const std::string& name) const;
  std::string key(const std::string& k) const { return m_.hp_.arch + "." + k; }

  const gguf::File& f_;
  TransformerModel& m_;
};

}  // namespace qd::model
