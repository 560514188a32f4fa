// Context: the KV cache, scratch buffers and thread pool of one sequence over a shared Model,
// and the forward pass that runs the family's layers over micro-batches of the input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/checked.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "cpu/repack.h"
#include "cpu/rows8_order.h"
#include "model/kv_cache.h"
#include "model/ops.h"
#include "model/recurrent_state.h"
#include "model/rope_freqs.h"
#include "model/transformer.h"

namespace qd {

namespace {

// Longer inputs are processed in micro-batches of this many rows. Results do not depend on the
// split (batch invariance), so this only bounds the scratch memory.
constexpr int kMaxUbatch = 128;
// Positions a recurrent context can return to by default: a verify batch of 16 drafts + 1.
constexpr int kDefaultRollbackWindow = 17;

const model::TransformerModel& as_transformer(const std::shared_ptr<const Model>& m) {
  if (!m) throw ArgError("Context: model is null");
  const auto* t = dynamic_cast<const model::TransformerModel*>(m.get());
  if (!t) throw ArgError("Context: model was not created by Model::load");
  return *t;
}

// "12 GiB"-style size of n bytes, for messages.
std::string human_bytes(double n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (n >= 1024.0 && u < 5) n /= 1024.0, u++;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

[[noreturn]] void kv_too_large(const Hparams& hp, int n_ctx, const char* why) {
  const double bytes = 2.0 * 2.0 * hp.n_layer * (double)n_ctx * hp.n_head_kv * hp.head_dim;
  char exact[32];
  std::snprintf(exact, sizeof exact, "%.0f", bytes);
  throw ArgError("n_ctx " + std::to_string(n_ctx) + " needs a KV cache of " + exact + " bytes (" + human_bytes(bytes) +
                 ": keys and values in F16 for " + std::to_string(hp.n_layer) + " layers x " +
                 std::to_string(hp.n_head_kv * hp.head_dim) + " values per position), " + why +
                 "; use a smaller n_ctx");
}

void check_kv_size(const Hparams& hp, int n_ctx) {
  uint64_t n = 0;
  if (!checked_mul((uint64_t)hp.n_layer, (uint64_t)n_ctx, &n) ||
      !checked_mul(n, (uint64_t)hp.n_head_kv * (uint64_t)hp.head_dim, &n) || n > (SIZE_MAX >> 3)) {
    kv_too_large(hp, n_ctx, "more than this machine can address");
  }
}

}  // namespace

struct Context::Impl {
  const model::TransformerModel& m;
  const Hparams& hp;
  std::shared_ptr<ThreadPool> pool_owner;  // may be shared with other contexts (never run at once)
  ThreadPool& pool;
  std::shared_ptr<KvCache> kv_owner;  // shared with the layer-skipping views of this context
  KvCache& kv;
  std::vector<int> kv_valid;    // [n_layer]: positions whose keys/values this layer holds
  std::vector<uint8_t> skip;    // [n_layer]: 1 when the layer is skipped
  model::RopeFreqs freq_global, freq_swa;
  bool any_swa = false;
  Context::TraceFn trace;
  std::unique_ptr<model::RecurrentState> rs;  // hybrid recurrent models only
  Context::HiddenFn hidden_sink;
  std::vector<float> hidden;  // [cap][n_embd] output-normed rows for hidden_sink

  // Draft head (set_head_subset): ids [0, head_top) plus head_ids, whose rows of the output
  // matrix are copied into head_rows. head_top == 0: the full layer.
  int head_top = 0;
  std::vector<uint8_t> head_seen;  // [n_vocab] when a subset is set
  std::vector<int32_t> head_ids;
  std::vector<uint8_t> head_rows;
  // head_rows in the output matrix's own layout when that is rows8 (so the extra ids' logits are
  // the same bits as in the full layer), rebuilt when ids are added.
  cpu::Rows8Buffer head_packed;
  bool head_packed_stale = true;
  std::vector<float> head_out;     // [rows][head_ids.size()]

  int cap = 0;  // rows the scratch below holds
  std::vector<float> x, xn, tmp, q, k, v, att, gate, up;
  std::vector<float> moe_probs, moe_w, moe_x, moe_y;  // mixture of experts only
  std::vector<int32_t> moe_sel, moe_rows;
  std::vector<float> cos_g, sin_g, cos_s, sin_s;  // [cap][n_rot / 2]
  std::vector<float> qgate, mix, z;  // hybrid recurrent models only (model::Step)

  // shared: a base context's cache (a view), or null for a cache of its own.
  Impl(const model::TransformerModel& model, int n_ctx, std::shared_ptr<ThreadPool> p, std::shared_ptr<KvCache> shared)
      : m(model),
        hp(model.hparams()),
        pool_owner(std::move(p)),
        pool(*pool_owner),
        kv_owner(shared ? std::move(shared) : std::make_shared<KvCache>(hp.n_layer, n_ctx, hp.n_head_kv, hp.head_dim)),
        kv(*kv_owner),
        kv_valid((size_t)hp.n_layer, 0),
        skip((size_t)hp.n_layer, 0) {
    const float* factors = m.weights().rope_freqs;
    if (!factors) {
      // LongRoPE: the long factors when the context (rounded up to 256, as llama.cpp pads it)
      // exceeds the original context length, else the short ones.
      const int64_t padded = ((int64_t)n_ctx + 255) / 256 * 256;
      factors = padded > hp.rope_n_ctx_orig ? m.weights().rope_long : m.weights().rope_short;
    }
    freq_global = model::RopeFreqs((float)hp.rope_base, (float)hp.rope_freq_scale, factors, hp);
    freq_swa = model::RopeFreqs((float)hp.rope_base_swa, 1.0f, factors, hp);
    any_swa = std::any_of(hp.swa_layers.begin(), hp.swa_layers.end(), [](uint8_t s) { return s != 0; });
    if (hp.recurrent()) set_rollback(Context::Rollback::snapshot, kDefaultRollbackWindow);
    const int64_t computed = m.weights().output.rows;
    if (computed < hp.n_vocab) head_reset((int)computed);  // a trimmed output: a draft head at most
  }

  // A draft head of ids [0, n_top) and no others yet; n_top == 0: the full layer.
  void head_reset(int n_top) {
    head_top = n_top;
    head_ids.clear();
    head_rows.clear();
    head_packed_stale = true;
    head_seen.clear();
    if (head_top > 0) head_seen.assign((size_t)hp.n_vocab, 0);
  }

  void set_rollback(Context::Rollback mode, int window) {
    rs = std::make_unique<model::RecurrentState>(hp, mode, window);
    rs->reset();
  }

  // Grows the scratch to hold `rows` rows; happens once per new maximum, not per token.
  void reserve(int rows) {
    if (rows <= cap) return;
    cap = rows;
    const size_t E = hp.n_embd, Q = (size_t)hp.n_head * hp.head_dim, KV = (size_t)hp.n_head_kv * hp.head_dim;
    const size_t F = hp.n_ff, R = (size_t)hp.n_rot / 2, n = (size_t)rows;
    for (auto* b : {&x, &xn, &tmp}) b->resize(n * E);
    const size_t value_dim = (size_t)hp.ssm_n_v_heads * hp.ssm_d_state;
    q.resize(n * Q);
    att.resize(n * std::max(Q, value_dim));
    for (auto* b : {&k, &v}) b->resize(n * KV);
    for (auto* b : {&gate, &up}) b->resize(n * std::max(F, (size_t)hp.n_ff_exp));
    if (hp.n_expert > 0) {
      const size_t X = hp.n_expert, K = hp.n_expert_used;
      moe_probs.resize(n * X);
      moe_w.resize(n * K);
      moe_sel.resize(n * K);
      moe_rows.resize(n * K);
      moe_x.resize(n * E);
      moe_y.resize(n * K * E);
    }
    for (auto* b : {&cos_g, &sin_g, &cos_s, &sin_s}) b->resize(n * R);
    if (hp.recurrent()) {
      qgate.resize(n * 2 * Q);
      mix.resize(n * (2 * (size_t)hp.ssm_n_k_heads * hp.ssm_d_state + value_dim));
      z.resize(n * value_dim);
    }
    if (hidden_sink) hidden.resize(n * E);
  }

  // Runs the layers over n rows at positions pos0..; leaves the final hidden states in x.
  void forward(const int32_t* tokens, int n, int pos0) {
    const model::Weights& w = m.weights();
    const size_t E = hp.n_embd;
    for (int i = 0; i < n; i++) cpu::dequantize_row(w.token_embd, tokens[i], x.data() + i * E);
    if (hp.embd_scale != 1.0f) model::scale(x.data(), hp.embd_scale, (int64_t)n * hp.n_embd);

    model::Step s(hp, pool, kv);
    s.n = n;
    s.pos0 = pos0;
    s.x = x.data(), s.xn = xn.data(), s.tmp = tmp.data();
    s.q = q.data(), s.k = k.data(), s.v = v.data(), s.att = att.data();
    s.gate = gate.data(), s.up = up.data();
    if (hp.n_expert > 0) {
      s.moe_probs = moe_probs.data(), s.moe_w = moe_w.data(), s.moe_sel = moe_sel.data();
      s.moe_rows = moe_rows.data(), s.moe_x = moe_x.data(), s.moe_y = moe_y.data();
    }
    if (rs) {
      s.qgate = qgate.data(), s.mix = mix.data(), s.z = z.data();
      s.rs = rs.get();
      rs->begin_ubatch(pos0, n);
    }
    if (trace) s.trace = &trace;
    s.note("embd", -1, s.x, hp.n_embd);
    model::rope_rows(freq_global, hp, pos0, n, cos_g.data(), sin_g.data());
    s.rope_global = {cos_g.data(), sin_g.data()};
    if (any_swa) {
      model::rope_rows(freq_swa, hp, pos0, n, cos_s.data(), sin_s.data());
      s.rope_swa = {cos_s.data(), sin_s.data()};
    }
    for (int il = 0; il < hp.n_layer; il++) {
      if (skip[(size_t)il]) continue;
      m.layer(s, il);
      kv_valid[(size_t)il] = pos0 + n;
    }
    if (rs) rs->end_ubatch();
    if (hidden_sink) {
      model::rmsnorm(x.data(), m.weights().output_norm, n, hp.n_embd, hp.rms_eps, hidden.data());
      hidden_sink(pos0, n, hidden.data());
    }
  }

  // Final norm and output layer for `rows` rows of x starting at row r0, into logits.
  void output(int r0, int rows, float* logits) {
    const model::Weights& w = m.weights();
    const size_t E = hp.n_embd;
    model::rmsnorm(x.data() + r0 * E, w.output_norm, rows, hp.n_embd, hp.rms_eps, xn.data());
    if (trace) trace("result_norm", -1, xn.data(), rows, hp.n_embd);
    if (head_top > 0) return output_subset(rows, logits);
    cpu::matmul(w.output, xn.data(), rows, logits, pool);
    if (hp.logit_softcap > 0.0f) model::softcap(logits, hp.logit_softcap, (int64_t)rows * hp.n_vocab);
  }

  void output_subset(int rows, float* logits) {
    const cpu::Matrix& out = m.weights().output;
    const int64_t V = hp.n_vocab, n_extra = (int64_t)head_ids.size();
    // ids [0, head_top), and the rest of a chunk of the rows8 layout (overwritten below)
    cpu::matmul(cpu::rows8_prefix(out, head_top), xn.data(), rows, logits, V, pool);
    if (n_extra > 0) {
      cpu::Matrix extra = out;
      extra.data = head_rows.data();
      extra.rows = n_extra;
      extra.layout = cpu::Layout::gguf;
      if (out.layout == cpu::Layout::rows8) extra = packed_head_rows(extra);
      head_out.resize((size_t)rows * n_extra);
      cpu::matmul(extra, xn.data(), rows, head_out.data(), n_extra, pool);
    }
    const float cap = hp.logit_softcap;
    if (cap > 0.0f && n_extra > 0) model::softcap(head_out.data(), cap, rows * n_extra);
    for (int i = 0; i < rows; i++) {
      float* li = logits + (size_t)i * V;
      if (cap > 0.0f) model::softcap(li, cap, head_top);
      std::fill(li + head_top, li + V, -INFINITY);
      const float* e = head_out.data() + (size_t)i * n_extra;
      for (int64_t j = 0; j < n_extra; j++) li[head_ids[(size_t)j]] = e[j];
    }
  }

  // The extra rows repacked like the output matrix (padded with zero rows to a group of 8).
  cpu::Matrix packed_head_rows(cpu::Matrix extra) {
    const int64_t padded = (extra.rows + 7) / 8 * 8;
    if (head_packed_stale) {
      std::vector<uint8_t> rows(head_rows);
      rows.resize((size_t)padded * extra.row_bytes, 0);
      cpu::Matrix gguf = extra;
      gguf.data = rows.data();
      gguf.rows = padded;
      head_packed = cpu::rows8_alloc(gguf);
      cpu::repack_rows8(gguf, head_packed.get(), false, 1);  // on a generation's step: this thread only
      head_packed_stale = false;
    }
    extra.data = head_packed.get();
    extra.layout = cpu::Layout::rows8;
    return extra;
  }

  // Adds ids >= head_top not seen before to the draft head (up to kMaxHeadExtra).
  void head_add(const int32_t* ids, int n) {
    const cpu::Matrix& out = m.weights().output;
    for (int i = 0; i < n; i++) {
      const int32_t id = ids[i];
      if (id < head_top || head_seen[(size_t)id] || (int)head_ids.size() >= Context::kMaxHeadExtra) continue;
      head_seen[(size_t)id] = 1;
      head_ids.push_back(id);
      const size_t at = head_rows.size();
      head_rows.resize(at + out.row_bytes);
      m.output_row(id, head_rows.data() + at);
      head_packed_stale = true;
    }
  }
};

Context::Context(std::shared_ptr<const Model> model, int n_ctx, int n_threads)
    : Context(std::move(model), n_ctx, std::make_shared<ThreadPool>(n_threads)) {}

Context::Context(std::shared_ptr<const Model> model, int n_ctx, std::shared_ptr<ThreadPool> pool)
    : model_(std::move(model)) {
  const model::TransformerModel& m = as_transformer(model_);
  if (n_ctx < 1) throw ArgError("Context: n_ctx must be at least 1, got " + std::to_string(n_ctx));
  if (!pool) throw ArgError("Context: thread pool is null");
  check_kv_size(m.hparams(), n_ctx);  // throws before allocating when it would overflow
  n_ctx_ = n_ctx;
  try {
    impl_ = std::make_unique<Impl>(m, n_ctx, std::move(pool), nullptr);
  } catch (const std::bad_alloc&) {
    kv_too_large(m.hparams(), n_ctx, "which cannot be allocated");
  }
}

Context::Context(Context& base, std::vector<int> skip_layers) : model_(base.model_), base_(&base) {
  if (base.base_) throw ArgError("Context: a view of a view; make both views of the full context");
  if (base.impl_->rs) {
    throw ArgError("Context: a " + model_->hparams().arch + " context's recurrent state cannot be shared; " +
                   "give the layer-skipping context its own (Context(model, n_ctx, pool) and set_skip_layers)");
  }
  if (skip_layers.empty()) throw ArgError("Context: a view of a context must skip some layers");
  n_ctx_ = base.n_ctx_;
  base_seen_ = base.changes_;
  impl_ = std::make_unique<Impl>(base.impl_->m, n_ctx_, base.impl_->pool_owner, base.impl_->kv_owner);
  set_skip_layers(std::move(skip_layers));
}

std::shared_ptr<ThreadPool> Context::thread_pool() const { return impl_->pool_owner; }

Context::~Context() = default;

int Context::n_threads() const { return impl_->pool.size(); }

void Context::eval(const int32_t* tokens, int n, float* logits, bool last_only) {
  if (n <= 0) throw ArgError("eval: no tokens to evaluate");
  if (!tokens) throw ArgError("eval: tokens is null");
  if (n > n_ctx_ - n_past_) {
    throw ArgError("eval: " + std::to_string(n) + " tokens after n_past " + std::to_string(n_past_) +
                   " exceed n_ctx " + std::to_string(n_ctx_) + "; truncate() or use a context with a larger n_ctx");
  }
  const int V = model_->n_vocab();
  for (int i = 0; i < n; i++) {
    if (tokens[i] < 0 || tokens[i] >= V) {
      throw ArgError("eval: token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                     " is outside the vocabulary [0, " + std::to_string(V) + ")");
    }
  }
  if (base_ && base_seen_ != base_->changes_) {
    throw ArgError("eval: the context this view reads has evaluated or truncated since the view's last truncate(), "
                   "so what the view holds after position " + std::to_string(base_->n_past_) + " is stale; truncate(" +
                   std::to_string(base_->n_past_) + ") first");
  }
  if (base_ && n_past_ < base_->n_past_) {
    throw ArgError("eval: this view of a context is at n_past " + std::to_string(n_past_) + ", before its base's " +
                   std::to_string(base_->n_past_) + ", whose keys and values it would overwrite; truncate(" +
                   std::to_string(base_->n_past_) + ") first");
  }
  for (int il = 0; il < model_->n_layer(); il++) {
    const int base_valid = base_ ? base_->impl_->kv_valid[(size_t)il] : 0;
    if (!impl_->skip[(size_t)il] && std::max(impl_->kv_valid[(size_t)il], base_valid) < n_past_) {
      throw ArgError("eval: layer " + std::to_string(il) + " holds no KV for earlier positions (it was skipped); " +
                     "reset() after un-skipping layers");
    }
  }
  if (impl_->head_top > 0) impl_->head_add(tokens, n);
  changes_++;
  impl_->reserve(std::min(n, kMaxUbatch));
  for (int done = 0; done < n;) {
    const int m = std::min(kMaxUbatch, n - done);
    impl_->forward(tokens + done, m, n_past_);
    n_past_ += m;
    done += m;
    if (!logits) continue;
    if (!last_only) {
      impl_->output(0, m, logits + (size_t)(done - m) * V);
    } else if (done == n) {
      impl_->output(m - 1, 1, logits);
    }
  }
}

void Context::truncate(int n_past) {
  const int most = base_ ? std::max(n_past_, base_->n_past_) : n_past_;  // a view may move up to its base
  if (n_past < 0 || n_past > most) {
    throw ArgError("truncate: n_past " + std::to_string(n_past) + " is outside [0, " + std::to_string(most) + "]");
  }
  if (model::RecurrentState* rs = impl_->rs.get(); rs && n_past != n_past_) {
    if (n_past == 0) {
      rs->reset();
    } else if (n_past < rs->floor()) {
      throw ArgError("truncate: n_past " + std::to_string(n_past) + " is before position " +
                     std::to_string(rs->floor()) + ", the earliest this recurrent (" + model_->hparams().arch +
                     ") context can return to (its rollback window: the last " + std::to_string(rs->window()) +
                     " positions in snapshot mode, the last eval in recompute mode); truncate to 0 and re-evaluate");
    } else {
      rs->truncate(n_past_, n_past);
    }
  }
  n_past_ = n_past;
  for (int& v : impl_->kv_valid) v = std::min(v, n_past);
  changes_++;
  if (base_) base_seen_ = base_->changes_;
}

void Context::set_head_subset(int n_top, const std::vector<int32_t>& always) {
  const int V = model_->n_vocab();
  for (int32_t id : always) {
    if (id < 0 || id >= V) {
      throw ArgError("set_head_subset: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                     std::to_string(V) + ")");
    }
  }
  Impl& d = *impl_;
  const int64_t computed = d.m.weights().output.rows;
  if (computed < V && (n_top <= 0 || n_top > computed)) {
    throw ArgError("set_head_subset: this model computes the first " + std::to_string(computed) + " of its " +
                   std::to_string(V) + " output rows only (loaded with output_rows), so a draft head of " +
                   (n_top <= 0 ? std::string("all of them") : std::to_string(n_top) + " ids") +
                   " cannot be computed; load it without output_rows, or with as many as the head needs");
  }
  d.head_reset(n_top <= 0 || n_top >= V ? 0 : n_top);
  if (d.head_top == 0) return;
  d.head_add(always.data(), (int)always.size());
}

void Context::set_trace(TraceFn fn) { impl_->trace = std::move(fn); }

int Context::truncate_floor() const { return impl_->rs ? impl_->rs->floor() : 0; }

void Context::set_rollback(Rollback mode, int window) {
  if (!impl_->rs) return;
  impl_->set_rollback(mode, window);
  n_past_ = 0;
  for (int& v : impl_->kv_valid) v = 0;
}

Context::Rollback Context::rollback_mode() const { return impl_->rs ? impl_->rs->mode() : Rollback::snapshot; }

int Context::rollback_window() const { return impl_->rs ? impl_->rs->window() : 0; }

size_t Context::recurrent_state_bytes() const { return impl_->rs ? impl_->rs->bytes() : 0; }

void Context::set_hidden_sink(HiddenFn fn) {
  impl_->hidden_sink = std::move(fn);
  impl_->cap = 0;  // reserve() sizes the hidden rows on the next eval
}

int Context::head_subset() const { return impl_->head_top; }

void Context::set_skip_layers(std::vector<int> layers) {
  const int L = model_->n_layer();
  if (base_ && layers.empty()) throw ArgError("set_skip_layers: a view of a context must skip some layers");
  for (int il : layers) {
    if (il < 0 || il >= L) {
      throw ArgError("set_skip_layers: layer " + std::to_string(il) + " is outside [0, " + std::to_string(L) + ")");
    }
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  std::fill(impl_->skip.begin(), impl_->skip.end(), 0);
  for (int il : layers) impl_->skip[(size_t)il] = 1;
  skip_layers_ = std::move(layers);
}

}  // namespace qd
