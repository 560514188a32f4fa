// Model::load: open and validate the file, then let the family named by general.architecture
// read its hyperparameters and view its weights in place.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "common/error.h"
#include "cpu/repack.h"
#include "cpu/rows8_order.h"
#include "model/transformer.h"

namespace qd {

namespace {

using Loader = std::shared_ptr<model::TransformerModel> (*)(const gguf::File&);

const std::vector<std::pair<std::string, Loader>>& families() {
  static const std::vector<std::pair<std::string, Loader>> kFamilies = {
      {"llama", model::load_llama},
      {"qwen2", model::load_qwen2},
      {"gemma3", model::load_gemma3},
      {"qwen3", model::load_qwen3},
      {"smollm3", model::load_smollm3},
      {"phi3", model::load_phi3},
      {"qwen3moe", model::load_qwen3moe},
      {"qwen35", model::load_qwen35},
  };
  return kFamilies;
}

}  // namespace

void model::TransformerModel::mtp_layer(Step&, int) const {
  throw UnsupportedError(file_->path() + ": architecture " + hp_.arch + " has no multi-token-prediction layers");
}

void model::TransformerModel::repack_for_kernels() {
  const Isa isa = active_isa();
  // The rows8 shape of m: requantized first where requantize left it here.
  auto packed_shape = [&](const cpu::Matrix& m) {
    auto later = requantize_later_.find(m.data);
    return later == requantize_later_.end() ? m : cpu::requantized_shape(m, later->second);
  };
  // The matrices to repack, each once (a tied output shares its embedding's copy), then one
  // buffer for all of them (cpu::rows8_alloc: huge pages throughout), filled in the same order.
  std::map<const uint8_t*, size_t> slot;
  std::vector<size_t> bytes, offsets;
  model::for_each_matrix(w_, [&](const std::string&, const cpu::Matrix& m) {
    const cpu::Matrix t = packed_shape(m);
    if (cpu::rows8_wanted(t, isa) && slot.emplace(m.data, bytes.size()).second) bytes.push_back(cpu::rows8_bytes(t));
  });
  if (bytes.empty()) return;
  repacked_ = cpu::rows8_alloc(bytes, &offsets);
  std::map<const uint8_t*, cpu::Matrix> done;
  model::for_each_matrix(w_, [&](const std::string&, cpu::Matrix& m) {
    const cpu::Matrix t = packed_shape(m);
    if (!cpu::rows8_wanted(t, isa)) return;
    auto it = done.find(m.data);
    if (it != done.end()) {
      m = it->second;
      return;
    }
    const uint8_t* original = m.data;
    uint8_t* dst = repacked_.get() + offsets[slot.at(original)];
    m = requantize_later_.count(original) ? cpu::requantize_rows8(m, t.type, dst, true, 0) : cpu::repack_rows8(m, dst, true, 0);
    done[original] = m;
  });
  requantize_later_.clear();
  // A requantized copy that was repacked is read no more.
  std::set<const uint8_t*> used;
  model::for_each_matrix(w_, [&](const std::string&, const cpu::Matrix& m) { used.insert(m.data); });
  requantized_.erase(std::remove_if(requantized_.begin(), requantized_.end(),
                                    [&](const std::unique_ptr<uint8_t[]>& b) { return !used.count(b.get()); }),
                     requantized_.end());
}

void model::TransformerModel::trim_output(int64_t rows) {
  cpu::Matrix& out = w_.output;
  constexpr int64_t kChunk = 8 * cpu::kRows8MaxChunkGroups;  // a view of the first rows keeps chunks whole
  if (rows <= 0 || out.data == w_.token_embd.data || out.layout != cpu::Layout::gguf) return;
  rows = (rows + kChunk - 1) / kChunk * kChunk;
  if (rows >= out.rows) return;
  w_.output_stored = out;
  out.rows = rows;
}

void model::TransformerModel::output_row(int64_t id, uint8_t* dst) const {
  const cpu::Matrix& out = w_.output;
  if (id < out.rows) return cpu::copy_row(out, id, dst);
  cpu::Matrix row = w_.output_stored;
  row.data += (size_t)id * row.row_bytes;
  row.rows = 1;
  if (row.type == out.type) {
    std::memcpy(dst, row.data, row.row_bytes);
  } else {  // the same row function as requantize_rows8 at load: the same bytes
    cpu::requantize(row, out.type, dst, /*drop_source=*/false, 1);
  }
}

std::vector<Model::MatrixInfo> model::TransformerModel::matrices() const {
  std::vector<MatrixInfo> out;
  const uint8_t* embd = w_.token_embd.data;
  model::for_each_matrix(w_, [&](const std::string& name, const cpu::Matrix& m) {
    if (name == "output.weight" && m.data == embd) return;
    const bool rows8 = m.layout == cpu::Layout::rows8;
    out.push_back({name, m.type, m.data, rows8 ? cpu::rows8_bytes(m) : (size_t)m.rows * m.row_bytes, rows8});
  });
  return out;
}

const std::vector<std::string>& Model::supported_archs() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const auto& f : families()) v.push_back(f.first);
    return v;
  }();
  return kNames;
}

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& opt) {
  auto file = std::make_shared<const gguf::File>(path, opt.mmap);
  const std::optional<std::string> arch = file->get_string("general.architecture");
  if (!arch) throw GGUFError(path + ": missing metadata key 'general.architecture'");
  for (const auto& [name, load_family] : families()) {
    if (name != *arch) continue;
    std::shared_ptr<model::TransformerModel> m = load_family(*file);
    if (opt.output_rows) m->trim_output(opt.output_rows(m->n_vocab()));
    if (!opt.requantize.empty()) m->requantize(opt.requantize);
    m->repack_for_kernels();
    static_cast<Model&>(*m).file_ = std::move(file);
    return m;
  }
  std::string list;
  for (const std::string& s : supported_archs()) list += (list.empty() ? "" : ", ") + s;
  throw UnsupportedError(path + ": architecture '" + *arch + "' is not supported (supported: " + list + ")");
}

}  // namespace qd
