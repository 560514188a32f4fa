// The n-gram proposal when the history has a match, the draft model otherwise. Source 0 is the
// model and source 1 the n-gram lookup, so the draft-length controller learns each separately,
// and where both could draft it picks the one it expects to pay more (alternative_source): the
// n-gram's copies in an edited file, the model's drafts of new text whose few matches are
// chance ones.
#pragma once
#include <memory>

#include "speculative/drafter_model.h"
#include "speculative/drafter_ngram.h"

namespace qd::speculative {

class HybridDrafter : public Drafter {
 public:
  HybridDrafter(std::unique_ptr<ModelDrafter> model, NgramDrafter ngram);
  const char* name() const override { return "hybrid"; }
  int n_sources() const override { return 2; }
  const char* source_name(int s) const override { return s == 1 ? ngram_.name() : model_->name(); }
  int next_source(const std::vector<int32_t>& history) override;
  int alternative_source(int source) const override { return source == 1 ? 0 : -1; }
  double cost_hint(int source) const override { return source == 1 ? ngram_.cost_hint(0) : model_->cost_hint(0); }
  int max_catch_up(int source) const override { return source == 1 ? 0 : model_->max_catch_up(0); }
  void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) override;
  bool prefill(const std::vector<int32_t>& history, int max_tokens, int* evaluated) override {
    return model_->prefill(history, max_tokens, evaluated);
  }
  ModelDrafter& model() { return *model_; }
  NgramDrafter& ngram() { return ngram_; }

 private:
  std::unique_ptr<ModelDrafter> model_;
  NgramDrafter ngram_;
};

}  // namespace qd::speculative
