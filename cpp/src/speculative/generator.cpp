#include "speculative/generator.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace qd::speculative {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace


Generator::Generator(LogitSource& target, Drafter* drafter, const TokenStreamSource* text, GeneratorConfig cfg)
    : target_(target),
      default_drafter_(drafter),
      drafter_(drafter),
      text_src_(text),
      cfg_(std::move(cfg)),
      draft_max_(cfg_.draft_length.draft_max) {
  if (!(cfg_.p_min >= 0.0f && cfg_.p_min <= 1.0f)) throw ArgError("p_min must be in [0, 1]");
  if (cfg_.prefill_chunk < 1) throw ArgError("prefill_chunk must be >= 1");
  length_ = lane(drafter, false, drafter);
  stats_.drafter = drafter_ ? drafter_->name() : "none";
}

DraftLength* Generator::lane(const Drafter* base, bool prediction, const Drafter* active) {
  for (Lane& l : lanes_)
    if (l.base == base && l.prediction == prediction) return l.length.get();
  const int n_sources = active ? active->n_sources() : 1;
  auto length = std::make_unique<DraftLength>(n_sources, cfg_.draft_length);
  for (int i = 0; active && i < n_sources; i++) length->set_cost_hint(i, active->cost_hint(i), active->max_catch_up(i));
  lanes_.push_back({base, prediction, std::move(length)});
  start_from_warm_up(lanes_.back());
  return lanes_.back().length.get();
}

double Generator::warm_up() {
  if (!history_.empty()) throw ArgError("Generator::warm_up after a generation began");
  const double t_start = now();
  const int max_rows = std::min({kWarmUpRows, cfg_.draft_length.draft_max + 1, target_.n_ctx()});
  std::vector<int32_t> ids(max_rows, 0);
  std::vector<float> logits((size_t)max_rows * target_.n_vocab());
  warm_forwards_.clear();
  target_.eval(ids.data(), max_rows, logits.data(), false);  // untimed: pages the weights in, sizes the buffers
  for (int n = 1; n <= max_rows; n++) {
    target_.truncate(0);
    const double t0 = now();
    target_.eval(ids.data(), n, logits.data(), false);
    warm_forwards_.push_back(now() - t0);
  }
  target_.truncate(0);
  warm_steps_.clear();
  for (int rep = 0; default_drafter_ && rep < 2; rep++) {
    const double seconds = default_drafter_->time_step();
    if (seconds >= 0.0) warm_steps_.push_back(seconds);
  }
  for (Lane& l : lanes_) start_from_warm_up(l);  // the default lane, made at construction
  return now() - t_start;
}

void Generator::start_from_warm_up(Lane& l) {
  for (size_t i = 0; i < warm_forwards_.size(); i++) l.length->record_forward((int)i + 1, warm_forwards_[i]);
  if (l.base != default_drafter_ || l.prediction) return;  // the steps timed are the default drafter's
  // As a draft of two tokens: one step times the first drafted token and each further one alike.
  for (double seconds : warm_steps_) l.length->record_draft(0, 2, seconds, seconds);
}

bool Generator::is_stop_id(int32_t t) const {
  return !opt_.ignore_eos && std::find(cfg_.stop_ids.begin(), cfg_.stop_ids.end(), t) != cfg_.stop_ids.end();
}

void Generator::start(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
  start(prompt, opt, default_drafter_);
}

void Generator::start(const std::vector<int32_t>& prompt, const GenerateOptions& opt, Drafter* drafter) {
  if (prompt.empty()) throw ArgError("the prompt has no tokens");
  if ((int)prompt.size() > target_.n_ctx())
    throw ArgError("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context of " +
                   std::to_string(target_.n_ctx()) + "; use a larger n_ctx or a shorter prompt");
  for (int32_t t : prompt)
    if (t < 0 || t >= target_.n_vocab())
      throw ArgError("prompt token id " + std::to_string(t) + " is outside the vocabulary of " +
                     std::to_string(target_.n_vocab()));
  if (opt.max_tokens < 0) throw ArgError("max_tokens must be >= 0");
  if (!opt.stop.empty() && !text_src_) throw ArgError("stop strings need a tokenizer");
  const int cap = cfg_.draft_length.draft_max;
  if (opt.draft_max < -1 || opt.draft_max > cap)
    throw ArgError("draft_max must be -1 (the engine's) or in [0, " + std::to_string(cap) +
                   "] (the engine's draft_max), got " + std::to_string(opt.draft_max));
  for (int32_t t : opt.prediction)
    if (t < 0 || t >= target_.n_vocab())
      throw ArgError("prediction token id " + std::to_string(t) + " is outside the vocabulary of " +
                     std::to_string(target_.n_vocab()));
  // Validates the sampler settings. A seeded sampled generation draws by the race, drafts too.
  auto verifier = std::make_unique<Verifier>(opt.sampling, opt.reproducible && !opt.sampling.greedy());
  auto stops = std::make_unique<StopStrings>(opt.stop);
  // Past the checks: from here on the generator belongs to the new generation.
  opt_ = opt;
  opt_.prediction.clear();  // the drafter keeps its own copy
  draft_max_ = opt.draft_max < 0 ? cap : opt.draft_max;
  adaptive_ = cfg_.draft_length.adaptive && opt.adaptive;
  verifier_ = std::move(verifier);
  stops_ = std::move(stops);
  drafter_ = drafter;
  prediction_.reset();
  if (!opt.prediction.empty()) {
    prediction_ = std::make_unique<PredictionDrafter>(opt.prediction, drafter, prompt.size());
    drafter_ = prediction_.get();
  }
  length_ = lane(drafter, prediction_ != nullptr, drafter_);
  stream_ = text_src_ ? text_src_->open(prompt) : nullptr;
  rng_.reseed(opt.sampling.seed);
  length_->new_sequence();
  // A call's prediction is its own: the lane's evidence came from other calls' predictions.
  if (prediction_) length_->restart(prediction_->source());

  // Reuse the KV entries the new prompt shares with what the cache holds (chat turns).
  size_t keep = 0;
  const size_t limit = std::min(kv_tokens_.size(), prompt.size() - 1);
  while (keep < limit && kv_tokens_[keep] == prompt[keep]) keep++;
  // A recurrent target returns only to recent positions: further back it starts over.
  if (keep != (size_t)target_.n_past() && (int)keep < target_.truncate_floor()) keep = 0;
  if (keep != (size_t)target_.n_past()) target_.truncate((int)keep);
  kv_tokens_.resize(keep);

  history_ = prompt;
  generated_.clear();
  text_.clear();
  drafter_ready_ = drafter_ == nullptr;
  cancel_.store(false);
  finish_ = FinishReason::none;
  stats_ = Stats();
  stats_.drafter = drafter ? drafter->name() : "none";
  for (int i = 0; drafter_ && i < drafter_->n_sources(); i++) stats_.source_names.push_back(drafter_->source_name(i));
  stats_.source_drafted.assign(stats_.source_names.size(), 0);
  stats_.source_accepted.assign(stats_.source_names.size(), 0);
  stats_.prediction_tokens = (int)opt.prediction.size();
  stats_.seed = opt.sampling.seed;
  stats_.prompt_tokens = (int)prompt.size();
  stats_.prompt_tokens_cached = (int)keep;
  stats_.accepted_histogram.assign(cfg_.draft_length.draft_max + 1, 0);
  stats_.draft_length_histogram.assign(cfg_.draft_length.draft_max + 1, 0);
  logits_.resize((size_t)(cfg_.draft_length.draft_max + 1) * target_.n_vocab());
  if (opt.max_tokens == 0) finish(FinishReason::length, nullptr);
}

bool Generator::prefill_step() {
  const size_t want = history_.size() - 1;
  const double t0 = now();
  bool busy = false;
  if (kv_tokens_.size() < want) {
    const int n = (int)std::min<size_t>(want - kv_tokens_.size(), cfg_.prefill_chunk);
    target_.eval(history_.data() + kv_tokens_.size(), n, nullptr, false);
    kv_tokens_.insert(kv_tokens_.end(), history_.begin() + kv_tokens_.size(), history_.begin() + kv_tokens_.size() + n);
    busy = true;
  } else if (!drafter_ready_) {
    drafter_ready_ = drafter_->prefill(history_, cfg_.prefill_chunk, &stats_.draft_prompt_tokens);
    busy = true;
  }
  stats_.time_prompt += now() - t0;
  return busy;
}

void Generator::speculate_step(std::vector<Chunk>* out) {
  const int room = target_.n_ctx() - (int)kv_tokens_.size();  // positions left in the target's KV
  if (room < 1) return finish(FinishReason::context, out);
  const int remaining = opt_.max_tokens - (int)generated_.size();
  const double t_start = now();

  // Draft: never more than the context holds or than could be emitted.
  int k = 0, source = 0;
  draft_.clear();
  if (drafter_) {
    source = drafter_->next_source(history_);
    const bool full = drafter_->draft_in_full();
    // A choice between sources from timings only where the lengths come from timings too.
    const int alt = drafter_->alternative_source(source);
    if (alt >= 0 && !full && adaptive_) source = length_->choose(source, alt);
    const int wanted = full || !adaptive_ ? draft_max_ : length_->next(source);
    k = std::min({wanted, draft_max_, room - 1, remaining - 1});
  }
  if (k > 0) {
    const DraftRequest req{k, &opt_.sampling, &rng_, cfg_.p_min, target_.n_vocab(), source, verifier_->race()};
    drafter_->propose(history_, req, &draft_);
    draft_.source = source;
    const double dt = now() - t_start;
    stats_.time_draft += dt;
    const int n = (int)draft_.tokens.size();
    if (draft_.first_seconds >= 0) {
      length_->record_draft(source, n, draft_.first_seconds, draft_.step_seconds);
    } else {
      length_->record_draft(source, n, dt / std::max(1, n));
    }
    if (draft_.catch_up_seconds >= 0) length_->record_catch_up(source, draft_.catch_up_seconds, draft_.catch_up_tokens);
  }
  const int n_draft = (int)draft_.tokens.size();

  // Verify: one batched target pass over [last] + draft.
  std::vector<int32_t>& rows = rows_;  // reused: no allocation per step
  rows.clear();
  rows.push_back(history_.back());
  rows.insert(rows.end(), draft_.tokens.begin(), draft_.tokens.end());
  const double t_verify = now();
  target_.eval(rows.data(), (int)rows.size(), logits_.data(), false);
  const double t_sample = now();
  const Verdict v = verifier_->verify(logits_.data(), target_.n_vocab(), history_, draft_, rng_);
  const double t_end = now();
  stats_.time_verify += t_sample - t_verify;
  stats_.time_sampling += t_end - t_sample;

  // Keep [last] + the accepted draft tokens in the KV cache; the new token is evaluated next.
  kv_tokens_.insert(kv_tokens_.end(), rows.begin(), rows.begin() + 1 + v.n_accepted);
  target_.truncate((int)kv_tokens_.size());

  length_->record_verify(source, (int)rows.size(), v.n_accepted, t_sample - t_verify, draft_.n_sure);
  stats_.steps++;
  stats_.drafted += n_draft;
  stats_.accepted += v.n_accepted;
  if (n_draft > 0) {
    stats_.source_drafted[source] += n_draft;
    stats_.source_accepted[source] += v.n_accepted;
    if (prediction_ && source == prediction_->source()) {
      stats_.accepted_prediction_tokens += v.n_accepted;
      stats_.rejected_prediction_tokens += n_draft - v.n_accepted;
    }
  }
  stats_.draft_length_histogram[n_draft]++;
  stats_.accepted_histogram[v.n_accepted]++;

  if (emit(draft_.tokens.data(), v.n_accepted, true, out)) emit(&v.token, 1, false, out);
  stats_.time_generate += now() - t_start;
}

bool Generator::emit(const int32_t* tokens, int n, bool from_draft, std::vector<Chunk>* out) {
  if (n == 0) return true;
  Chunk chunk;
  chunk.from_draft = from_draft;
  FinishReason reason = FinishReason::none;
  for (int i = 0; i < n && reason == FinishReason::none; i++) {
    const int32_t t = tokens[i];
    if (is_stop_id(t)) {
      reason = FinishReason::eos;
      break;
    }
    history_.push_back(t);
    generated_.push_back(t);
    stats_.generated_tokens++;
    chunk.tokens.push_back(t);
    if (stream_) chunk.text += stops_->push(stream_->push(t));
    if (stops_->stopped()) reason = FinishReason::stop;
    else if ((int)generated_.size() >= opt_.max_tokens) reason = FinishReason::length;
  }
  text_ += chunk.text;
  if (out && (!chunk.tokens.empty() || !chunk.text.empty())) out->push_back(std::move(chunk));
  if (reason != FinishReason::none) finish(reason, out);
  return reason == FinishReason::none;
}

void Generator::finish(FinishReason r, std::vector<Chunk>* out) {
  finish_ = r;
  if (!stream_ || r == FinishReason::stop) return;
  // Release text held back by the detokenizer or as a possible stop-string start.
  Chunk tail;
  tail.text = stops_->push(stream_->flush());
  tail.text += stops_->flush();
  if (tail.text.empty()) return;
  text_ += tail.text;
  if (out) out->push_back(std::move(tail));
}

bool Generator::step(std::vector<Chunk>* out) {
  if (history_.empty()) throw ArgError("Generator::step before start()");
  if (finished()) return false;
  if (cancel_.load()) {
    finish(FinishReason::cancelled, out);
    return false;
  }
  if (!prefill_step()) speculate_step(out);
  return !finished();
}

FinishReason Generator::run(const std::function<bool(const Chunk&)>& on_chunk, const std::atomic<bool>* cancel) {
  std::vector<Chunk> chunks;
  for (;;) {
    if (cancel && cancel->load()) this->cancel();
    chunks.clear();
    const bool more = step(&chunks);
    for (const Chunk& c : chunks)
      if (on_chunk && !on_chunk(c)) this->cancel();
    if (!more) return finish_;
  }
}

}  // namespace qd::speculative
