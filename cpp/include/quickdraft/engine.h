// quickdraft's C++ API: a target GGUF model, an optional drafter, and the speculative loop.
//
// Basic usage:
//
//   #include <quickdraft/engine.h>
//
//   qd::EngineOptions opt;
//   opt.drafter = qd::DrafterKind::model;          // or none, ngram, self, hybrid, mtp
//   opt.draft_path = "qwen2.5-coder-0.5b.gguf";    // the draft model (model, hybrid)
//   qd::Engine engine("qwen2.5-coder-1.5b.gguf", opt);
//
//   qd::GenerateOptions gen;
//   gen.max_tokens = 64;
//   gen.sampling.temperature = 0;                  // greedy: the target's own tokens
//   engine.generate(engine.tokenize("def fib(n):"), gen,
//                   [](const qd::Chunk& c) { std::fputs(c.text.c_str(), stdout); return true; });
//   const qd::Stats& s = engine.stats();           // drafted, accepted, time per phase
//
// Or step by step: start(prompt, gen), then step(&chunks) until it returns false; cancel()
// from another thread stops at the next step. Errors are qd::Error exceptions (common/error.h):
// GGUFError for a bad file, IncompatibleModelsError for a draft that cannot draft for the
// target, ArgError for bad options. Link against the CMake target qd_core.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sampling/sampler_params.h"

namespace qd {

class Tokenizer;
class TokenStreamSource;
namespace speculative {
class Drafter;
class Generator;
class LogitSource;
}  // namespace speculative

// What proposes the tokens the target verifies.
enum class DrafterKind {
  none,    // plain decoding
  ngram,   // prompt lookup: continue the latest earlier occurrence of the text's suffix
  self,    // the target with layers skipped (EngineOptions::skip_layers)
  model,   // a small draft model sharing the target's tokenizer (EngineOptions::draft_path)
  hybrid,  // n-gram lookup first, the draft model when it has no match
  mtp,     // the target file's multi-token-prediction head (qwen35 nextn layers); "self" picks it when present
};
// "none", "ngram", "self", "model", "hybrid", "mtp".
const char* drafter_kind_name(DrafterKind k);
// The kind a name means; ArgError for any other name.
DrafterKind parse_drafter_kind(const std::string& name);

struct EngineOptions {
  DrafterKind drafter = DrafterKind::none;
  std::string draft_path;        // the draft GGUF for model and hybrid
  std::vector<int> skip_layers;  // layers self skips; empty: default_skip_layers(n_layer)
  int n_ctx = 4096;              // tokens of KV cache, target and draft alike
  int threads = 0;               // 0: one per CPU this process may run on; at most ThreadPool::kMaxThreads (1024)
  int draft_max = 8;             // most tokens drafted per step
  bool adaptive = true;          // pick each step's draft length from measured costs and acceptance
  float p_min = 0.0f;            // a model drafter's draft ends at its first token whose top probability is below
  int ngram_min = 2, ngram_max = 4;  // suffix lengths the n-gram drafter matches
  int draft_max_lag = 64;        // a model drafter further behind restarts from the recent tokens
  int draft_window = 256;        // a draft model reads at most the last draft_window prompt tokens, and
                                 // drafts from the rest by lookup (a second source); 0: all
  // A model drafter's output layer (self too) scores only the first draft_head token ids, the
  // stop ids and the ids in the text. -1: kDefaultDraftHead when the draft vocabulary has at
  // least kDraftHeadMinVocab entries, else all; 0: all. The target always scores every id.
  int draft_head = -1;
  // A draft model's (model, hybrid) weight matrices stored wider than this GGML type ("q4_0")
  // are requantized to it at load: a cheaper, slightly less accurate draft. Empty: as stored.
  // The target's weights are never changed.
  std::string draft_quant;
  // Layers a draft model (model, hybrid) skips, as self skips skip_layers. Empty: none.
  std::vector<int> draft_skip;
  // End-of-generation ids. An engine over GGUF files takes its target tokenizer's.
  std::vector<int32_t> stop_ids;
  // Map the GGUF files (true) or read them into memory (false), target and draft alike. Mapped
  // files are checked at every start(): GGUFError when one was truncated or rewritten.
  bool mmap = true;
};

constexpr int kDefaultDraftHead = 32768;
constexpr int kDraftHeadMinVocab = 65536;
// The draft head's row count for a draft vocabulary of n_vocab ids (0: the full layer).
int draft_head_rows(const EngineOptions& opt, int n_vocab);
// The layers self-speculation skips by default for a model of n_layer layers.
std::vector<int> default_skip_layers(int n_layer);
// Throws IncompatibleModelsError unless the draft GGUF can draft for the target GGUF.
void check_compatible(const std::string& target_path, const std::string& draft_path);

struct GenerateOptions {
  sampling::SamplerParams sampling;
  int max_tokens = 256;
  std::vector<std::string> stop;  // stop strings; their text is not emitted
  bool ignore_eos = false;
  // Sampling with a fixed seed: every token is the exponential race's draw at its position
  // (sampling/race.h), drafted tokens included, and kept where the target's own draw agrees. The
  // text then depends on the seed, the settings and the target alone: the same whatever drafts it,
  // how much, and the machine's load (the draft lengths still adapt to measured time).
  bool reproducible = false;
  // Drafting for this call, within what the engine loaded: "" the engine's own drafter, else
  // "none", "ngram" (always available), "model", "self", "hybrid" (when loaded; else ArgError).
  std::string drafter;
  int draft_max = -1;  // -1: the engine's draft_max; else at most that
  // false: this call drafts draft_max every step (as far as the drafter finds tokens), whatever
  // the measured costs say; true: the engine's own choice (adaptive when it was loaded so).
  bool adaptive = true;
  // Predicted output (OpenAI's "Predicted Outputs"): token ids of the text the caller expects,
  // drafted from where the generated text matches it, with the drafter above elsewhere.
  // The output does not change, only the speed.
  std::vector<int32_t> prediction;
};

enum class FinishReason { none, eos, length, stop, context, cancelled };
// "eos", "length", "stop", "context", "cancelled" ("" while running).
const char* finish_reason_name(FinishReason r);

// Emitted tokens with the text they completed; from_draft: the tokens were drafted and
// accepted (the target's own token of a step comes in a chunk of its own).
struct Chunk {
  std::string text;
  std::vector<int32_t> tokens;
  bool from_draft = false;
};

// What one generation drafted, accepted and spent its time on. Python's quickdraft.Stats is
// this struct (for_each_stats_field).
struct Stats {
  std::string drafter = "none";
  int prompt_tokens = 0;
  int prompt_tokens_cached = 0;  // of the prompt, already in the KV cache from the last call
  int draft_prompt_tokens = 0;   // of the prompt, evaluated by a draft model (draft_window bounds them)
  int generated_tokens = 0;
  int steps = 0;                 // draft-verify rounds
  int drafted = 0;
  int accepted = 0;
  double time_prompt = 0, time_draft = 0, time_verify = 0, time_sampling = 0, time_generate = 0;  // seconds
  std::vector<int> accepted_histogram;      // [draft_max + 1]: rounds by accepted draft tokens
  std::vector<int> draft_length_histogram;  // [draft_max + 1]: rounds by draft length
  uint64_t seed = 0;                        // the sampler's seed
  // Per draft source ("draft", "ngram", "prediction"...): tokens drafted and accepted.
  std::vector<std::string> source_names;
  std::vector<int> source_drafted, source_accepted;
  int prediction_tokens = 0;                // the prediction's length in tokens
  int accepted_prediction_tokens = 0;       // drafted from the prediction and kept
  int rejected_prediction_tokens = 0;       // drafted from the prediction and refused by the target

  double acceptance_rate() const { return drafted ? (double)accepted / drafted : 0.0; }
  double mean_accepted_length() const { return steps ? (double)accepted / steps : 0.0; }  // per round
  double tokens_per_second() const { return time_generate > 0 ? generated_tokens / time_generate : 0.0; }
};

// Calls f(name, &Stats::field) for each stored field of Stats, in order: the one list the
// Python binding builds quickdraft.Stats from.
template <class F>
void for_each_stats_field(F&& f) {
  f("drafter", &Stats::drafter);
  f("prompt_tokens", &Stats::prompt_tokens);
  f("prompt_tokens_cached", &Stats::prompt_tokens_cached);
  f("draft_prompt_tokens", &Stats::draft_prompt_tokens);
  f("generated_tokens", &Stats::generated_tokens);
  f("steps", &Stats::steps);
  f("drafted", &Stats::drafted);
  f("accepted", &Stats::accepted);
  f("time_prompt", &Stats::time_prompt);
  f("time_draft", &Stats::time_draft);
  f("time_verify", &Stats::time_verify);
  f("time_sampling", &Stats::time_sampling);
  f("time_generate", &Stats::time_generate);
  f("accepted_histogram", &Stats::accepted_histogram);
  f("draft_length_histogram", &Stats::draft_length_histogram);
  f("seed", &Stats::seed);
  f("source_names", &Stats::source_names);
  f("source_drafted", &Stats::source_drafted);
  f("source_accepted", &Stats::source_accepted);
  f("prediction_tokens", &Stats::prediction_tokens);
  f("accepted_prediction_tokens", &Stats::accepted_prediction_tokens);
  f("rejected_prediction_tokens", &Stats::rejected_prediction_tokens);
}

class Engine {
 public:
  // Loads the target GGUF (and the draft, for model and hybrid drafters).
  explicit Engine(const std::string& target_path, const EngineOptions& opt = {});
  // An engine over given parts: a target, an optional drafter and an optional text source
  // (null: chunks carry no text and stop strings are refused). opt's drafter fields are unused.
  Engine(std::unique_ptr<speculative::LogitSource> target, std::unique_ptr<speculative::Drafter> drafter,
         std::unique_ptr<TokenStreamSource> text, const EngineOptions& opt);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Begins a generation; KV entries shared with the previous call's tokens are reused. GGUFError
  // when a mapped model file changed on disk since it was loaded.
  void start(const std::vector<int32_t>& prompt, const GenerateOptions& opt);
  // One prefill chunk or one draft-verify round; appends emitted chunks to out (may be null).
  // Returns false once generation has finished. start() and step() run one at a time.
  bool step(std::vector<Chunk>* out);
  // start() and step() until finished; on_chunk returning false cancels.
  FinishReason generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                        const std::function<bool(const Chunk&)>& on_chunk = {});
  // Thread-safe: the next step() finishes with "cancelled", keeping what was produced.
  void cancel();

  bool finished() const;
  FinishReason finish_reason() const;
  const std::vector<int32_t>& generated() const;
  const std::string& text() const;
  const Stats& stats() const;

  const char* drafter() const;  // the drafter's name: "none", "ngram", "self", "draft", "hybrid"
  int n_vocab() const;
  int n_ctx() const;
  int n_ctx_train() const;  // the target's trained context length (0: unknown)
  // Seconds the load's warm-up took: an adaptive drafter's engine times the target's forward of
  // a few rows and the drafter's step once loaded, so that its first generation starts from this
  // machine's costs (0: no warm-up).
  double warm_up_seconds() const;
  bool has_tokenizer() const;
  // The target's tokenizer; UnsupportedError when its file has no tokenizer metadata.
  const Tokenizer& tokenizer() const;
  std::vector<int32_t> tokenize(const std::string& text, bool add_special = true, bool parse_special = true) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace qd
