#include "model/loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "quant/quant_types.h"

namespace qd::model {

namespace {

std::string shape_str(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; d++) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

std::string layer_name(int il, const char* what) { return "blk." + std::to_string(il) + "." + what; }

}  // namespace

void Loader::fail(const std::string& what) const { throw GGUFError(f_.path() + ": " + what); }

void Loader::unsupported(const std::string& what) const { throw UnsupportedError(f_.path() + ": " + what); }

std::optional<int64_t> Loader::int_key(const std::string& k) const { return f_.get_int(key(k)); }
std::optional<double> Loader::float_key(const std::string& k) const { return f_.get_float(key(k)); }
std::optional<std::string> Loader::str_key(const std::string& k) const { return f_.get_string(key(k)); }

int Loader::int_in(const std::string& k, std::optional<int64_t> def, int64_t lo, int64_t hi) const {
  std::optional<int64_t> v = int_key(k);
  if (!v) {
    if (!def) fail("missing metadata key '" + key(k) + "'");
    v = def;
  }
  if (*v < lo || *v > hi) {
    fail("metadata '" + key(k) + "' = " + std::to_string(*v) + " is outside [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]");
  }
  return (int)*v;
}

float Loader::float_in(const std::string& k, double def, double lo, double hi) const {
  const double v = float_key(k).value_or(def);
  if (!std::isfinite(v) || v < lo || v > hi) {
    fail("metadata '" + key(k) + "' = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]");
  }
  return (float)v;
}

const gguf::TensorInfo& Loader::tensor(const std::string& name) const {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (!t) fail("missing tensor '" + name + "' (required by architecture " + m_.hp_.arch + ")");
  const quant::TypeTraits* tt = quant::type_traits(t->type);
  if (!tt || !tt->to_float) {
    unsupported("tensor '" + name + "' has type " + (tt ? tt->name : std::to_string(t->type)) +
                ", which quickdraft cannot compute with yet");
  }
  return *t;
}

cpu::Matrix Loader::matrix(const std::string& name, int64_t cols, int64_t rows) const {
  const gguf::TensorInfo& t = tensor(name);
  if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != 1 || t.ne[3] != 1) {
    fail("tensor '" + name + "' has shape " + shape_str(t) + ", expected [" + std::to_string(cols) + ", " +
         std::to_string(rows) + "]");
  }
  const quant::TypeTraits* tt = quant::type_traits(t.type);
  if (cols % tt->block_size != 0) {
    fail("tensor '" + name + "' has rows of " + std::to_string(cols) + " elements, not a multiple of the " +
         tt->name + " block size " + std::to_string(tt->block_size));
  }
  cpu::Matrix m;
  m.data = t.data;
  m.type = t.type;
  m.cols = cols;
  m.rows = rows;
  m.row_bytes = (size_t)(cols / tt->block_size * tt->type_size);
  if ((uint64_t)m.row_bytes * (uint64_t)rows > t.nbytes) fail("tensor '" + name + "' is smaller than its shape");
  return m;
}

std::vector<cpu::Matrix> Loader::matrices(const std::string& name, int64_t cols, int64_t rows, int64_t n) const {
  const gguf::TensorInfo& t = tensor(name);
  if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != n || t.ne[3] != 1) {
    fail("tensor '" + name + "' has shape " + shape_str(t) + ", expected [" + std::to_string(cols) + ", " +
         std::to_string(rows) + ", " + std::to_string(n) + "]");
  }
  const quant::TypeTraits* tt = quant::type_traits(t.type);
  if (cols % tt->block_size != 0) {
    fail("tensor '" + name + "' has rows of " + std::to_string(cols) + " elements, not a multiple of the " +
         tt->name + " block size " + std::to_string(tt->block_size));
  }
  cpu::Matrix m;
  m.type = t.type;
  m.cols = cols;
  m.rows = rows;
  m.row_bytes = (size_t)(cols / tt->block_size * tt->type_size);
  if ((uint64_t)m.row_bytes * (uint64_t)rows * (uint64_t)n > t.nbytes) fail("tensor '" + name + "' is smaller than its shape");
  std::vector<cpu::Matrix> out((size_t)n, m);
  for (int64_t e = 0; e < n; e++) out[(size_t)e].data = t.data + (size_t)e * (size_t)rows * m.row_bytes;
  return out;
}

cpu::Matrix Loader::rows_of(const cpu::Matrix& m, int64_t r0, int64_t rows) {
  cpu::Matrix v = m;
  v.data = m.data + (size_t)r0 * m.row_bytes;
  v.rows = rows;
  return v;
}

const float* Loader::vector(const std::string& name, int64_t n) { return floats(name, n, 1); }

const float* Loader::floats(const std::string& name, int64_t cols, int64_t rows) {
  const gguf::TensorInfo& t = tensor(name);
  const int64_t n = cols * rows;
  if (t.n_elements() != n || t.ne[0] != cols) {
    fail("tensor '" + name + "' has shape " + shape_str(t) + ", expected [" + std::to_string(cols) +
         (rows > 1 ? ", " + std::to_string(rows) : std::string()) + "]");
  }
  // Copied (converted to F32) into model-owned storage, never read in place: these are tiny, and
  // they lie between the big matrices. Where the kernel maps page-cache folios whole (large
  // folios, Linux 6.x on ext4 and others), reading a 6 KB norm in place at every step would keep a
  // 2 MB folio of the neighbouring, repacked and released, matrix resident: 170 MB on the 1.5B.
  const quant::TypeTraits* tt = quant::type_traits(t.type);
  if (n % tt->block_size != 0) fail("tensor '" + name + "' length is not a multiple of its block size");
  std::vector<float>& dst = m_.owned_.emplace_back((size_t)n);
  tt->to_float(t.data, dst.data(), n);
  return dst.data();
}

void Loader::read_common_hparams() {
  Hparams& hp = m_.hp_;
  constexpr int64_t kBig = int64_t(1) << 24;
  hp.n_embd = int_in("embedding_length", std::nullopt, 1, kBig);
  hp.n_layer = int_in("block_count", std::nullopt, 1, 4096);
  hp.n_ff = int_in("feed_forward_length", std::nullopt, 1, kBig);
  hp.n_head = int_in("attention.head_count", std::nullopt, 1, 65536);
  hp.n_head_kv = int_in("attention.head_count_kv", hp.n_head, 1, hp.n_head);
  if (hp.n_head % hp.n_head_kv != 0) {
    fail("attention.head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
         std::to_string(hp.n_head_kv));
  }
  if (hp.n_head / hp.n_head_kv > 256) unsupported("more than 256 query heads per KV head");
  std::optional<int64_t> def_head_dim;
  if (hp.n_embd % hp.n_head == 0) def_head_dim = hp.n_embd / hp.n_head;
  hp.head_dim = int_in("attention.key_length", def_head_dim, 1, 65536);
  if (int_in("attention.value_length", hp.head_dim, 1, 65536) != hp.head_dim) {
    unsupported("attention.value_length differs from attention.key_length");
  }
  hp.n_ctx_train = int_in("context_length", 0, 0, INT32_MAX);
  hp.rms_eps = float_in("attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0);
  hp.rope_base = float_in("rope.freq_base", 10000.0, 1e-3, 1e30);
  hp.rope_base_swa = hp.rope_base;
  hp.n_rot = int_in("rope.dimension_count", hp.head_dim, 2, hp.head_dim);
  if (hp.n_rot % 2 != 0) fail("rope.dimension_count " + std::to_string(hp.n_rot) + " is odd");

  read_rope_scaling({"none", "linear", "yarn"});
  hp.attn_scale = 1.0f / std::sqrt((float)hp.head_dim);
  hp.logit_softcap = float_in("final_logit_softcapping", 0.0, 0.0, 1e30);
  hp.swa_layers.assign((size_t)hp.n_layer, 0);
  hp.nope_layers.assign((size_t)hp.n_layer, 0);
}

void Loader::read_rope_scaling(const std::vector<std::string>& supported) {
  Hparams& hp = m_.hp_;
  // As llama.cpp reads them: an absent type is linear (with factor 1 unless one is given), the
  // factor falls back on the old key rope.scale_linear, and 0 means 1.
  hp.rope_scaling = str_key("rope.scaling.type").value_or("linear");
  if (std::find(supported.begin(), supported.end(), hp.rope_scaling) == supported.end()) {
    std::string list;
    for (const std::string& t : supported) list += (list.empty() ? "" : ", ") + t;
    unsupported("rope scaling type '" + hp.rope_scaling + "' is not supported for architecture " + hp.arch +
                " (supported: " + list + ")");
  }
  double factor = float_in("rope.scaling.factor", float_key("rope.scale_linear").value_or(0.0), 0.0, 1e6);
  if (factor == 0.0) factor = 1.0;
  if (factor < 1e-6) fail("metadata '" + key("rope.scaling.factor") + "' is too small");
  hp.rope_freq_scale = hp.rope_scaling == "none" ? 1.0f : 1.0f / (float)factor;  // in float, as llama.cpp
  if (hp.rope_scaling == "linear" && hp.rope_freq_scale == 1.0f) hp.rope_scaling = "none";  // no scaling at all
  hp.rope_ext_factor = hp.rope_scaling == "yarn" ? 1.0f : 0.0f;
  hp.rope_attn_factor = float_in("rope.scaling.attn_factor", 1.0, 1e-6, 1e6);
  hp.rope_n_ctx_orig = int_in("rope.scaling.original_context_length", hp.n_ctx_train, 0, INT32_MAX);
}

void Loader::read_common_weights(LayerParts parts) {
  Hparams& hp = m_.hp_;
  Weights& w = m_.w_;
  const gguf::TensorInfo& emb = tensor("token_embd.weight");
  if (emb.ne[1] < 1 || emb.ne[1] > INT32_MAX) fail("tensor 'token_embd.weight' has a bad vocabulary size");
  hp.n_vocab = (int)emb.ne[1];
  const int64_t E = hp.n_embd, V = hp.n_vocab, F = hp.n_ff;
  const int64_t Q = (int64_t)hp.n_head * hp.head_dim, KV = (int64_t)hp.n_head_kv * hp.head_dim;
  w.token_embd = matrix("token_embd.weight", E, V);
  w.output = has_tensor("output.weight") ? matrix("output.weight", E, V) : w.token_embd;
  w.output_norm = vector("output_norm.weight", E);
  if (has_tensor("rope_freqs.weight")) w.rope_freqs = vector("rope_freqs.weight", hp.n_rot / 2);

  w.layers.resize((size_t)hp.n_layer);
  for (int il = 0; il < hp.n_layer; il++) {
    LayerWeights& L = w.layers[(size_t)il];
    auto name = [il](const char* what) { return layer_name(il, what); };
    L.attn_norm = vector(name("attn_norm.weight"), E);
    // q, k and v in one fused matrix (Phi-3; llama.cpp accepts it for every family) are viewed
    // as three row ranges of it, in place.
    if (has_tensor(name("attn_qkv.weight"))) {
      const cpu::Matrix qkv = matrix(name("attn_qkv.weight"), E, Q + 2 * KV);
      L.wq = rows_of(qkv, 0, Q);
      L.wk = rows_of(qkv, Q, KV);
      L.wv = rows_of(qkv, Q + KV, KV);
      L.fused_qkv = true;
    } else {
      L.wq = matrix(name("attn_q.weight"), E, Q);
      L.wk = matrix(name("attn_k.weight"), E, KV);
      L.wv = matrix(name("attn_v.weight"), E, KV);
    }
    L.wo = matrix(name("attn_output.weight"), Q, E);
    L.ffn_norm = vector(name("ffn_norm.weight"), E);
    if (parts.moe) {  // the router and the experts replace the dense feed-forward
      const int64_t X = hp.n_expert, FE = hp.n_ff_exp;
      L.ffn_gate_inp = matrix(name("ffn_gate_inp.weight"), E, X);
      L.gate_exps = matrices(name("ffn_gate_exps.weight"), E, FE, X);
      L.up_exps = matrices(name("ffn_up_exps.weight"), E, FE, X);
      L.down_exps = matrices(name("ffn_down_exps.weight"), FE, E, X);
    } else if (parts.fused_gate_up) {  // ffn_up holds the gate's rows, then the up projection's
      const cpu::Matrix gate_up = matrix(name("ffn_up.weight"), E, 2 * F);
      L.ffn_gate = rows_of(gate_up, 0, F);
      L.ffn_up = rows_of(gate_up, F, F);
      L.fused_gate_up = true;
    } else {
      L.ffn_gate = matrix(name("ffn_gate.weight"), E, F);
      L.ffn_up = matrix(name("ffn_up.weight"), E, F);
    }
    if (!parts.moe) L.ffn_down = matrix(name("ffn_down.weight"), F, E);
    if (parts.qkv_bias) {
      L.bq = vector(name("attn_q.bias"), Q);
      L.bk = vector(name("attn_k.bias"), KV);
      L.bv = vector(name("attn_v.bias"), KV);
    }
    if (parts.qk_norm) {
      L.q_norm = vector(name("attn_q_norm.weight"), hp.head_dim);
      L.k_norm = vector(name("attn_k_norm.weight"), hp.head_dim);
    }
    if (parts.post_norms) {
      L.post_attn_norm = vector(name("post_attention_norm.weight"), E);
      L.post_ffw_norm = vector(name("post_ffw_norm.weight"), E);
    }
  }
}

}  // namespace qd::model
