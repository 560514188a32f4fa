#include "testing/table_source.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace qd::testing {

TableSource::TableSource(std::vector<float> table, int n_vocab, int n_ctx)
    : table_(std::move(table)), n_vocab_(n_vocab), n_ctx_(n_ctx) {
  if (n_vocab <= 0 || n_ctx <= 0) throw ArgError("TableSource: n_vocab and n_ctx must be > 0");
  if (table_.size() != (size_t)n_vocab * n_vocab * n_vocab)
    throw ArgError("TableSource: table must have n_vocab^3 = " + std::to_string((size_t)n_vocab * n_vocab * n_vocab) +
                   " entries, got " + std::to_string(table_.size()));
}

void TableSource::eval(const int32_t* tokens, int n, float* logits, bool last_only) {
  if (n <= 0) throw ArgError("eval: no tokens");
  if (n_past() + n > n_ctx_) throw ArgError("eval: context of " + std::to_string(n_ctx_) + " tokens exceeded");
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= n_vocab_) throw ArgError("eval: token id out of range");
  for (int i = 0; i < n; i++) {
    const int32_t cur = tokens[i];
    const int32_t prev = tokens_.empty() ? cur : tokens_.back();
    tokens_.push_back(cur);
    if (!logits || (last_only && i != n - 1)) continue;
    const float* row = table_.data() + ((size_t)prev * n_vocab_ + cur) * n_vocab_;
    std::copy(row, row + n_vocab_, logits + (last_only ? 0 : (size_t)i * n_vocab_));
  }
}

void TableSource::truncate(int n_past) {
  if (n_past < 0 || n_past > this->n_past()) throw ArgError("truncate: bad position " + std::to_string(n_past));
  tokens_.resize(n_past);
}

}  // namespace qd::testing
