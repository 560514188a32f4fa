// qd::Engine (include/quickdraft/engine.h): assembles a target, a drafter and a text source
// into the speculative loop (speculative::Generator).
#include "quickdraft/engine.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "quant/quant_types.h"
#include "speculative/compat.h"
#include "speculative/context_source.h"
#include "speculative/drafter_choice.h"
#include "speculative/drafter_hybrid.h"
#include "speculative/drafter_model.h"
#include "speculative/drafter_mtp.h"
#include "speculative/drafter_ngram.h"
#include "speculative/generator.h"
#include "tokenizer/token_stream.h"
#include "tokenizer/tokenizer.h"

namespace qd {

using namespace speculative;

const char* drafter_kind_name(DrafterKind k) {
  switch (k) {
    case DrafterKind::none: return "none";
    case DrafterKind::ngram: return "ngram";
    case DrafterKind::self: return "self";
    case DrafterKind::model: return "model";
    case DrafterKind::hybrid: return "hybrid";
    case DrafterKind::mtp: return "mtp";
  }
  return "";
}

DrafterKind parse_drafter_kind(const std::string& name) {
  for (DrafterKind k : {DrafterKind::none, DrafterKind::ngram, DrafterKind::self, DrafterKind::model, DrafterKind::hybrid,
                        DrafterKind::mtp})
    if (name == drafter_kind_name(k)) return k;
  throw ArgError("unknown drafter '" + name + "': use none, ngram, self, mtp, a draft model, or hybrid");
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::eos: return "eos";
    case FinishReason::length: return "length";
    case FinishReason::stop: return "stop";
    case FinishReason::context: return "context";
    case FinishReason::cancelled: return "cancelled";
    default: return "";
  }
}

int draft_head_rows(const EngineOptions& opt, int n_vocab) {
  if (opt.draft_head < -1) throw ArgError("draft_head must be -1 (auto), 0 (full) or a token count");
  if (opt.draft_head == -1) return n_vocab >= kDraftHeadMinVocab ? kDefaultDraftHead : 0;
  return opt.draft_head;
}

void check_compatible(const std::string& target_path, const std::string& draft_path) {
  speculative::check_compatible(gguf::File(target_path), gguf::File(draft_path));
}

struct Engine::Parts {
  std::unique_ptr<LogitSource> target;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<TokenStreamSource> text;
  std::shared_ptr<const Tokenizer> tok;  // null for models without tokenizer metadata
  std::unique_ptr<Generator> gen;
  std::vector<std::shared_ptr<const gguf::File>> files;  // checked at start()
  int n_ctx_train = 0;
  std::unique_ptr<DrafterChoice> choice;  // GenerateOptions::drafter
  std::mutex mu;  // one start() or step() at a time
  double warm_up_seconds = 0.0;

  void finish(const EngineOptions& opt) {
    GeneratorConfig g;
    g.draft_length.draft_max = opt.draft_max;
    g.draft_length.adaptive = opt.adaptive;
    g.p_min = opt.p_min;
    g.stop_ids = opt.stop_ids;
    gen = std::make_unique<Generator>(*target, drafter.get(), text.get(), g);
    choice = std::make_unique<DrafterChoice>(drafter.get(), opt.ngram_min, opt.ngram_max);
  }
};

namespace {

// A recurrent model returns over at most one verify batch (the target) or its own drafted tokens
// (a draft): a rollback window of draft_max + 1 rows, whose snapshot memory grows with it. An
// out-of-range draft_max is left for the generator to report.
void fit_rollback_window(Context& ctx, int draft_max) {
  const bool valid_max = draft_max >= 0 && draft_max < 256;
  if (ctx.rollback_window() > 0 && valid_max && ctx.rollback_window() != draft_max + 1)
    ctx.set_rollback(ctx.rollback_mode(), draft_max + 1);
}

// Bytes of weights one decode step of `m` reads, as it computes (requantized types included):
// the layers not in `skip`, and the output layer (a tied one counted once; the embedding table
// is only looked up), scaled by head_rows / n_vocab when only a head subset is scored. Decode
// streams its weights, so this ratio between two models is their decode cost ratio.
double decode_weight_bytes(const Model& m, const std::vector<int>& skip, int head_rows) {
  const gguf::File& f = m.file();
  const bool tied = f.find_tensor("output.weight") == nullptr;
  double bytes = 0;
  for (const Model::MatrixInfo& info : m.matrices()) {
    const std::string& name = info.name;
    const gguf::TensorInfo* t = f.find_tensor(name);
    const quant::TypeTraits* tt = quant::type_traits(info.type);
    if (!t || !tt) continue;
    const bool output = name == "output.weight" || (tied && name == "token_embd.weight");
    if (name == "token_embd.weight" && !output) continue;
    int layer = -1;
    if (std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 && std::count(skip.begin(), skip.end(), layer)) continue;
    if (layer >= m.n_layer()) continue;  // an MTP block (qwen35 nextn) is not part of the decode
    double b = (double)(t->n_elements() / tt->block_size) * (double)tt->type_size;
    if (output && head_rows > 0) b *= std::min(1.0, (double)head_rows / m.n_vocab());
    bytes += b;
  }
  return bytes;
}

// A drafter on `pool` (the target's) over a context of its own, or with self-drafting over a
// view of the target's (`view_of`: its KV cache, so nothing to prefill or catch up on): skipped
// layers, and the draft head for large vocabularies (the stop ids always in it). Its cost hint
// is its decode bytes over the target's.
std::unique_ptr<ModelDrafter> context_drafter(std::shared_ptr<const Model> m, const Model& target,
                                              std::shared_ptr<ThreadPool> pool, std::vector<int> skip,
                                              const char* name, const EngineOptions& opt, Context* view_of = nullptr) {
  const int head = draft_head_rows(opt, m->n_vocab());
  const double full = decode_weight_bytes(target, {}, 0);
  const double hint = full > 0 ? decode_weight_bytes(*m, skip, head) / full : -1.0;
  std::unique_ptr<Context> ctx;
  if (view_of) {
    ctx = std::make_unique<Context>(*view_of, std::move(skip));
  } else {
    ctx = std::make_unique<Context>(std::move(m), opt.n_ctx, std::move(pool));
    fit_rollback_window(*ctx, opt.draft_max);
    if (!skip.empty()) ctx->set_skip_layers(std::move(skip));
  }
  if (head > 0) ctx->set_head_subset(head, opt.stop_ids);
  auto drafter = std::make_unique<ModelDrafter>(std::make_unique<ContextSource>(std::move(ctx)), name,
                                                opt.draft_max_lag, hint, opt.draft_window);
  // A draft model of its own that reads a window of the prompt drafts by lookup from the rest.
  if (!view_of && opt.draft_window > 0 && opt.drafter == DrafterKind::model)
    drafter->set_lookup();
  return drafter;
}

}  // namespace

Engine::Engine(const std::string& target_path, const EngineOptions& options) : parts_(std::make_unique<Parts>()) {
  Parts& p = *parts_;
  EngineOptions opt = options;
  LoadOptions target_load;
  target_load.mmap = opt.mmap;
  std::shared_ptr<const Model> target = Model::load(target_path, target_load);
  p.files.push_back(target->file_ptr());
  p.n_ctx_train = target->hparams().n_ctx_train;
  if (target->file().find("tokenizer.ggml.tokens")) {
    p.tok = std::make_shared<Tokenizer>(target->file());
    p.text = std::make_unique<TokenizerStreams>(p.tok);
    opt.stop_ids = p.tok->eog_ids();
  }
  auto tsrc = std::make_unique<ContextSource>(std::make_unique<Context>(target, opt.n_ctx, opt.threads));
  Context& tctx = tsrc->context();
  fit_rollback_window(tctx, opt.draft_max);
  std::shared_ptr<ThreadPool> pool = tctx.thread_pool();
  p.target = std::move(tsrc);
  const bool draft_model = opt.drafter == DrafterKind::model || opt.drafter == DrafterKind::hybrid;
  if (!draft_model && !opt.draft_quant.empty()) {
    throw ArgError(std::string("draft_quant requantizes a draft model; the ") + drafter_kind_name(opt.drafter) +
                   " drafter has none");
  }
  if (!draft_model && !opt.draft_skip.empty()) {
    throw ArgError(std::string("draft_skip names layers of a draft model; the ") + drafter_kind_name(opt.drafter) +
                   " drafter has none" + (opt.drafter == DrafterKind::self ? " (self skips skip_layers)" : ""));
  }
  switch (opt.drafter) {
    case DrafterKind::none: break;
    case DrafterKind::ngram: p.drafter = std::make_unique<NgramDrafter>(opt.ngram_min, opt.ngram_max); break;
    case DrafterKind::mtp:
      if (target->hparams().n_mtp == 0) {
        throw UnsupportedError(target_path + ": the mtp drafter needs multi-token-prediction (nextn) layers, which "
                               "this " + target->hparams().arch + " file has none of; use self, ngram or a draft model");
      }
      if (!opt.skip_layers.empty()) throw ArgError("skip_layers are for the self drafter's skipped layers, not mtp");
      p.drafter = make_mtp_drafter(tctx, pool, decode_weight_bytes(*target, {}, 0));
      break;
    case DrafterKind::self: {
      if (target->hparams().n_mtp > 0 && opt.skip_layers.empty()) {  // the file's own MTP head drafts best
        p.drafter = make_mtp_drafter(tctx, pool, decode_weight_bytes(*target, {}, 0));
        break;
      }
      std::vector<int> skip = opt.skip_layers.empty() ? default_skip_layers(target->n_layer()) : opt.skip_layers;
      // A recurrent target's state is not per position: its self drafter keeps a state of its own.
      Context* view_of = target->hparams().recurrent() || skip.empty() ? nullptr : &tctx;
      // Beside the skipped layers, a lookup of copies, as the hybrid's beside its draft model:
      // where the answer repeats its context, a copy drafts for free what a step would.
      auto skipped = context_drafter(target, *target, pool, std::move(skip), "self", opt, view_of);
      p.drafter = std::make_unique<HybridDrafter>(std::move(skipped), NgramDrafter::copies(), "self");
      break;
    }
    case DrafterKind::model:
    case DrafterKind::hybrid: {
      LoadOptions load;
      load.requantize = opt.draft_quant;
      load.mmap = opt.mmap;
      // Only the draft head's rows of the output layer are requantized and repacked: the 0.5B's
      // 151936 x 896 output is 77 MB as Q4_0, its head of 32768 rows 17 MB.
      load.output_rows = [&opt](int64_t n_vocab) { return (int64_t)draft_head_rows(opt, (int)n_vocab); };
      std::shared_ptr<const Model> draft = Model::load(opt.draft_path, load);
      p.files.push_back(draft->file_ptr());
      speculative::check_compatible(target->file(), draft->file());
      auto md = context_drafter(draft, *target, pool, opt.draft_skip, "draft", opt);
      if (opt.drafter == DrafterKind::model) {
        p.drafter = std::move(md);
      } else {
        p.drafter = std::make_unique<HybridDrafter>(std::move(md), NgramDrafter::copies());
      }
      break;
    }
  }
  p.finish(opt);
  // Adaptive drafting weighs drafts against timings: its first generation starts from this
  // machine's costs, timed here, instead of learning them on its own tokens.
  if (p.drafter && opt.adaptive && opt.draft_max > 0) p.warm_up_seconds = p.gen->warm_up();
}

Engine::Engine(std::unique_ptr<LogitSource> target, std::unique_ptr<Drafter> drafter,
               std::unique_ptr<TokenStreamSource> text, const EngineOptions& opt)
    : parts_(std::make_unique<Parts>()) {
  if (!target) throw ArgError("an engine needs a target");
  parts_->target = std::move(target);
  parts_->drafter = std::move(drafter);
  parts_->text = std::move(text);
  parts_->finish(opt);
}

Engine::~Engine() = default;

void Engine::start(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
  std::lock_guard<std::mutex> lock(parts_->mu);
  for (const auto& f : parts_->files) f->check_unchanged();
  parts_->gen->start(prompt, opt, parts_->choice->pick(opt.drafter));
}

bool Engine::step(std::vector<Chunk>* out) {
  std::lock_guard<std::mutex> lock(parts_->mu);
  return parts_->gen->step(out);
}

FinishReason Engine::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                              const std::function<bool(const Chunk&)>& on_chunk) {
  start(prompt, opt);
  std::vector<Chunk> chunks;
  bool more = true;
  while (more) {
    chunks.clear();
    more = step(&chunks);
    for (const Chunk& c : chunks)
      if (on_chunk && !on_chunk(c)) cancel();
  }
  return finish_reason();
}

void Engine::cancel() { parts_->gen->cancel(); }
bool Engine::finished() const { return parts_->gen->finished(); }
FinishReason Engine::finish_reason() const { return parts_->gen->finish_reason(); }
const std::vector<int32_t>& Engine::generated() const { return parts_->gen->generated(); }
const std::string& Engine::text() const { return parts_->gen->text(); }
const Stats& Engine::stats() const { return parts_->gen->stats(); }
const char* Engine::drafter() const { return parts_->drafter ? parts_->drafter->name() : "none"; }
int Engine::n_vocab() const { return parts_->target->n_vocab(); }
int Engine::n_ctx() const { return parts_->target->n_ctx(); }
int Engine::n_ctx_train() const { return parts_->n_ctx_train; }
double Engine::warm_up_seconds() const { return parts_->warm_up_seconds; }
bool Engine::has_tokenizer() const { return parts_->tok != nullptr; }

const Tokenizer& Engine::tokenizer() const {
  if (!parts_->tok) throw UnsupportedError("this engine's target has no tokenizer; pass token ids");
  return *parts_->tok;
}

std::vector<int32_t> Engine::tokenize(const std::string& text, bool add_special, bool parse_special) const {
  return tokenizer().encode(text, add_special, parse_special);
}

std::string Engine::detokenize(const std::vector<int32_t>& ids) const { return tokenizer().decode(ids); }

}  // namespace qd
