// quickdraft._core.LoadedModel (weights mapped in place) and quickdraft._core.Context (KV cache
// over a LoadedModel). The Python class quickdraft.Model combines the two.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "quant/quant_types.h"

namespace py = pybind11;

namespace {

struct BoundModel {
  std::shared_ptr<const qd::Model> m;
  const qd::Hparams& hp() const { return m->hparams(); }
};

// Token ids from any 1-D integer sequence or array, range-checked against the vocabulary.
std::vector<int32_t> to_ids(const py::handle& ids, int n_vocab) {
  py::array arr = py::array::ensure(ids);
  if (!arr) throw py::type_error("token ids must be a 1-D sequence of integers");
  if (arr.ndim() != 1) throw qd::ArgError("token ids must be 1-D, got " + std::to_string(arr.ndim()) + " dimensions");
  if (arr.size() == 0) throw qd::ArgError("eval: no tokens to evaluate");
  const char kind = arr.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    throw py::type_error("token ids must be integers, got dtype " + std::string(py::str(arr.dtype())));
  }
  auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
  if (!a) throw py::type_error("token ids must be integers that fit in 64 bits");
  std::vector<int32_t> out((size_t)a.size());
  const int64_t* p = a.data();
  for (size_t i = 0; i < out.size(); i++) {
    if (p[i] < 0 || p[i] >= n_vocab) {
      throw qd::ArgError("eval: token id " + std::to_string(p[i]) + " at index " + std::to_string(i) +
                         " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
    out[i] = (int32_t)p[i];
  }
  return out;
}

class BoundContext {
 public:
  BoundContext(const BoundModel& model, int n_ctx, int n_threads) : model_(model.m) {
    py::gil_scoped_release release;
    ctx_ = std::make_unique<qd::Context>(model_, n_ctx, n_threads);
  }
  // A layer-skipping view of base's context (qd::Context(base, skip_layers)); one lock for the
  // two, since they share a KV cache.
  BoundContext(BoundContext& base, std::vector<int> skip_layers) : model_(base.model_), mu_(base.mu_) {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(*mu_);
    ctx_ = std::make_unique<qd::Context>(*base.ctx_, std::move(skip_layers));
  }

  // [n, n_vocab] logits of every position, or [n_vocab] of the last one.
  py::array_t<float> eval(const py::handle& ids, bool last_only) {
    const std::vector<int32_t> t = to_ids(ids, model_->n_vocab());
    const py::ssize_t n = (py::ssize_t)t.size(), V = model_->n_vocab();
    py::array_t<float> out = last_only ? py::array_t<float>({V}) : py::array_t<float>({n, V});
    float* dst = out.mutable_data();
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(*mu_);
      model_->file().check_unchanged();
      ctx_->eval(t.data(), (int)n, dst, last_only);
    }
    return out;
  }

  // Appends the tokens to the KV cache without computing logits (prompt prefill).
  void feed(const py::handle& ids) {
    const std::vector<int32_t> t = to_ids(ids, model_->n_vocab());
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(*mu_);
    model_->file().check_unchanged();
    ctx_->eval(t.data(), (int)t.size(), nullptr);
  }

  // eval(ids) that also returns every traced intermediate: [(name, layer, array[rows][cols])].
  py::tuple trace_eval(const py::handle& ids) {
    struct Item {
      std::string name;
      int il, rows, cols;
      std::vector<float> data;
    };
    std::vector<Item> items;
    py::array_t<float> logits;
    {
      std::lock_guard<std::mutex> lock(*mu_);
      ctx_->set_trace([&](const char* name, int il, const float* x, int rows, int cols) {
        items.push_back({name, il, rows, cols, std::vector<float>(x, x + (size_t)rows * cols)});
      });
    }
    try {
      logits = eval(ids, false);
    } catch (...) {
      std::lock_guard<std::mutex> lock(*mu_);
      ctx_->set_trace({});
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(*mu_);
      ctx_->set_trace({});
    }
    py::list out;
    for (const Item& it : items) {
      py::array_t<float> a({it.rows, it.cols});
      std::copy(it.data.begin(), it.data.end(), a.mutable_data());
      out.append(py::make_tuple(it.name, it.il, a));
    }
    return py::make_tuple(logits, out);
  }

  void truncate(int n_past) {
    std::lock_guard<std::mutex> lock(*mu_);
    ctx_->truncate(n_past);
  }

  // (logits [n, n_vocab], h [n, n_embd]): every row's final hidden state after the output norm,
  // what an MTP head reads (llama.cpp's h_nextn).
  py::tuple eval_hidden(const py::handle& ids) {
    const py::ssize_t E = model_->hparams().n_embd;
    std::vector<float> h;
    {
      std::lock_guard<std::mutex> lock(*mu_);
      ctx_->set_hidden_sink([&](int, int n, const float* rows) { h.insert(h.end(), rows, rows + (size_t)n * E); });
    }
    py::array_t<float> logits;
    try {
      logits = eval(ids, false);
    } catch (...) {
      std::lock_guard<std::mutex> lock(*mu_);
      ctx_->set_hidden_sink({});
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(*mu_);
      ctx_->set_hidden_sink({});
    }
    py::array_t<float> out({(py::ssize_t)h.size() / E, E});
    std::copy(h.begin(), h.end(), out.mutable_data());
    return py::make_tuple(logits, out);
  }
  void set_rollback(const std::string& mode, int window) {
    qd::Context::Rollback m;
    if (mode == "snapshot") {
      m = qd::Context::Rollback::snapshot;
    } else if (mode == "recompute") {
      m = qd::Context::Rollback::recompute;
    } else {
      throw qd::ArgError("rollback mode must be 'snapshot' or 'recompute', got '" + mode + "'");
    }
    std::lock_guard<std::mutex> lock(*mu_);
    ctx_->set_rollback(m, window);
  }
  void set_skip_layers(std::vector<int> layers) {
    std::lock_guard<std::mutex> lock(*mu_);
    ctx_->set_skip_layers(std::move(layers));
  }
  void set_head_subset(int n_top, const std::vector<int32_t>& always) {
    std::lock_guard<std::mutex> lock(*mu_);
    ctx_->set_head_subset(n_top, always);
  }
  const qd::Context& ctx() const { return *ctx_; }

 private:
  std::shared_ptr<const qd::Model> model_;
  std::unique_ptr<qd::Context> ctx_;
  // One eval at a time (the GIL is released while it runs), shared with views of this context.
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
};

// The MTP head of a qwen35 file on its own (tests compare it with the numpy oracle).
class BoundMtp {
 public:
  BoundMtp(const BoundModel& model, int n_ctx, int n_threads) {
    py::gil_scoped_release release;
    head_ = std::make_unique<qd::model::MtpHead>(model.m, n_ctx, std::make_shared<qd::ThreadPool>(std::max(1, n_threads)));
  }
  // (logits [n, n_vocab], h_out [n, n_embd]) of rows (ids[i], h[i]) at positions n_past...
  py::tuple eval(const py::handle& ids, py::array_t<float, py::array::c_style | py::array::forcecast> h) {
    const qd::Model& m = head_->model();
    const std::vector<int32_t> t = to_ids(ids, m.n_vocab());
    const py::ssize_t n = (py::ssize_t)t.size(), V = m.n_vocab(), E = m.hparams().n_embd;
    if (h.ndim() != 2 || h.shape(0) != n || h.shape(1) != E)
      throw qd::ArgError("MtpHead.eval: h must be [len(ids), n_embd] = [" + std::to_string(n) + ", " + std::to_string(E) + "]");
    py::array_t<float> logits({n, V}), h_out({n, E});
    float* lg = logits.mutable_data();
    float* ho = h_out.mutable_data();
    const float* hp = h.data();
    {
      py::gil_scoped_release release;
      head_->eval(t.data(), hp, (int)n, lg, false, ho);
    }
    return py::make_tuple(logits, h_out);
  }
  qd::model::MtpHead& head() { return *head_; }

 private:
  std::unique_ptr<qd::model::MtpHead> head_;
};

py::dict hparams_dict(const qd::Hparams& h) {
  py::dict d;
  d["arch"] = h.arch;
  d["n_vocab"] = h.n_vocab;
  d["n_ctx_train"] = h.n_ctx_train;
  d["n_embd"] = h.n_embd;
  d["n_layer"] = h.n_layer;
  d["n_head"] = h.n_head;
  d["n_head_kv"] = h.n_head_kv;
  d["head_dim"] = h.head_dim;
  d["n_ff"] = h.n_ff;
  d["n_expert"] = h.n_expert;
  d["n_expert_used"] = h.n_expert_used;
  d["n_ff_exp"] = h.n_ff_exp;
  d["n_rot"] = h.n_rot;
  d["rms_eps"] = h.rms_eps;
  d["rope_base"] = h.rope_base;
  d["rope_base_swa"] = h.rope_base_swa;
  d["rope_neox"] = h.rope_neox;
  d["rope_freq_scale"] = h.rope_freq_scale;
  d["rope_scaling"] = h.rope_scaling;
  d["rope_ext_factor"] = h.rope_ext_factor;
  d["rope_attn_factor"] = h.rope_attn_factor;
  d["rope_n_ctx_orig"] = h.rope_n_ctx_orig;
  d["attn_scale"] = h.attn_scale;
  d["embd_scale"] = h.embd_scale;
  d["sliding_window"] = h.sliding_window;
  d["logit_softcap"] = h.logit_softcap;
  py::list swa;
  for (uint8_t s : h.swa_layers) swa.append(py::bool_(s != 0));
  d["swa_layers"] = swa;
  py::list nope;
  for (uint8_t s : h.nope_layers) nope.append(py::bool_(s != 0));
  d["nope_layers"] = nope;
  py::list rec;
  for (uint8_t r : h.recurrent_layers) rec.append(py::bool_(r != 0));
  d["recurrent_layers"] = rec;
  d["ssm_d_conv"] = h.ssm_d_conv;
  d["ssm_d_state"] = h.ssm_d_state;
  d["ssm_n_k_heads"] = h.ssm_n_k_heads;
  d["ssm_n_v_heads"] = h.ssm_n_v_heads;
  d["n_mtp"] = h.n_mtp;
  return d;
}

}  // namespace

void register_model(py::module_& m) {
  py::class_<BoundModel>(m, "LoadedModel", "A GGUF model's weights, mapped in place; shared by contexts.")
      .def(py::init([](const std::string& path, const std::string& requantize, bool mmap, int64_t output_rows) {
             py::gil_scoped_release release;
             qd::LoadOptions opt;
             opt.requantize = requantize;
             opt.mmap = mmap;
             if (output_rows > 0) opt.output_rows = [output_rows](int64_t) { return output_rows; };
             return BoundModel{qd::Model::load(path, opt)};
           }),
           py::arg("path"), py::arg("requantize") = "", py::arg("mmap") = true, py::arg("output_rows") = 0,
           "requantize: a GGML type name ('q4_0'); matrices stored wider are requantized to it at load. mmap=False "
           "reads the file into memory instead of mapping it. output_rows > 0: only the output layer's first rows "
           "(rounded up to 64) are prepared, and a context computes a draft head within them (set_head_subset).")
      .def_property_readonly("mapped", [](const BoundModel& s) { return s.m->file().mapped(); })
      .def_property_readonly(
          "matrix_types",
          [](const BoundModel& s) {
            py::dict d;
            for (const auto& info : s.m->matrices()) d[py::str(info.name)] = qd::quant::type_traits(info.type)->name;
            return d;
          },
          "{GGUF tensor name: GGML type name} of every weight matrix as computed with (a tied output is listed as "
          "its embedding).")
      .def_property_readonly(
          "matrix_storage",
          [](const BoundModel& s) {
            py::dict d;
            for (const auto& info : s.m->matrices()) {
              d[py::str(info.name)] = py::make_tuple((uintptr_t)info.data, info.bytes, info.rows8 ? "rows8" : "gguf");
            }
            return d;
          },
          "{GGUF tensor name: (address, bytes, layout)} of every weight matrix as computed with: 'rows8' for the "
          "copies repacked at load (one buffer for the whole model), 'gguf' for matrices read as stored.")
      .def_property_readonly("path", [](const BoundModel& s) { return s.m->file().path(); })
      .def_property_readonly("arch", [](const BoundModel& s) { return s.hp().arch; })
      .def_property_readonly("n_vocab", [](const BoundModel& s) { return s.hp().n_vocab; })
      .def_property_readonly("n_ctx_train", [](const BoundModel& s) { return s.hp().n_ctx_train; })
      .def_property_readonly("n_layer", [](const BoundModel& s) { return s.hp().n_layer; })
      .def_property_readonly("n_embd", [](const BoundModel& s) { return s.hp().n_embd; })
      .def_property_readonly("hparams", [](const BoundModel& s) { return hparams_dict(s.hp()); });
  m.attr("SUPPORTED_ARCHS") = py::tuple(py::cast(qd::Model::supported_archs()));

  py::class_<BoundContext>(m, "Context", "KV cache and scratch for one sequence over a LoadedModel.")
      .def(py::init<const BoundModel&, int, int>(), py::arg("model"), py::arg("n_ctx"), py::arg("n_threads") = 0)
      .def("eval", &BoundContext::eval, py::arg("ids"), py::arg("last_only") = false,
           "Logits float32 [len(ids), n_vocab] (or [n_vocab] with last_only), continuing from n_past.")
      .def("trace_eval", &BoundContext::trace_eval, py::arg("ids"),
           "Debugging: (logits, [(name, layer, array)]) with every intermediate of the forward pass.")
      .def("eval_hidden", &BoundContext::eval_hidden, py::arg("ids"),
           "(logits [n, n_vocab], h [n, n_embd]): also every row's output-normed final hidden state.")
      .def("feed", &BoundContext::feed, py::arg("ids"), "Append ids to the KV cache without computing logits.")
      .def("truncate", &BoundContext::truncate, py::arg("n_past"), "Keep the first n_past positions.")
      .def("reset", [](BoundContext& s) { s.truncate(0); })
      .def_property_readonly("truncate_floor", [](const BoundContext& s) { return s.ctx().truncate_floor(); },
                             "The smallest n_past > 0 truncate() accepts (0 for a transformer: any).")
      .def("set_rollback", &BoundContext::set_rollback, py::arg("mode"), py::arg("window"),
           "Recurrent models: 'snapshot' or 'recompute' state rollback over `window` positions; resets.")
      .def_property_readonly("rollback_mode",
                             [](const BoundContext& s) {
                               return s.ctx().rollback_mode() == qd::Context::Rollback::snapshot ? "snapshot"
                                                                                                  : "recompute";
                             })
      .def_property_readonly("rollback_window", [](const BoundContext& s) { return s.ctx().rollback_window(); })
      .def_property_readonly("recurrent_state_bytes",
                             [](const BoundContext& s) { return s.ctx().recurrent_state_bytes(); })
      .def_property_readonly("n_past", [](const BoundContext& s) { return s.ctx().n_past(); })
      .def_property_readonly("n_ctx", [](const BoundContext& s) { return s.ctx().n_ctx(); })
      .def_property_readonly("n_threads", [](const BoundContext& s) { return s.ctx().n_threads(); })
      .def("set_head_subset", &BoundContext::set_head_subset, py::arg("n_top"), py::arg("always") = std::vector<int32_t>(),
           "Draft head: logits only for ids < n_top, `always`, and ids evaluated from now on; others -inf.")
      .def_property_readonly("head_subset", [](const BoundContext& s) { return s.ctx().head_subset(); })
      .def_property(
          "skip_layers", [](const BoundContext& s) { return s.ctx().skip_layers(); }, &BoundContext::set_skip_layers)
      .def(
          "skipping_view",
          [](BoundContext& s, std::vector<int> skip_layers) {
            return std::make_unique<BoundContext>(s, std::move(skip_layers));
          },
          py::arg("skip_layers"), py::keep_alive<0, 1>(),
          "Self-speculation's drafter: a context that runs only the layers not in skip_layers over this one's KV "
          "cache. It attends to this context's keys and values below its n_past (truncate() moves it up to there) "
          "and writes its own after them, which this context overwrites as it evaluates those positions.");

  py::class_<BoundMtp>(m, "MtpHead", "A qwen35 file's multi-token-prediction head with its own KV cache.")
      .def(py::init<const BoundModel&, int, int>(), py::arg("model"), py::arg("n_ctx"), py::arg("n_threads") = 1)
      .def("eval", &BoundMtp::eval, py::arg("ids"), py::arg("h"),
           "(logits [n, n_vocab], h_out [n, n_embd]) of rows (ids[i] at position n_past + i, h[i] the hidden state "
           "of the position before).")
      .def("truncate", [](BoundMtp& s, int n) { s.head().truncate(n); }, py::arg("n_past"))
      .def_property_readonly("n_past", [](BoundMtp& s) { return s.head().n_past(); });
}
