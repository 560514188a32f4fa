// What the speculative loop needs from a language model: logits for tokens appended to a sequence
// state (a KV cache, or a hybrid model's KV cache and recurrent state) that can be cut back. A qd::Context (context_source.h) is the real one; tests use
// testing::TableSource (cpp/bindings/testing/), a tiny synthetic one with exact, known distributions.
#pragma once
#include <cstdint>

namespace qd::speculative {

class LogitSource {
 public:
  virtual ~LogitSource() = default;
  virtual int n_vocab() const = 0;
  virtual int n_ctx() const = 0;
  virtual int n_past() const = 0;
  // Appends n tokens at positions n_past()..; logits: [n][n_vocab], or [1][n_vocab] when
  // last_only, or nullptr to skip the output layer.
  virtual void eval(const int32_t* tokens, int n, float* logits, bool last_only) = 0;
  virtual void truncate(int n_past) = 0;
  // The smallest n_past > 0 that truncate() accepts now: 0 (any) for a KV cache; a recurrent
  // model's state returns only to positions inside its rollback window (or to 0).
  virtual int truncate_floor() const { return 0; }
  // A source that reads the target's KV cache (a layer-skipping view of the target's context):
  // how many leading positions that cache holds now, which truncate() may move n_past up to
  // and which never need evaluating here; -1 for a source with a cache of its own.
  virtual int shared_prefix() const { return -1; }
};

}  // namespace qd::speculative
