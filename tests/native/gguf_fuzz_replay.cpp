// gguf_fuzz_replay DIR...: opens every file in the directories with qd::gguf::File and reads
// all it exposes (metadata values, typed getters, every dequantizable tensor). Each file must
// either open or throw qd::GGUFError whose message names the file and a byte offset; anything
// else (another exception, a sanitizer report, a crash) fails. .ci/sanitize.sh runs it under
// AddressSanitizer + UBSan over the fuzz corpus of tests/fixtures/hostile.py.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "quant/quant_types.h"

namespace fs = std::filesystem;
using qd::gguf::File;
using qd::gguf::Value;
using qd::gguf::ValueType;

namespace {

// Reads every byte a value refers to, so an out-of-bounds view shows up under ASan.
uint64_t touch(const Value& v) {
  uint64_t sum = v.u64 + static_cast<uint64_t>(v.f64);
  for (char ch : v.str) sum += static_cast<uint8_t>(ch);
  if (v.type != ValueType::ARRAY) return sum;
  if (v.elem_type == ValueType::STRING) {
    for (std::string_view s : v.strings) {
      for (char ch : s) sum += static_cast<uint8_t>(ch);
    }
  } else if (v.elem_type == ValueType::ARRAY) {
    for (const Value& item : v.items) sum += touch(item);
  } else {
    for (uint64_t i = 0; i < v.count; i++) sum += touch(v.element(i));
  }
  return sum;
}

// Typed getters may refuse a value of the wrong type, but only with GGUFError.
uint64_t touch_getters(const File& f, const std::string& key) {
  uint64_t sum = 0;
  try { sum += static_cast<uint64_t>(f.get_int(key).value_or(0)); } catch (const qd::GGUFError&) {}
  try { sum += static_cast<uint64_t>(f.get_float(key).value_or(0.0)); } catch (const qd::GGUFError&) {}
  try { sum += f.get_bool(key).value_or(false); } catch (const qd::GGUFError&) {}
  try { sum += f.get_string(key).value_or("").size(); } catch (const qd::GGUFError&) {}
  try { sum += f.get_array(key, ValueType::STRING) != nullptr; } catch (const qd::GGUFError&) {}
  return sum;
}

uint64_t touch_tensors(const File& f) {
  uint64_t sum = 0;
  std::vector<float> buf;
  for (const qd::gguf::TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) == nullptr) throw std::runtime_error("tensor '" + t.name + "' not found by name");
    const qd::quant::TypeTraits* tt = qd::quant::type_traits(t.type);
    if (!tt->to_float) continue;
    buf.assign(static_cast<size_t>(t.n_elements()), 0.0f);
    tt->to_float(t.data, buf.data(), t.n_elements());
    for (float x : buf) sum += static_cast<uint64_t>(x == x);
  }
  return sum;
}

// Returns "" when the file behaved (opened, or refused with a located GGUFError), else why not.
std::string replay(const std::string& path, bool* opened, uint64_t* sum) {
  std::unique_ptr<File> f;
  try {
    f = std::make_unique<File>(path);
  } catch (const qd::GGUFError& e) {
    const std::string msg = e.what();
    if (msg.rfind(path + ": ", 0) != 0 || msg.find("(at byte ") == std::string::npos) return "message without file or offset: " + msg;
    return "";
  }
  *opened = true;
  for (const auto& [key, value] : f->metadata()) {
    *sum += touch(value) + touch_getters(*f, key);
    if (f->find(key) != &value) return "metadata key '" + key + "' does not find its own value";
  }
  *sum += touch_tensors(*f);
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> paths;
  for (int i = 1; i < argc; i++) {
    for (const fs::directory_entry& e : fs::directory_iterator(argv[i])) {
      if (e.is_regular_file()) paths.push_back(e.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  size_t n_opened = 0, n_refused = 0, n_bad = 0;
  uint64_t sum = 0;
  for (const std::string& path : paths) {
    bool opened = false;
    std::string problem;
    try {
      problem = replay(path, &opened, &sum);
    } catch (const std::exception& e) {
      problem = std::string("unexpected exception: ") + e.what();
    }
    if (!problem.empty()) {
      n_bad++;
      std::fprintf(stderr, "FAIL %s: %s\n", path.c_str(), problem.c_str());
    } else {
      (opened ? n_opened : n_refused)++;
    }
  }
  std::printf("gguf_fuzz_replay: %zu files, %zu opened, %zu refused, %zu failed (checksum %llu)\n", paths.size(), n_opened,
              n_refused, n_bad, static_cast<unsigned long long>(sum));
  return n_bad == 0 && !paths.empty() ? 0 : 1;
}
