// A qd::Context (a real model's KV cache and forward pass) as the loop's LogitSource.
#pragma once
#include <memory>

#include "model/model.h"
#include "speculative/logit_source.h"

namespace qd::speculative {

class ContextSource : public LogitSource {
 public:
  explicit ContextSource(std::unique_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
  int n_vocab() const override { return ctx_->model().n_vocab(); }
  int n_ctx() const override { return ctx_->n_ctx(); }
  int n_past() const override { return ctx_->n_past(); }
  void eval(const int32_t* tokens, int n, float* logits, bool last_only) override {
    ctx_->eval(tokens, n, logits, last_only);
  }
  void truncate(int n_past) override { ctx_->truncate(n_past); }
  int truncate_floor() const override { return ctx_->truncate_floor(); }
  int shared_prefix() const override { return ctx_->base() ? ctx_->base()->n_past() : -1; }
  Context& context() { return *ctx_; }

 private:
  std::unique_ptr<Context> ctx_;
};

}  // namespace qd::speculative
