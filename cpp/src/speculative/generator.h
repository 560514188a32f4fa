// The speculative decoding loop (DESIGN.md "Layers and the way data flows"):
//
//   k    = draft_length.next()               adaptive, may be 0 (plain decoding)
//   d, q = drafter.propose(history, k)
//   p    = target.eval([last] + d)           ONE batched call, k + 1 rows
//   n, t = verifier.verify(d, q, p)          greedy match or min(1, p/q) + residual sample
//   target KV keeps history + d[:n]; the drafter drops the rest on its next propose
//   emit d[:n] + [t]
//
// The target's KV cache always holds every history token but the last, which the next step
// evaluates together with the draft. A call may pick another of the engine's drafters, a smaller
// draft_max, and a prediction (PredictionDrafter over the call's drafter); the draft-length
// controller keeps what it learned per drafter (and with or without a prediction). Stops: EOS/EOT ids, max_tokens, stop strings (spanning
// tokens; their text is not emitted), context full, cancel(). step() does one prefill chunk or
// one draft-verify round, so a caller can stream and cancel between steps.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "quickdraft/engine.h"
#include "sampling/rng.h"
#include "sampling/sampler_params.h"
#include "speculative/draft_length.h"
#include "speculative/drafter.h"
#include "speculative/drafter_prediction.h"
#include "speculative/logit_source.h"
#include "speculative/verifier.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/token_stream.h"

namespace qd::speculative {

struct GeneratorConfig {
  DraftLengthOptions draft_length;
  float p_min = 0.0f;              // a draft ends at the drafter's first token whose top probability is below
  std::vector<int32_t> stop_ids;   // EOS / EOT / end-of-generation ids
  int prefill_chunk = 256;         // prompt tokens per step (bounds the cancel latency)
};

class Generator {
 public:
  // target and (optional) drafter and text must outlive the generator. text == nullptr: chunks
  // carry no text and stop strings are refused.
  Generator(LogitSource& target, Drafter* drafter, const TokenStreamSource* text, GeneratorConfig cfg);

  // Begins a generation. KV entries shared with the previous call's tokens are reused.
  void start(const std::vector<int32_t>& prompt, const GenerateOptions& opt);
  // The same, drafting with `drafter` (null: none) instead of the constructor's; it must
  // outlive the generation. opt.drafter is not read here (the engine resolves it).
  void start(const std::vector<int32_t>& prompt, const GenerateOptions& opt, Drafter* drafter);
  // One prefill chunk or one draft-verify round; appends emitted chunks to out. Returns false
  // when generation has finished (then finish_reason() says why).
  bool step(std::vector<Chunk>* out);
  // Steps until finished; on_chunk returning false, or *cancel turning true, cancels.
  FinishReason run(const std::function<bool(const Chunk&)>& on_chunk, const std::atomic<bool>* cancel = nullptr);
  // Before the first generation (the engine's warm-up at load, for adaptive drafting): after an
  // untimed forward of kWarmUpRows rows (it pays the first touches of the weights and buffers),
  // times the target's forward of 1 to kWarmUpRows rows, and the drafter's step twice (the first
  // dropped, as every cost's first timing is), so that every draft-length controller starts from
  // this machine's costs instead of spending its first generation learning them. The caches are
  // left empty. Returns the seconds it took.
  double warm_up();
  static constexpr int kWarmUpRows = 4;
  // Thread-safe: the next step() finishes with "cancelled", keeping what was produced.
  void cancel() { cancel_.store(true); }

  bool finished() const { return finish_ != FinishReason::none; }
  FinishReason finish_reason() const { return finish_; }
  const Stats& stats() const { return stats_; }
  const std::vector<int32_t>& generated() const { return generated_; }
  const std::string& text() const { return text_; }
  const DraftLength& draft_length() const { return *length_; }

 private:
  bool prefill_step();
  void speculate_step(std::vector<Chunk>* out);
  // Emits tokens one by one until a stop; returns false once generation finished.
  bool emit(const int32_t* tokens, int n, bool from_draft, std::vector<Chunk>* out);
  void finish(FinishReason r, std::vector<Chunk>* out);
  bool is_stop_id(int32_t t) const;
  // The draft-length controller for drafting with base (and a prediction over it).
  DraftLength* lane(const Drafter* base, bool prediction, const Drafter* active);

  struct Lane {
    const Drafter* base;
    bool prediction;
    std::unique_ptr<DraftLength> length;
  };

  // A new lane's controller starts from warm_up()'s timings: the target's, and the drafter's
  // steps where the lane drafts with the default drafter.
  void start_from_warm_up(Lane& l);

  LogitSource& target_;
  Drafter* default_drafter_;
  Drafter* drafter_;                             // this generation's: the default, another, or prediction_
  std::unique_ptr<PredictionDrafter> prediction_;
  const TokenStreamSource* text_src_;
  GeneratorConfig cfg_;
  std::vector<Lane> lanes_;
  std::vector<double> warm_forwards_;  // warm_up()'s seconds for the forward of i + 1 rows
  std::vector<double> warm_steps_;     // warm_up()'s draft steps of the default drafter
  DraftLength* length_;                          // this generation's lane
  int draft_max_;                                // this generation's cap (<= cfg_.draft_length.draft_max)
  bool adaptive_ = true;                         // this generation's lengths come from the controller
  GenerateOptions opt_;
  std::unique_ptr<Verifier> verifier_;
  sampling::Rng rng_;
  std::unique_ptr<TokenStream> stream_;
  std::unique_ptr<StopStrings> stops_;

  std::vector<int32_t> history_;    // prompt + generated
  std::vector<int32_t> kv_tokens_;  // exactly the tokens in the target's KV cache
  std::vector<int32_t> generated_;
  std::string text_;
  std::vector<float> logits_;
  std::vector<int32_t> rows_;       // the verify pass's input: [last] + draft
  Draft draft_;
  bool drafter_ready_ = false;
  std::atomic<bool> cancel_{false};
  FinishReason finish_ = FinishReason::length;
  Stats stats_;
};

}  // namespace qd::speculative
