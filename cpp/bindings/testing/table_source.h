// A synthetic language model for tests: logits come from a table indexed by the previous and
// the current token, [n_vocab][n_vocab][n_vocab] (row [prev][cur] gives the next-token logits;
// the first position uses prev = cur). The "KV cache" is the list of tokens seen, so a loop
// that forgets to truncate after a rejection gets different logits and fails its tests.
#pragma once
#include <vector>

#include "speculative/logit_source.h"

namespace qd::testing {

class TableSource : public speculative::LogitSource {
 public:
  TableSource(std::vector<float> table, int n_vocab, int n_ctx);

  int n_vocab() const override { return n_vocab_; }
  int n_ctx() const override { return n_ctx_; }
  int n_past() const override { return (int)tokens_.size(); }
  void eval(const int32_t* tokens, int n, float* logits, bool last_only) override;
  void truncate(int n_past) override;

 private:
  std::vector<float> table_;  // [n_vocab][n_vocab][n_vocab]
  int n_vocab_, n_ctx_;
  std::vector<int32_t> tokens_;
};

}  // namespace qd::testing
