// TransformerModel::requantize: weight matrices of a wide type rewritten in a narrower one at
// load (a cheaper draft model), through float32 one row at a time, in slices on every core
// (cpu::requantize). A matrix the active ISA's kernels read repacked is left to
// repack_for_kernels, which requantizes it straight into the rows8 layout (cpu::requantize_rows8):
// no requantized copy written, then copied again.
#include <map>
#include <string>

#include "common/error.h"
#include "cpu/repack.h"
#include "model/transformer.h"
#include "quant/quant_types.h"

namespace qd::model {

namespace {

// More bytes per weight than `to` (a * b / c compares the ratios without rounding).
bool wider(const quant::TypeTraits& t, const quant::TypeTraits& to) {
  return t.type_size * to.block_size > to.type_size * t.block_size;
}

std::string writable_types() {
  std::string list;
  for (uint32_t id = 0; id < 64; id++) {
    const quant::TypeTraits* t = quant::type_traits(id);
    if (t && t->from_float) list += (list.empty() ? "" : ", ") + std::string(t->name);
  }
  return list;
}

}  // namespace

void TransformerModel::requantize(const std::string& to_name) {
  const quant::TypeTraits* to = quant::type_by_name(to_name);
  if (!to || !to->from_float) {
    throw ArgError("cannot requantize weights to '" + to_name + "' (supported: " + writable_types() + ")");
  }
  const Isa isa = active_isa();
  std::map<const uint8_t*, cpu::Matrix> done;  // a tied output shares its embedding's copy
  const bool tied = w_.output.data == w_.token_embd.data;
  for_each_matrix(w_, [&](const std::string& name, cpu::Matrix& m) {
    // An embedding that is only looked up reads one row per token: rewriting it buys no speed
    // and costs load time (a second at the Qwen2.5-0.5B's 136M weights), memory and accuracy.
    if (name == "token_embd.weight" && !tied) return;
    auto it = done.find(m.data);
    if (it != done.end()) {
      m = it->second;
      return;
    }
    const quant::TypeTraits* from = quant::type_traits(m.type);
    if (m.layout != cpu::Layout::gguf || !from || !from->to_float || !wider(*from, *to) || m.cols % to->block_size) return;
    const cpu::Matrix narrow = cpu::requantized_shape(m, (uint32_t)to->type);
    if (cpu::rows8_wanted(narrow, isa)) {  // repack_for_kernels writes it straight in the rows8 layout
      requantize_later_[m.data] = narrow.type;
      return;
    }
    requantized_.emplace_back(new uint8_t[narrow.row_bytes * (size_t)m.rows]);
    const uint8_t* original = m.data;
    m = cpu::requantize(m, narrow.type, requantized_.back().get(), true, 0);
    done[original] = m;
  });
}

}  // namespace qd::model
