// quickdraft._core.Engine: qd::Engine (include/quickdraft/engine.h) stepped from Python
// (engine.py wraps it), with its options and Stats.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "py_text.h"
#include "quickdraft/engine.h"

namespace py = pybind11;
using qd::sampling::SamplerParams;

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

  py::class_<qd::GenerateOptions>(m, "GenerateOptions")
      .def(py::init<>())
      .def_readwrite("sampling", &qd::GenerateOptions::sampling)
      .def_readwrite("max_tokens", &qd::GenerateOptions::max_tokens)
      .def_readwrite("stop", &qd::GenerateOptions::stop)
      .def_readwrite("ignore_eos", &qd::GenerateOptions::ignore_eos)
      .def_readwrite("reproducible", &qd::GenerateOptions::reproducible)
      .def_readwrite("drafter", &qd::GenerateOptions::drafter)
      .def_readwrite("draft_max", &qd::GenerateOptions::draft_max)
      .def_readwrite("adaptive", &qd::GenerateOptions::adaptive)
      .def_readwrite("prediction", &qd::GenerateOptions::prediction);

  py::enum_<qd::DrafterKind> kind(m, "DrafterKind");
  for (qd::DrafterKind k : {qd::DrafterKind::none, qd::DrafterKind::ngram, qd::DrafterKind::self,
                            qd::DrafterKind::model, qd::DrafterKind::hybrid, qd::DrafterKind::mtp})
    kind.value(qd::drafter_kind_name(k), k);

  using O = qd::EngineOptions;
  py::class_<O>(m, "EngineOptions")
      .def(py::init<>())
      .def_readwrite("drafter", &O::drafter)
      .def_readwrite("draft_path", &O::draft_path)
      .def_readwrite("skip_layers", &O::skip_layers)
      .def_readwrite("n_ctx", &O::n_ctx)
      .def_readwrite("threads", &O::threads)
      .def_readwrite("draft_max", &O::draft_max)
      .def_readwrite("adaptive", &O::adaptive)
      .def_readwrite("p_min", &O::p_min)
      .def_readwrite("ngram_min", &O::ngram_min)
      .def_readwrite("ngram_max", &O::ngram_max)
      .def_readwrite("draft_max_lag", &O::draft_max_lag)
      .def_readwrite("draft_window", &O::draft_window)
      .def_readwrite("draft_head", &O::draft_head)
      .def_readwrite("draft_quant", &O::draft_quant)
      .def_readwrite("draft_skip", &O::draft_skip)
      .def_readwrite("stop_ids", &O::stop_ids)
      .def_readwrite("mmap", &O::mmap);

  py::class_<qd::Stats> stats(m, "Stats", "What a generation drafted, accepted and spent its time on (seconds).");
  stats.def(py::init<>());
  qd::for_each_stats_field([&](const char* name, auto field) { stats.def_readwrite(name, field); });
  stats.def_property_readonly("acceptance_rate", &qd::Stats::acceptance_rate)
      .def_property_readonly("mean_accepted_length", &qd::Stats::mean_accepted_length,
                             "Accepted draft tokens per round.")
      .def_property_readonly("tokens_per_second", &qd::Stats::tokens_per_second)
      .def(
          "as_dict",
          [](const qd::Stats& s) {
            py::dict d;
            qd::for_each_stats_field([&](const char* name, auto field) { d[name] = s.*field; });
            d["acceptance_rate"] = s.acceptance_rate();
            d["mean_accepted_length"] = s.mean_accepted_length();
            d["tokens_per_second"] = s.tokens_per_second();
            return d;
          },
          "The stats as a plain dict (JSON-friendly).")
      .def("__repr__", [](const qd::Stats& s) {
        std::string r = "Stats(";
        qd::for_each_stats_field([&](const char* name, auto field) {
          if (r.size() > 6) r += ", ";
          r += std::string(name) + "=" + std::string(py::repr(py::cast(s.*field)));
        });
        return r + ")";
      });

  py::class_<qd::Engine>(m, "Engine", "A target with an optional drafter; the speculative loop, one step at a time.")
      .def(py::init([](const std::string& target, const O& options) {
             py::gil_scoped_release release;
             return std::make_unique<qd::Engine>(target, options);
           }),
           py::arg("target"), py::arg("options"))
      .def(
          "start",
          [](qd::Engine& e, const std::vector<int32_t>& prompt, const qd::GenerateOptions& opt) {
            py::gil_scoped_release release;
            e.start(prompt, opt);
          },
          py::arg("prompt"), py::arg("options"))
      .def(
          "step",
          [](qd::Engine& e) {
            std::vector<qd::Chunk> chunks;
            {
              py::gil_scoped_release release;
              e.step(&chunks);
            }
            py::list out;
            for (const qd::Chunk& c : chunks) out.append(py::make_tuple(qd::py_text(c.text), c.tokens, c.from_draft));
            return out;
          },
          "One prefill chunk or draft-verify round: [(text, tokens, from_draft)].")
      .def("cancel", &qd::Engine::cancel)
      .def_property_readonly("finished", &qd::Engine::finished)
      .def_property_readonly("finish_reason", [](const qd::Engine& e) { return qd::finish_reason_name(e.finish_reason()); })
      .def_property_readonly("generated", &qd::Engine::generated)
      .def_property_readonly("text", [](const qd::Engine& e) { return qd::py_text(e.text()); })
      .def_property_readonly("drafter", &qd::Engine::drafter)
      .def_property_readonly("n_vocab", &qd::Engine::n_vocab)
      .def_property_readonly("n_ctx", &qd::Engine::n_ctx)
      .def_property_readonly("n_ctx_train", &qd::Engine::n_ctx_train)
      .def_property_readonly("warm_up_seconds", &qd::Engine::warm_up_seconds)
      .def("stats", [](const qd::Engine& e) { return e.stats(); }, "The last generation's Stats (a copy).")
      .def_property_readonly("has_tokenizer", &qd::Engine::has_tokenizer)
      .def("tokenize", &qd::Engine::tokenize, py::arg("text"), py::arg("add_special") = true,
           py::arg("parse_special") = true)
      .def(
          "detokenize", [](const qd::Engine& e, const std::vector<int32_t>& ids) { return qd::py_text(e.detokenize(ids)); },
          py::arg("ids"));

  m.def(
      "check_compatible",
      [](const std::string& target, const std::string& draft) {
        py::gil_scoped_release release;
        qd::check_compatible(target, draft);
      },
      py::arg("target"), py::arg("draft"),
      "Raises IncompatibleModelsError unless the draft GGUF can draft for the target GGUF.");
  m.def("default_skip_layers", &qd::default_skip_layers, py::arg("n_layer"),
        "The layers self-speculation skips by default for a model of n_layer layers.");
}
