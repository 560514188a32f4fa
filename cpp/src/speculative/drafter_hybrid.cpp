#include "speculative/drafter_hybrid.h"

#include "common/error.h"

namespace qd::speculative {

HybridDrafter::HybridDrafter(std::unique_ptr<ModelDrafter> model, NgramDrafter ngram, const char* name)
    : model_(std::move(model)), ngram_(ngram), name_(name) {
  if (!model_) throw ArgError("hybrid drafter: no draft model");
}

int HybridDrafter::next_source(const std::vector<int32_t>& history) { return ngram_.find(history) >= 0 ? 1 : 0; }

void HybridDrafter::propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) {
  if (req.source == 1) {
    ngram_.propose(history, req, out);
    out->source = 1;
    return;
  }
  model_->propose(history, req, out);
  out->source = 0;
}

}  // namespace qd::speculative
