#include "speculative/drafter_choice.h"

#include <cstring>

#include "common/error.h"
#include "quickdraft/engine.h"
#include "speculative/drafter_hybrid.h"
#include "speculative/drafter_model.h"

namespace qd::speculative {

DrafterChoice::DrafterChoice(Drafter* main, int ngram_min, int ngram_max)
    : main_(main), ngram_min_(ngram_min), ngram_max_(ngram_max) {}

Drafter* DrafterChoice::pick(const std::string& name) {
  if (name.empty()) return main_;
  const DrafterKind kind = parse_drafter_kind(name);
  auto* hybrid = dynamic_cast<HybridDrafter*>(main_);
  ModelDrafter* model = hybrid ? &hybrid->model() : dynamic_cast<ModelDrafter*>(main_);
  const bool self = model && std::strcmp(model->name(), "self") == 0;
  const bool mtp = model && std::strcmp(model->name(), "mtp") == 0;
  switch (kind) {
    case DrafterKind::none: return nullptr;
    case DrafterKind::ngram:
      if (auto* own = dynamic_cast<NgramDrafter*>(main_)) return own;
      if (!ngram_) ngram_ = std::make_unique<NgramDrafter>(ngram_min_, ngram_max_);
      return ngram_.get();
    case DrafterKind::model:
      if (model && !self && !mtp) return model;
      break;
    case DrafterKind::self:  // skipped layers with their lookup of copies, or the file's MTP head
      if (self) return main_;
      if (mtp) return model;
      break;
    case DrafterKind::mtp:
      if (mtp) return model;
      break;
    case DrafterKind::hybrid:
      if (hybrid && !self) return hybrid;
      break;
  }
  throw ArgError("drafter '" + name + "' is not loaded in this engine (it drafts with '" +
                 (main_ ? main_->name() : "none") + "'); pick none, ngram or what it loaded");
}

}  // namespace qd::speculative
