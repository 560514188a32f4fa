// quickdraft._core._testing: hooks the tests drive the native code through, outside the public
// module. The verifier and the loop run on synthetic distributions and tiny table models, where
// the exact output distribution is known; the draft-length controller, the logit processor and
// the quant type table are exposed on their own; the kernels submodule reaches the CPU kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/contention.h"
#include "common/error.h"
#include "common/idle_cpus.h"
#include "common/thread_pool.h"
#include "quant/quant_types.h"
#include "quickdraft/engine.h"
#include "sampling/logit_processor.h"
#include "sampling/race.h"
#include "speculative/draft_length.h"
#include "speculative/drafter_hybrid.h"
#include "speculative/context_source.h"
#include "speculative/drafter_model.h"
#include "speculative/drafter_mtp.h"
#include "speculative/drafter_ngram.h"
#include "speculative/verifier.h"
#include "testing/piece_streams.h"
#include "testing/table_source.h"

namespace py = pybind11;
using qd::sampling::SamplerParams;
using namespace qd::speculative;

void register_kernel_hooks(py::module_& k);
void register_attention_hooks(py::module_& k);

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

std::unique_ptr<qd::testing::TableSource> table_source(FloatArray t, int n_ctx) {
  if (t.ndim() != 3 || t.shape(0) != t.shape(1) || t.shape(1) != t.shape(2))
    throw qd::ArgError("a table model is a [V][V][V] array (previous token, token, next-token logits)");
  const int v = (int)t.shape(0);
  return std::make_unique<qd::testing::TableSource>(std::vector<float>(t.data(), t.data() + t.size()), v, n_ctx);
}

// An engine over table models. draft: None, "ngram", a table (model drafter, with the lookup
// over the prompt before its window when opt.draft_window > 0), or ("hybrid", table); pieces:
// each token's text, or None for no text.
std::unique_ptr<qd::Engine> engine_from_tables(FloatArray target, py::object draft, py::object pieces,
                                               const qd::EngineOptions& opt) {
  auto model_drafter = [&](py::handle table) {
    return std::make_unique<ModelDrafter>(table_source(py::cast<FloatArray>(table), opt.n_ctx), "draft",
                                          opt.draft_max_lag, -1.0, opt.draft_window);
  };
  std::unique_ptr<Drafter> drafter;
  if (draft.is_none()) {
  } else if (py::isinstance<py::str>(draft) && draft.cast<std::string>() == "ngram") {
    drafter = std::make_unique<NgramDrafter>(opt.ngram_min, opt.ngram_max);
  } else if (py::isinstance<py::tuple>(draft)) {
    drafter = std::make_unique<HybridDrafter>(model_drafter(draft.cast<py::tuple>()[1]), NgramDrafter::copies());
  } else {
    auto model = model_drafter(draft);
    if (opt.draft_window > 0) model->set_lookup();  // as the engine's own
    drafter = std::move(model);
  }
  std::unique_ptr<qd::TokenStreamSource> text;
  if (!pieces.is_none()) text = std::make_unique<qd::testing::PieceStreams>(pieces.cast<std::vector<std::string>>());
  return std::make_unique<qd::Engine>(table_source(target, opt.n_ctx), std::move(drafter), std::move(text), opt);
}

// Forwards to another drafter and keeps every proposal it makes.
class RecordingDrafter : public Drafter {
 public:
  explicit RecordingDrafter(std::unique_ptr<Drafter> d) : d_(std::move(d)) {}
  const char* name() const override { return d_->name(); }
  int n_sources() const override { return d_->n_sources(); }
  const char* source_name(int s) const override { return d_->source_name(s); }
  int next_source(const std::vector<int32_t>& h) override { return d_->next_source(h); }
  double cost_hint(int s) const override { return d_->cost_hint(s); }
  int max_catch_up(int s) const override { return d_->max_catch_up(s); }
  bool draft_in_full() const override { return d_->draft_in_full(); }
  void propose(const std::vector<int32_t>& history, const DraftRequest& req, Draft* out) override {
    d_->propose(history, req, out);
    log.push_back(out->tokens);
  }
  bool prefill(const std::vector<int32_t>& history, int max_tokens, int* evaluated) override {
    return d_->prefill(history, max_tokens, evaluated);
  }
  std::vector<std::vector<int32_t>> log;

 private:
  std::unique_ptr<Drafter> d_;
};

// The MTP drafter's proposals, step by step, in a greedy generation with options opt.
std::vector<std::vector<int32_t>> mtp_proposals(const std::string& path, const std::vector<int32_t>& prompt,
                                                const qd::EngineOptions& opt, int max_tokens) {
  py::gil_scoped_release release;
  auto model = qd::Model::load(path);
  auto target = std::make_unique<ContextSource>(std::make_unique<qd::Context>(model, opt.n_ctx, opt.threads));
  auto rec = std::make_unique<RecordingDrafter>(make_mtp_drafter(target->context(), target->context().thread_pool(), 0.0));
  RecordingDrafter* log = rec.get();
  qd::Engine e(std::move(target), std::move(rec), nullptr, opt);
  qd::GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0.0f;
  e.start(prompt, g);
  while (e.step(nullptr)) {
  }
  return log->log;
}

// n generations from the same prompt with seeds seed0, seed0 + 1, ...; returns
// [n][max_tokens] generated ids, -1 after the end.
py::array_t<int32_t> sample_many(qd::Engine& e, const std::vector<int32_t>& prompt, qd::GenerateOptions opt, int n,
                                 uint64_t seed0) {
  if (n < 0) throw qd::ArgError("n must be >= 0");
  py::array_t<int32_t> out({(py::ssize_t)n, (py::ssize_t)opt.max_tokens});
  int32_t* o = out.mutable_data();
  py::gil_scoped_release release;
  for (int i = 0; i < n; i++) {
    opt.sampling.seed = seed0 + i;
    e.start(prompt, opt);
    while (e.step(nullptr)) {
    }
    const std::vector<int32_t>& g = e.generated();
    for (int j = 0; j < opt.max_tokens; j++) o[(size_t)i * opt.max_tokens + j] = j < (int)g.size() ? g[j] : -1;
  }
  return out;
}

// n independent speculative steps over fixed distributions. Row i of p_logits is the target's
// logits after [last] + draft[:i], row i of q_logits the draft's; each trial samples a draft
// from q (processed like p) and verifies it. Returns [n][k+1] emitted ids, -1 after the step's
// last token.
py::array_t<int32_t> verify_trials(FloatArray p_logits, FloatArray q_logits, const SamplerParams& params, int n,
                                   uint64_t seed) {
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

Distribution processed(FloatArray logits, const std::vector<int32_t>& history, const SamplerParams& params) {
  if (logits.ndim() != 1) throw qd::ArgError("logits must be one row [V]");
  qd::sampling::LogitProcessor proc(params);
  Distribution d;
  proc.process(logits.data(), (int)logits.shape(0), history.data(), history.size(), &d);
  return d;
}

// The processed next-token distribution as a dense [V] array.
py::array_t<float> process_logits(FloatArray logits, const std::vector<int32_t>& history, const SamplerParams& params) {
  const Distribution d = processed(logits, history, params);
  py::array_t<float> out(logits.shape(0));
  float* o = out.mutable_data();
  std::fill(o, o + out.size(), 0.0f);
  for (size_t i = 0; i < d.size(); i++) o[d.ids[i]] = d.probs[i];
  return out;
}

// n samples of the processed distribution, drawn in turn from one Rng(seed).
std::vector<int32_t> sample_tokens(FloatArray logits, const std::vector<int32_t>& history, const SamplerParams& params,
                                   int n, uint64_t seed) {
  const Distribution d = processed(logits, history, params);
  qd::sampling::Rng rng(seed);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = qd::sampling::sample(d, rng);
  return out;
}

// The exponential race's draw from the processed distribution with seeds seed0, seed0 + 1, ...
// at one position.
std::vector<int32_t> race_tokens(FloatArray logits, const std::vector<int32_t>& history, const SamplerParams& params,
                                 int n, uint64_t seed0, uint64_t position) {
  if (n < 0) throw qd::ArgError("n must be >= 0");
  const Distribution d = processed(logits, history, params);
  std::vector<int32_t> out(n);
  for (int i = 0; i < n; i++) out[i] = qd::sampling::sample_race(d, seed0 + i, position);
  return out;
}

// Parallel regions of `tasks` tasks, each `spin` iterations of a busy loop, on a pool of its own.
py::tuple pool_regions(int threads, double seconds, int tasks, int spin) {
  int64_t regions = 0, wrong = 0;
  std::vector<std::pair<double, int>> changes;
  {
    py::gil_scoped_release release;
    qd::ThreadPool pool(threads);
    std::vector<std::atomic<int>> calls((size_t)std::max(tasks, 0));
    changes.emplace_back(0.0, pool.participants());
    const auto t0 = std::chrono::steady_clock::now();
    for (double elapsed = 0; elapsed < seconds;) {
      for (auto& c : calls) c.store(0);
      pool.run(tasks, [&](int i) {
        volatile int x = 0;
        for (int k = 0; k < spin; k++) x = x + k;
        calls[(size_t)i].fetch_add(1);
      });
      for (auto& c : calls) wrong += c.load() != 1;
      regions++;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (pool.participants() != changes.back().second) changes.emplace_back(elapsed, pool.participants());
    }
  }
  return py::make_tuple(regions, wrong, changes);
}

}  // namespace

void register_testing(py::module_& m) {
  py::module_ t = m.def_submodule("_testing", "Test hooks: not part of quickdraft's API.");

  t.def("engine_from_tables", &engine_from_tables, py::arg("target"), py::arg("draft"), py::arg("pieces"),
        py::arg("options"), "An Engine over [V][V][V] table models.");
  t.def(
      "ngram_find",
      [](const std::vector<int32_t>& history, int n_min, int n_max, int min_run, int before) {
        return NgramDrafter(n_min, n_max, min_run).find(history, before);
      },
      py::arg("history"), py::arg("n_min") = 2, py::arg("n_max") = 4, py::arg("min_run") = 0,
      py::arg("before") = NgramDrafter::kAnywhere,
      "Where the n-gram drafter's continuation starts in history, or -1 (NgramDrafter::find).");
  t.def(
      "ngram_propose",
      [](const std::vector<int32_t>& history, int k, int n_min, int n_max, int min_run) {
        qd::sampling::SamplerParams params;
        DraftRequest req;
        req.k = k;
        req.params = &params;
        req.n_target_vocab = 1 << 30;
        Draft out;
        NgramDrafter(n_min, n_max, min_run).propose(history, req, &out);
        return out.tokens;
      },
      py::arg("history"), py::arg("k"), py::arg("n_min") = 2, py::arg("n_max") = 4, py::arg("min_run") = 0,
      "The n-gram drafter's proposal of at most k tokens.");
  t.attr("NGRAM_COPY_RUN") = NgramDrafter::kCopyRun;
  t.def("physical_cores", &qd::ThreadPool::physical_cores, py::arg("cpus"), py::arg("sysfs_cpu"),
        "Distinct cores of these CPUs by their sysfs thread_siblings_list (ThreadPool::physical_cores).");
  t.def("default_threads", &qd::ThreadPool::default_threads, "The native side's thread count for threads=0.");
  t.def(
      "contention_governor",
      [](int n_threads, const std::vector<std::vector<double>>& samples) {
        qd::ContentionGovernor g(n_threads);
        std::vector<int> active;
        for (const auto& s : samples) {
          if (s.size() != 3 && s.size() != 4) throw qd::ArgError("a sample is (now, awake, lost[, idle])");
          active.push_back(g.update(s[0], s[1], s[2], s.size() == 4 ? s[3] : -1.0));
        }
        return active;
      },
      py::arg("n_threads"), py::arg("samples"),
      "The threads a ContentionGovernor lets take part after each (now, awake, lost[, idle]) sample.");
  t.def(
      "idle_cpus",
      [](const std::vector<int>& cpus, const std::string& path, const std::vector<std::string>& contents,
         double seconds) {
        qd::IdleCpus idle(cpus, path);
        std::vector<double> out;
        for (const std::string& c : contents) {
          std::ofstream(path, std::ios::trunc) << c;
          out.push_back(idle.sample(seconds));
        }
        return out;
      },
      py::arg("cpus"), py::arg("path"), py::arg("contents"), py::arg("seconds"),
      "IdleCpus over `path`, rewritten with each of `contents` before a sample(seconds).");
  t.def(
      "idle_cpus_now",
      [](double seconds) {
        py::gil_scoped_release release;
        qd::IdleCpus idle(qd::IdleCpus::allowed_cpus());
        const auto t0 = std::chrono::steady_clock::now();
        idle.sample(1.0);
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        return idle.sample(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      },
      py::arg("seconds"), "This process's allowed CPUs' idle CPU-equivalents over `seconds` asleep (-1: unknown).");
  t.def("pool_regions", &pool_regions, py::arg("threads"), py::arg("seconds"), py::arg("tasks"), py::arg("spin"),
        "Regions of `tasks` busy tasks on a fresh pool for `seconds`: (regions, tasks not run exactly once, "
        "[(seconds, participants)] at each change of the threads taking part).");
  t.def("mtp_proposals", &mtp_proposals, py::arg("path"), py::arg("prompt"), py::arg("options"), py::arg("max_tokens"),
        "The MTP drafter's proposal at each step of a greedy generation.");
  t.def("sample_many", &sample_many, py::arg("engine"), py::arg("prompt"), py::arg("options"), py::arg("n"),
        py::arg("seed0"), "n generations with seeds seed0, seed0 + 1, ...: [n][max_tokens] ids, -1 after the end.");
  t.def("verify_trials", &verify_trials, py::arg("p_logits"), py::arg("q_logits"), py::arg("params"), py::arg("n"),
        py::arg("seed"), "n draft-and-verify trials over fixed logit rows.");
  t.def("process_logits", &process_logits, py::arg("logits"), py::arg("history"), py::arg("params"),
        "The processed next-token distribution, dense [V].");
  t.def("race_tokens", &race_tokens, py::arg("logits"), py::arg("history"), py::arg("params"), py::arg("n"),
        py::arg("seed0"), py::arg("position"),
        "The exponential race's draw (sampling/race.h) with seeds seed0 .. seed0 + n - 1 at one position.");
  t.def("sample_tokens", &sample_tokens, py::arg("logits"), py::arg("history"), py::arg("params"), py::arg("n"),
        py::arg("seed"), "n samples of the processed distribution from one Rng(seed).");
  t.def(
      "quant_types",
      [] {
        py::dict out;
        for (uint32_t id = 0; id < 256; id++)
          if (const qd::quant::TypeTraits* tt = qd::quant::type_traits(id))
            out[py::int_(id)] = py::make_tuple(tt->name, tt->block_size, tt->type_size);
        return out;
      },
      "The quant type table: {type id: (name, block size, bytes per block)}.");

  py::class_<DraftLength>(t, "DraftLength", "The draft-length controller.")
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
           py::arg("seconds"), py::arg("n_sure") = -1)
      .def("alpha_unsure", &DraftLength::alpha_unsure, py::arg("source") = 0)
      .def("sure_share", &DraftLength::sure_share, py::arg("source") = 0)
      .def("record_forward", &DraftLength::record_forward, py::arg("n_rows"), py::arg("seconds"))
      .def("record_catch_up", &DraftLength::record_catch_up, py::arg("source"), py::arg("seconds"),
           py::arg("n_tokens"))
      .def("set_cost_hint", &DraftLength::set_cost_hint, py::arg("source"), py::arg("share"),
           py::arg("max_catch_up") = 0)
      .def("alpha", &DraftLength::alpha, py::arg("source") = 0)
      .def("best_rate", &DraftLength::best_rate, py::arg("source"))
      .def("choose", &DraftLength::choose, py::arg("preferred"), py::arg("other"))
      .def("verify_cost", &DraftLength::verify_cost, py::arg("n_rows"))
      .def("draft_cost", &DraftLength::draft_cost, py::arg("source") = 0)
      .def("step_cost", &DraftLength::step_cost, py::arg("source") = 0)
      .def("probe_interval", &DraftLength::probe_interval, py::arg("source") = 0, py::arg("catch_up") = true)
      .def("new_sequence", &DraftLength::new_sequence)
      .def("restart", &DraftLength::restart, py::arg("source"))
      .def("rate", &DraftLength::rate, py::arg("source"), py::arg("k"));

  py::module_ k = t.def_submodule("kernels", "CPU kernel test and benchmark hooks");
  register_kernel_hooks(k);
  register_attention_hooks(k);
}
