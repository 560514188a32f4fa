// quickdraft._core.SpecEngine: the native speculative loop driven step by step from Python
// (engine.py wraps it), plus test hooks that run the verifier and the loop on synthetic
// distributions and tiny table models, where the exact output distribution is known.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/logit_processor.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "speculative/compat.h"
#include "speculative/context_source.h"
#include "speculative/drafter_hybrid.h"
#include "speculative/drafter_model.h"
#include "speculative/drafter_ngram.h"
#include "speculative/generator.h"
#include "speculative/self_draft.h"
#include "speculative/verifier.h"
#include "testing/piece_streams.h"
#include "testing/table_source.h"
#include "tokenizer/token_stream.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;
using qd::sampling::SamplerParams;
using namespace qd::speculative;

namespace {

py::str to_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), (Py_ssize_t)s.size(), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// Everything one engine owns: the target, the drafter, the text decoder and the loop.
struct SpecEngine {
  std::unique_ptr<LogitSource> target;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<qd::TokenStreamSource> text;
  std::shared_ptr<const qd::Tokenizer> tok;  // null for models without tokenizer metadata
  std::unique_ptr<Generator> gen;
  std::string drafter_name = "none";
  std::mutex mu;  // one step at a time (the GIL is released while stepping)

  void start(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    gen->start(prompt, opt);
  }

  // One step with the GIL released; returns the chunks it emitted as (text, tokens, from_draft).
  py::list step() {
    std::vector<Chunk> chunks;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu);
      gen->step(&chunks);
    }
    py::list out;
    for (const Chunk& c : chunks) out.append(py::make_tuple(to_str(c.text), c.tokens, c.from_draft));
    return out;
  }

  const qd::Tokenizer& tokenizer() const {
    if (!tok) throw qd::UnsupportedError("this engine's target has no tokenizer; pass token ids");
    return *tok;
  }

  py::dict stats() const {
    const Stats& s = gen->stats();
    py::dict d;
    d["prompt_tokens"] = s.n_prompt;
    d["prompt_tokens_cached"] = s.n_prompt_cached;
    d["generated_tokens"] = s.n_generated;
    d["steps"] = s.n_steps;
    d["drafted"] = s.drafted;
    d["accepted"] = s.accepted;
    d["acceptance_rate"] = s.acceptance_rate();
    d["mean_accepted_length"] = s.mean_accepted();
    d["tokens_per_second"] = s.tokens_per_second();
    d["time_prompt"] = s.t_prompt;
    d["time_draft"] = s.t_draft;
    d["time_verify"] = s.t_verify;
    d["time_sampling"] = s.t_sample;
    d["time_generate"] = s.t_generate;
    d["accepted_histogram"] = s.accepted_hist;
    d["draft_length_histogram"] = s.drafted_hist;
    d["drafter"] = drafter_name;
    return d;
  }

  // Test hook: n generations from the same prompt with seeds seed0, seed0 + 1, ...; returns
  // [n][max_tokens] generated ids, -1 after the end.
  py::array_t<int32_t> sample_many(const std::vector<int32_t>& prompt, GenerateOptions opt, int n, uint64_t seed0) {
    if (n < 0) throw qd::ArgError("n must be >= 0");
    py::array_t<int32_t> out({(py::ssize_t)n, (py::ssize_t)opt.max_tokens});
    int32_t* o = out.mutable_data();
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < n; i++) {
      opt.sampling.seed = seed0 + i;
      gen->start(prompt, opt);
      while (gen->step(nullptr)) {
      }
      const std::vector<int32_t>& g = gen->generated();
      for (int j = 0; j < opt.max_tokens; j++) o[(size_t)i * opt.max_tokens + j] = j < (int)g.size() ? g[j] : -1;
    }
    return out;
  }
};

struct EngineConfig {
  int n_ctx = 4096;
  int draft_max = 8;
  float p_min = 0.0f;
  bool adaptive = true;
  int ngram_min = 2, ngram_max = 4;
  int draft_max_lag = 64;  // a model drafter further behind restarts from the recent tokens
  // Draft head (qd::Context::set_head_subset): logits of the first draft_head ids plus the
  // text's own ids. -1: kDefaultDraftHead when the draft vocabulary has >= kDraftHeadMinVocab
  // entries, else the full layer; 0: the full layer.
  int draft_head = -1;
  std::vector<int32_t> stop_ids;
};

constexpr int kDefaultDraftHead = 32768;
constexpr int kDraftHeadMinVocab = 65536;

int draft_head_rows(const EngineConfig& c, int n_vocab) {
  if (c.draft_head < -1) throw qd::ArgError("draft_head must be -1 (auto), 0 (full) or a token count");
  if (c.draft_head == -1) return n_vocab >= kDraftHeadMinVocab ? kDefaultDraftHead : 0;
  return c.draft_head;
}

void finish_engine(SpecEngine& e, const EngineConfig& c) {
  GeneratorConfig g;
  g.draft_length.draft_max = c.draft_max;
  g.draft_length.adaptive = c.adaptive;
  g.p_min = c.p_min;
  g.stop_ids = c.stop_ids;
  if (e.drafter) e.drafter_name = e.drafter->name();
  e.gen = std::make_unique<Generator>(*e.target, e.drafter.get(), e.text.get(), g);
}

std::unique_ptr<qd::testing::TableSource> table_source(py::array_t<float, py::array::c_style | py::array::forcecast> t, int n_ctx) {
  if (t.ndim() != 3 || t.shape(0) != t.shape(1) || t.shape(1) != t.shape(2))
    throw qd::ArgError("a table model is a [V][V][V] array (previous token, token, next-token logits)");
  const int v = (int)t.shape(0);
  return std::make_unique<qd::testing::TableSource>(std::vector<float>(t.data(), t.data() + t.size()), v, n_ctx);
}

// Test hook: an engine over table models. draft: None, "ngram", a table (model drafter), or
// ("hybrid", table).
std::unique_ptr<SpecEngine> engine_from_tables(py::array_t<float, py::array::c_style | py::array::forcecast> target,
                                               py::object draft, py::object pieces, const EngineConfig& c) {
  auto e = std::make_unique<SpecEngine>();
  e->target = table_source(target, c.n_ctx);
  auto model_drafter = [&](py::handle table) {
    return std::make_unique<ModelDrafter>(table_source(py::cast<py::array_t<float>>(table), c.n_ctx), "draft",
                                          c.draft_max_lag);
  };
  if (draft.is_none()) {
  } else if (py::isinstance<py::str>(draft) && draft.cast<std::string>() == "ngram") {
    e->drafter = std::make_unique<NgramDrafter>(c.ngram_min, c.ngram_max);
  } else if (py::isinstance<py::tuple>(draft)) {
    e->drafter = std::make_unique<HybridDrafter>(model_drafter(draft.cast<py::tuple>()[1]),
                                                 NgramDrafter(c.ngram_min, c.ngram_max));
  } else {
    e->drafter = model_drafter(draft);
  }
  if (!pieces.is_none()) e->text = std::make_unique<qd::testing::PieceStreams>(pieces.cast<std::vector<std::string>>());
  finish_engine(*e, c);
  return e;
}

// A drafter over its own context on `pool` (the target's): skipped layers for self-drafting,
// and the draft head for large vocabularies (the stop ids always in it).
std::unique_ptr<ModelDrafter> context_drafter(std::shared_ptr<const qd::Model> m, std::shared_ptr<qd::ThreadPool> pool,
                                              std::vector<int> skip, const char* name, const EngineConfig& c) {
  const int head = draft_head_rows(c, m->n_vocab());
  auto ctx = std::make_unique<qd::Context>(std::move(m), c.n_ctx, std::move(pool));
  if (!skip.empty()) ctx->set_skip_layers(std::move(skip));
  if (head > 0) ctx->set_head_subset(head, c.stop_ids);
  return std::make_unique<ModelDrafter>(std::make_unique<ContextSource>(std::move(ctx)), name, c.draft_max_lag);
}

// An engine over GGUF models. kind: "none", "ngram", "self", "model" or "hybrid"; draft_path
// for the last two; skip_layers for "self" (empty: the default set).
std::unique_ptr<SpecEngine> engine_from_models(const std::string& target_path, const std::string& kind,
                                               const std::string& draft_path, std::vector<int> skip_layers,
                                               int threads, const EngineConfig& c) {
  py::gil_scoped_release release;
  auto e = std::make_unique<SpecEngine>();
  std::shared_ptr<const qd::Model> target = qd::Model::load(target_path);
  if (target->file().find("tokenizer.ggml.tokens")) {
    e->tok = std::make_shared<qd::Tokenizer>(target->file());
    e->text = std::make_unique<qd::TokenizerStreams>(e->tok);
  }
  EngineConfig cfg = c;
  if (e->tok) cfg.stop_ids = e->tok->eog_ids();
  e->target = std::make_unique<ContextSource>(std::make_unique<qd::Context>(target, c.n_ctx, threads));
  const qd::Context& tctx = static_cast<ContextSource&>(*e->target).context();
  if (kind == "ngram") {
    e->drafter = std::make_unique<NgramDrafter>(c.ngram_min, c.ngram_max);
  } else if (kind == "self") {
    if (skip_layers.empty()) skip_layers = default_skip_layers(target->n_layer());
    e->drafter = context_drafter(target, tctx.thread_pool(), skip_layers, "self", cfg);
  } else if (kind == "model" || kind == "hybrid") {
    std::shared_ptr<const qd::Model> draft = qd::Model::load(draft_path);
    check_compatible(target->file(), draft->file());
    auto md = context_drafter(draft, tctx.thread_pool(), {}, "draft", cfg);
    if (kind == "model") e->drafter = std::move(md);
    else e->drafter = std::make_unique<HybridDrafter>(std::move(md), NgramDrafter(c.ngram_min, c.ngram_max));
  } else if (kind != "none") {
    throw qd::ArgError("unknown drafter '" + kind + "': use none, ngram, self, a draft model, or hybrid");
  }
  finish_engine(*e, cfg);
  return e;
}

// Test hook: n independent speculative steps over fixed distributions. Row i of p_logits is
// the target's logits after [last] + draft[:i], row i of q_logits the draft's; each trial
// samples a draft from q (processed like p) and verifies it. Returns [n][k+1] emitted ids,
// -1 after the step's last token.
py::array_t<int32_t> verify_trials(py::array_t<float, py::array::c_style | py::array::forcecast> p_logits,
                                   py::array_t<float, py::array::c_style | py::array::forcecast> q_logits,
                                   const SamplerParams& params, int n, uint64_t seed) {
  if (p_logits.ndim() != 2 || q_logits.ndim() != 2 || q_logits.shape(0) + 1 != p_logits.shape(0) ||
      q_logits.shape(1) != p_logits.shape(1))
    throw qd::ArgError("p_logits must be [k+1][V] and q_logits [k][V]");
  const int k = (int)q_logits.shape(0), v = (int)p_logits.shape(1);
  py::array_t<int32_t> out({(py::ssize_t)n, (py::ssize_t)(k + 1)});
  int32_t* o = out.mutable_data();
  const float* p = p_logits.data();
  const float* q = q_logits.data();
  py::gil_scoped_release release;
  qd::sampling::Rng rng(seed);
  qd::sampling::LogitProcessor proc(params);
  Verifier verifier(params);
  const std::vector<int32_t> history = {0};
  Draft draft;
  for (int t = 0; t < n; t++) {
    draft.clear();
    for (int i = 0; i < k; i++) {
      Distribution qi;
      proc.process(q + (size_t)i * v, v, nullptr, 0, &qi);
      draft.tokens.push_back(qd::sampling::sample(qi, rng));
      if (!params.greedy()) draft.q.push_back(std::move(qi));
    }
    const Verdict verdict = verifier.verify(p, v, history, draft, rng);
    int32_t* row = o + (size_t)t * (k + 1);
    for (int i = 0; i <= k; i++) row[i] = -1;
    for (int i = 0; i < verdict.n_accepted; i++) row[i] = draft.tokens[i];
    row[verdict.n_accepted] = verdict.token;
  }
  return out;
}

// Test hook: the processed next-token distribution as a dense [V] array.
py::array_t<float> process_logits(py::array_t<float, py::array::c_style | py::array::forcecast> logits,
                                  const std::vector<int32_t>& history, const SamplerParams& params) {
  if (logits.ndim() != 1) throw qd::ArgError("logits must be one row [V]");
  const int v = (int)logits.shape(0);
  qd::sampling::LogitProcessor proc(params);
  Distribution d;
  proc.process(logits.data(), v, history.data(), history.size(), &d);
  py::array_t<float> out(v);
  float* o = out.mutable_data();
  std::fill(o, o + v, 0.0f);
  for (size_t i = 0; i < d.size(); i++) o[d.ids[i]] = d.probs[i];
  return out;
}

// Test hook: n samples of the processed distribution, drawn in turn from one Rng(seed).
std::vector<int32_t> sample_tokens(py::array_t<float, py::array::c_style | py::array::forcecast> logits,
                                   const std::vector<int32_t>& history, const SamplerParams& params, int n,
                                   uint64_t seed) {
  if (logits.ndim() != 1) throw qd::ArgError("logits must be one row [V]");
  qd::sampling::LogitProcessor proc(params);
  Distribution d;
  proc.process(logits.data(), (int)logits.shape(0), history.data(), history.size(), &d);
  qd::sampling::Rng rng(seed);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = qd::sampling::sample(d, rng);
  return out;
}

}  // namespace

void register_engine(py::module_& m) {
  py::class_<SamplerParams>(m, "SamplerParams")
      .def(py::init<>())
      .def_readwrite("temperature", &SamplerParams::temperature)
      .def_readwrite("top_k", &SamplerParams::top_k)
      .def_readwrite("top_p", &SamplerParams::top_p)
      .def_readwrite("min_p", &SamplerParams::min_p)
      .def_readwrite("repeat_penalty", &SamplerParams::repeat_penalty)
      .def_readwrite("presence_penalty", &SamplerParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplerParams::frequency_penalty)
      .def_readwrite("penalty_last_n", &SamplerParams::penalty_last_n)
      .def_readwrite("seed", &SamplerParams::seed)
      .def("validate", &SamplerParams::validate);

  py::class_<GenerateOptions>(m, "GenerateOptions")
      .def(py::init<>())
      .def_readwrite("sampling", &GenerateOptions::sampling)
      .def_readwrite("max_tokens", &GenerateOptions::max_tokens)
      .def_readwrite("stop", &GenerateOptions::stop)
      .def_readwrite("ignore_eos", &GenerateOptions::ignore_eos)
      .def_readwrite("reproducible", &GenerateOptions::reproducible);

  py::class_<EngineConfig>(m, "EngineConfig")
      .def(py::init<>())
      .def_readwrite("n_ctx", &EngineConfig::n_ctx)
      .def_readwrite("draft_max", &EngineConfig::draft_max)
      .def_readwrite("p_min", &EngineConfig::p_min)
      .def_readwrite("adaptive", &EngineConfig::adaptive)
      .def_readwrite("ngram_min", &EngineConfig::ngram_min)
      .def_readwrite("ngram_max", &EngineConfig::ngram_max)
      .def_readwrite("draft_max_lag", &EngineConfig::draft_max_lag)
      .def_readwrite("draft_head", &EngineConfig::draft_head)
      .def_readwrite("stop_ids", &EngineConfig::stop_ids);

  py::class_<SpecEngine>(m, "SpecEngine")
      .def("start", &SpecEngine::start, py::arg("prompt"), py::arg("options"))
      .def("step", &SpecEngine::step, "One prefill chunk or draft-verify round: [(text, tokens, from_draft)].")
      .def("cancel", [](SpecEngine& e) { e.gen->cancel(); })
      .def_property_readonly("finished", [](const SpecEngine& e) { return e.gen->finished(); })
      .def_property_readonly("finish_reason",
                             [](const SpecEngine& e) { return std::string(finish_reason_name(e.gen->finish_reason())); })
      .def_property_readonly("generated", [](const SpecEngine& e) { return e.gen->generated(); })
      .def_property_readonly("text", [](const SpecEngine& e) { return to_str(e.gen->text()); })
      .def_property_readonly("drafter", [](const SpecEngine& e) { return e.drafter_name; })
      .def_property_readonly("n_vocab", [](const SpecEngine& e) { return e.target->n_vocab(); })
      .def_property_readonly("n_ctx", [](const SpecEngine& e) { return e.target->n_ctx(); })
      .def("stats", &SpecEngine::stats)
      .def_property_readonly("has_tokenizer", [](const SpecEngine& e) { return e.tok != nullptr; })
      .def(
          "tokenize",
          [](const SpecEngine& e, const std::string& text, bool add_special, bool parse_special) {
            return e.tokenizer().encode(text, add_special, parse_special);
          },
          py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = true)
      .def(
          "detokenize", [](const SpecEngine& e, const std::vector<int32_t>& ids) { return to_str(e.tokenizer().decode(ids)); },
          py::arg("ids"))
      .def("sample_many", &SpecEngine::sample_many, py::arg("prompt"), py::arg("options"), py::arg("n"),
           py::arg("seed0"));

  py::class_<DraftLength>(m, "_DraftLength", "Test hook: the draft-length controller.")
      .def(py::init([](int n_sources, int draft_max, bool adaptive, int probe_every) {
             DraftLengthOptions o;
             o.draft_max = draft_max;
             o.adaptive = adaptive;
             o.probe_every = probe_every;
             return std::make_unique<DraftLength>(n_sources, o);
           }),
           py::arg("n_sources") = 1, py::arg("draft_max") = 8, py::arg("adaptive") = true, py::arg("probe_every") = 4)
      .def("next", &DraftLength::next, py::arg("source") = 0)
      .def("record_draft", &DraftLength::record_draft, py::arg("source"), py::arg("n_drafted"),
           py::arg("first_seconds"), py::arg("step_seconds") = -1.0)
      .def("record_verify", &DraftLength::record_verify, py::arg("source"), py::arg("n_rows"), py::arg("n_accepted"),
           py::arg("seconds"))
      .def("alpha", &DraftLength::alpha, py::arg("source") = 0)
      .def("verify_cost", &DraftLength::verify_cost, py::arg("n_rows"))
      .def("draft_cost", &DraftLength::draft_cost, py::arg("source") = 0)
      .def("step_cost", &DraftLength::step_cost, py::arg("source") = 0)
      .def("probe_interval", &DraftLength::probe_interval, py::arg("source") = 0)
      .def("new_sequence", &DraftLength::new_sequence)
      .def("rate", &DraftLength::rate, py::arg("source"), py::arg("k"));

  m.def(
      "check_compatible",
      [](const std::string& target, const std::string& draft) {
        py::gil_scoped_release release;
        check_compatible(qd::gguf::File(target), qd::gguf::File(draft));
      },
      py::arg("target"), py::arg("draft"),
      "Raises IncompatibleModelsError unless the draft GGUF can draft for the target GGUF.");
  m.def("_process_logits", &process_logits, py::arg("logits"), py::arg("history"), py::arg("params"));
  m.def("_sample_tokens", &sample_tokens, py::arg("logits"), py::arg("history"), py::arg("params"), py::arg("n"),
        py::arg("seed"));
  m.def("_engine_from_models", &engine_from_models, py::arg("target"), py::arg("kind"), py::arg("draft_path"),
        py::arg("skip_layers"), py::arg("threads"), py::arg("config"));
  m.def("default_skip_layers", &default_skip_layers, py::arg("n_layer"),
        "The layers self-speculation skips by default for a model of n_layer layers.");
  m.def("_engine_from_tables", &engine_from_tables, py::arg("target"), py::arg("draft"), py::arg("pieces"),
        py::arg("config"), "Test hook: a SpecEngine over [V][V][V] table models.");
  m.def("_verify_trials", &verify_trials, py::arg("p_logits"), py::arg("q_logits"), py::arg("params"), py::arg("n"),
        py::arg("seed"), "Test hook: n draft-and-verify trials over fixed logit rows.");
}
