// A validated, memory-mapped GGUF file (v2 and v3).
//
// Every count, length, offset and size read from the file is checked with overflow-safe
// arithmetic against the file size before it is used, so a hostile file yields a GGUFError
// naming the file, the field and the byte offset, never an out-of-bounds read.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/gguf_value.h"

namespace qd::gguf {

constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kDefaultAlignment = 32;

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // GGML order: ne[0] is the contiguous dimension
  uint32_t type = 0;                    // GGML type id; quant::type_traits(type) != nullptr
  uint64_t offset = 0;                  // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;        // into the mapping
  uint64_t info_offset = 0;             // where this tensor's info starts in the file

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  const char* type_name() const;
};

class File {
 public:
  // use_mmap: map the file (pages read on demand, shared with the page cache); false: read it
  // into memory, so that truncating or rewriting the file later cannot affect this File.
  explicit File(const std::string& path, bool use_mmap = true);  // throws GGUFError
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t size() const { return size_; }
  const uint8_t* base() const { return base_; }
  bool mapped() const { return mapped_; }

  // A mapped file whose size or modification time is no longer what it was at load (it was
  // truncated or rewritten in place, so its mapped bytes are gone or changed) throws GGUFError.
  void check_unchanged() const;

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;

  // Typed access: nullopt when the key is absent; GGUFError when it has another type.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // accepts integers too
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // An array whose elements have type `elem` (nullptr when absent; GGUFError otherwise).
  const Value* get_array(std::string_view key, ValueType elem) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Throws GGUFError("<path>: <what> (at byte <offset>)").
  [[noreturn]] void fail(uint64_t offset, const std::string& what) const;

 private:
  void parse();
  void release();
  void set_alignment(const Value& v, uint64_t value_offset);

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  int fd_ = -1;             // kept open while mapped, for check_unchanged
  int64_t mtime_ns_ = 0;    // at load
  int watch_slot_ = -1;     // bus_error.h
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace qd::gguf
