// The n-gram proposal where the history is being copied, the draft model otherwise. Source 0 is
// the model and source 1 the lookup, which drafts only copies (a match of at least
// NgramDrafter::kCopyRun tokens; shorter ones in new text are chance, and the model drafts them
// better). The draft-length controller learns each source separately, and where both could
// draft it picks the one it expects to pay more (alternative_source).
//
// The engine's "hybrid" drafter is a draft model with this lookup. Its "self" drafter is the
// target with layers skipped with the same lookup, under the name "self" (a lookup costs no
// memory and no model step, so self-speculation always has it).
#pragma once
#include <memory>

#include "speculative/drafter_model.h"
#include "speculative/drafter_ngram.h"

namespace qd::speculative {

class HybridDrafter : public Drafter {
 public:
  HybridDrafter(std::unique_ptr<ModelDrafter> model, NgramDrafter ngram, const char* name = "hybrid");
  const char* name() const override { return name_; }
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
  double time_step() override { return model_->time_step(); }  // source 0's: the model
  ModelDrafter& model() { return *model_; }

 private:
  std::unique_ptr<ModelDrafter> model_;
  NgramDrafter ngram_;
  const char* name_;
};

}  // namespace qd::speculative
