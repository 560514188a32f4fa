// Parsing and validation of the GGUF header, metadata and tensor infos.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/checked.h"
#include "common/error.h"
#include "gguf/bus_error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_mapping.h"
#include "gguf/gguf_text.h"
#include "quant/quant_types.h"

namespace qd::gguf {

Value decode_scalar(ValueType t, const uint8_t* p);  // gguf_value.cpp

namespace {

// A bounds-checked cursor over the mapping; every read names the field it reads.
class Cursor {
 public:
  Cursor(const File& f, const uint8_t* base, uint64_t size) : f_(f), base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* field) const {
    if (n > remaining()) {
      f_.fail(pos_, std::string("truncated file: ") + field + " needs " + std::to_string(n) +
                        " bytes but only " + std::to_string(remaining()) + " remain");
    }
  }
  const uint8_t* take(uint64_t n, const char* field) {
    need(n, field);
    const uint8_t* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(const char* field) {
    T v;
    std::memcpy(&v, take(sizeof(T), field), sizeof(T));
    return v;
  }
  std::string_view read_string(const char* field) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>(field);
    if (len > remaining()) {
      f_.fail(at, std::string(field) + " has length " + std::to_string(len) + " past the end of the file (" +
                      std::to_string(remaining()) + " bytes remain)");
    }
    return std::string_view(reinterpret_cast<const char*>(take(len, field)), len);
  }

 private:
  const File& f_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// A count that passed the fits-in-the-file check can still describe a huge file; reserving
// for it up front would allocate several times the file size before a single element is
// parsed. Reserve at most this many and let vectors grow with what is actually parsed.
constexpr uint64_t kMaxReserve = 1 << 16;
uint64_t reserve_for(uint64_t count) { return count < kMaxReserve ? count : kMaxReserve; }

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

Value read_value(const File& f, Cursor& c, ValueType type, int depth);

Value read_array(const File& f, Cursor& c, int depth) {
  if (depth >= kMaxArrayDepth) {
    f.fail(c.pos(), "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
  }
  Value v;
  v.type = ValueType::ARRAY;
  const uint64_t at = c.pos();
  const uint32_t et = c.read<uint32_t>("array element type");
  if (!valid_value_type(et)) f.fail(at, "unknown array element type " + std::to_string(et));
  v.elem_type = static_cast<ValueType>(et);
  const uint64_t count_at = c.pos();
  v.count = c.read<uint64_t>("array length");
  const uint64_t esize = value_type_size(v.elem_type);
  if (esize != 0) {
    uint64_t total;
    if (!checked_mul(v.count, esize, &total) || total > c.remaining()) {
      f.fail(count_at, "array of " + std::to_string(v.count) + " " + value_type_name(v.elem_type) +
                           " values runs past the end of the file");
    }
    v.data = c.take(total, "array data");
    return v;
  }
  // Strings take >= 8 bytes each and arrays >= 12: a count the file cannot hold is rejected
  // before anything is allocated.
  const uint64_t min_elem = v.elem_type == ValueType::STRING ? 8 : 12;
  if (v.count > c.remaining() / min_elem) {
    f.fail(count_at, "array of " + std::to_string(v.count) + " " + value_type_name(v.elem_type) +
                         " values cannot fit in the " + std::to_string(c.remaining()) + " remaining bytes");
  }
  if (v.elem_type == ValueType::STRING) {
    v.strings.reserve(reserve_for(v.count));
    for (uint64_t i = 0; i < v.count; i++) v.strings.push_back(c.read_string("array string"));
  } else {
    v.items.reserve(reserve_for(v.count));
    for (uint64_t i = 0; i < v.count; i++) v.items.push_back(read_array(f, c, depth + 1));
  }
  return v;
}

Value read_value(const File& f, Cursor& c, ValueType type, int depth) {
  if (type == ValueType::STRING) {
    Value v;
    v.type = ValueType::STRING;
    v.str = c.read_string("string value");
    return v;
  }
  if (type == ValueType::ARRAY) return read_array(f, c, depth);
  return decode_scalar(type, c.take(value_type_size(type), "metadata value"));
}

}  // namespace

const char* TensorInfo::type_name() const {
  const quant::TypeTraits* t = quant::type_traits(type);
  return t ? t->name : "unknown";
}

namespace {
int64_t mtime_ns(const struct stat& st) { return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec; }
}  // namespace

File::File(const std::string& path, bool use_mmap) : path_(path), mapped_(use_mmap) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected below as not regular.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    throw GGUFError(path + ": cannot open: " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GGUFError(path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
  if (size_ == 0) {
    ::close(fd);
    throw GGUFError(path + ": file is empty, not a GGUF file (at byte 0)");
  }
  void* m = use_mmap ? map_file(fd, size_) : read_file(fd, size_);
  const int err = errno;
  if (m == nullptr) {
    ::close(fd);
    if (use_mmap) throw GGUFError(path + ": mmap failed: " + std::strerror(err));
    if (err == ENOMEM) {
      throw OutOfMemoryError(path + ": cannot allocate " + std::to_string(size_) +
                             " bytes to read the file into memory (mmap=False)");
    }
    throw GGUFError(path + ": cannot read the file into memory: " + std::strerror(err));
  }
  base_ = static_cast<const uint8_t*>(m);
  if (use_mmap) {
    fd_ = fd;
    watch_slot_ = watch_mapping(base_, size_, path_.c_str());
  } else {
    ::close(fd);
  }
  try {
    parse();
  } catch (...) {
    release();
    throw;
  }
}

File::~File() { release(); }

void File::release() {
  if (!base_) return;
  if (mapped_) {
    unwatch_mapping(watch_slot_);
    unmap_file(base_, size_);
    ::close(fd_);
  } else {
    free_file(base_, size_);
  }
  base_ = nullptr;
}

void File::check_unchanged() const {
  if (!mapped_) return;
  struct stat st;
  if (::fstat(fd_, &st) != 0) return;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == size_ && mtime_ns(st) == mtime_ns_) return;
  const std::string what = size != size_ ? "its size changed from " + std::to_string(size_) + " to " +
                                               std::to_string(size) + " bytes"
                                         : "it was modified";
  throw GGUFError(path_ + ": the model file changed on disk after it was loaded (" + what +
                  "): it was truncated or rewritten while in use; load it again, or load it with mmap=False to read "
                  "it into memory");
}

void File::fail(uint64_t offset, const std::string& what) const {
  throw GGUFError(printable(path_ + ": " + what + " (at byte " + std::to_string(offset) + ")", UINT64_MAX));
}

void File::parse() {
  Cursor c(*this, base_, size_);
  if (size_ < 4 || std::memcmp(base_, "GGUF", 4) != 0) {
    fail(0, "bad magic [" + hex_bytes(base_, size_ < 4 ? size_ : 4) + "], expected 'GGUF': not a GGUF file");
  }
  c.take(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    fail(4, "unsupported GGUF version " + std::to_string(version_) +
                (swapped == 2 || swapped == 3 ? ": a big-endian GGUF file, only little-endian files are supported"
                                              : " (supported: 2, 3)"));
  }
  const uint64_t n_tensors_at = c.pos();
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv_at = c.pos();
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 13) fail(n_kv_at, "metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  if (n_tensors > c.remaining() / 32) {
    fail(n_tensors_at, "tensor count " + std::to_string(n_tensors) + " cannot fit in the file");
  }
  if (n_kv * 13 + n_tensors * 32 > c.remaining()) {  // no overflow: each term is <= remaining
    fail(n_tensors_at, "tensor count " + std::to_string(n_tensors) + " and metadata count " + std::to_string(n_kv) +
                           " together cannot fit in the file");
  }

  kv_.reserve(reserve_for(n_kv));
  for (uint64_t i = 0; i < n_kv; i++) {
    const uint64_t at = c.pos();
    std::string key(c.read_string("metadata key"));
    if (!valid_utf8(key)) fail(at, "metadata key " + quoted(key) + " is not valid UTF-8");
    const uint64_t type_at = c.pos();
    const uint32_t t = c.read<uint32_t>("metadata value type");
    if (!valid_value_type(t)) fail(type_at, "metadata key " + quoted(key) + " has unknown value type " + std::to_string(t));
    const uint64_t value_at = c.pos();
    Value v = read_value(*this, c, static_cast<ValueType>(t), 0);
    if (!kv_index_.emplace(key, kv_.size()).second) fail(at, "duplicate metadata key " + quoted(key));
    if (key == "general.alignment") set_alignment(v, value_at);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  tensors_.reserve(reserve_for(n_tensors));
  for (uint64_t i = 0; i < n_tensors; i++) {
    TensorInfo ti;
    ti.info_offset = c.pos();
    ti.name = std::string(c.read_string("tensor name"));
    if (!valid_utf8(ti.name)) fail(ti.info_offset, "tensor name " + quoted(ti.name) + " is not valid UTF-8");
    const uint64_t dims_at = c.pos();
    ti.n_dims = c.read<uint32_t>("tensor n_dims");
    if (ti.n_dims == 0 || ti.n_dims > kMaxDims) {
      fail(dims_at, "tensor " + quoted(ti.name) + " has " + std::to_string(ti.n_dims) + " dimensions (1 to 4 allowed)");
    }
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < ti.n_dims; d++) {
      const uint64_t at = c.pos();
      const uint64_t ne = c.read<uint64_t>("tensor dimension");
      if (ne == 0 || ne > (uint64_t)INT64_MAX || !checked_mul(n_el, ne, &n_el) || n_el > (uint64_t)INT64_MAX) {
        fail(at, "tensor " + quoted(ti.name) + " dimension " + std::to_string(d) + " = " + std::to_string(ne) +
                     " is zero or makes the element count overflow");
      }
      ti.ne[d] = static_cast<int64_t>(ne);
    }
    const uint64_t type_at = c.pos();
    ti.type = c.read<uint32_t>("tensor type");
    const quant::TypeTraits* tt = quant::type_traits(ti.type);
    if (!tt) fail(type_at, "tensor " + quoted(ti.name) + " has unknown type id " + std::to_string(ti.type));
    if (ti.ne[0] % tt->block_size != 0) {
      fail(dims_at, "tensor " + quoted(ti.name) + " row length " + std::to_string(ti.ne[0]) + " is not a multiple of the " +
                        tt->name + " block size " + std::to_string(tt->block_size));
    }
    uint64_t nbytes = 0;
    if (!checked_mul(n_el / tt->block_size, tt->type_size, &nbytes)) fail(dims_at, "tensor " + quoted(ti.name) + " size overflows");
    ti.nbytes = nbytes;
    const uint64_t off_at = c.pos();
    ti.offset = c.read<uint64_t>("tensor data offset");
    if (ti.offset % alignment_ != 0) {
      fail(off_at, "tensor " + quoted(ti.name) + " data offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                       std::to_string(alignment_));
    }
    if (!tensor_index_.emplace(ti.name, tensors_.size()).second) fail(ti.info_offset, "duplicate tensor name " + quoted(ti.name));
    tensors_.push_back(std::move(ti));
  }

  // The data section starts at the next multiple of the alignment.
  uint64_t data = c.pos();
  const uint64_t rem = data % alignment_;
  if (rem != 0 && !checked_add(data, alignment_ - rem, &data)) fail(c.pos(), "data section offset overflows");
  if (data > size_ && !tensors_.empty()) {
    fail(c.pos(), "file ends before the data section (needs " + std::to_string(data) + " bytes, has " + std::to_string(size_) + ")");
  }
  data_offset_ = data;
  const uint64_t data_size = data <= size_ ? size_ - data : 0;
  for (TensorInfo& ti : tensors_) {
    uint64_t end;
    if (!checked_add(ti.offset, ti.nbytes, &end) || end > data_size) {
      fail(ti.info_offset, "tensor " + quoted(ti.name) + " data [" + std::to_string(ti.offset) + ", +" + std::to_string(ti.nbytes) +
                               ") runs past the end of the data section (" + std::to_string(data_size) + " bytes)");
    }
    ti.data = base_ + data_offset_ + ti.offset;
  }
}

void File::set_alignment(const Value& a, uint64_t at) {
  if (a.type != ValueType::UINT32) {
    fail(at, std::string("general.alignment must be uint32, not ") + value_type_name(a.type));
  }
  if (a.u64 == 0 || (a.u64 & (a.u64 - 1)) != 0 || a.u64 > (1u << 20)) {
    fail(at, "general.alignment " + std::to_string(a.u64) + " is not a power of two between 1 and 1048576");
  }
  alignment_ = a.u64;
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) {
    throw GGUFError(path_ + ": metadata '" + std::string(key) + "' is " + value_type_name(v->type) + ", expected an integer");
  }
  if (v->type == ValueType::UINT64 && v->u64 > (uint64_t)INT64_MAX) {
    throw GGUFError(path_ + ": metadata '" + std::string(key) + "' value " + std::to_string(v->u64) + " is out of range");
  }
  return v->i64;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == ValueType::FLOAT32 || v->type == ValueType::FLOAT64) return v->f64;
  if (v->is_integer()) return (double)v->i64;
  throw GGUFError(path_ + ": metadata '" + std::string(key) + "' is " + value_type_name(v->type) + ", expected a number");
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) {
    throw GGUFError(path_ + ": metadata '" + std::string(key) + "' is " + value_type_name(v->type) + ", expected bool");
  }
  return v->u64 != 0;
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) {
    throw GGUFError(path_ + ": metadata '" + std::string(key) + "' is " + value_type_name(v->type) + ", expected a string");
  }
  return std::string(v->str);
}

const Value* File::get_array(std::string_view key, ValueType elem) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  if (v->type != ValueType::ARRAY || v->elem_type != elem) {
    throw GGUFError(path_ + ": metadata '" + std::string(key) + "' is not an array of " + value_type_name(elem));
  }
  return v;
}

}  // namespace qd::gguf
