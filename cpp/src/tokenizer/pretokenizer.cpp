#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode.h"

namespace qd::tok {

namespace {

using unicode::kLetter;
using unicode::kNumber;
using unicode::kWhitespace;

// Flags of cp[pos] with a "present" bit, so that past-the-end reads as 0 and every real
// code point (even an unassigned one) as non-zero: the regexes' [^...] classes match any
// character but never the end of the text.
constexpr uint16_t kPresent = 0x100;

struct Span {
  const uint32_t* cp;
  size_t begin, end;
  uint16_t flags(size_t pos) const { return pos < end ? (kPresent | unicode::flags(cp[pos])) : 0; }
  uint32_t at(size_t pos) const { return pos < end ? cp[pos] : 0xFFFFFFFFu; }
};

inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length of a contraction 's 't 're 've 'm 'll 'd at pos (0 if none).
size_t contraction(const Span& s, size_t pos, bool case_insensitive) {
  if (s.at(pos) != '\'' || pos + 1 >= s.end) return 0;
  auto low = [&](size_t p) { return case_insensitive ? ascii_lower(s.at(p)) : s.at(p); };
  const uint32_t c1 = low(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 < s.end) {
    const uint32_t c2 = low(pos + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  }
  return 0;
}

// Emits [prev, end) as a word when non-empty.
struct Emitter {
  std::vector<uint32_t>* out;
  size_t prev;
  void to(size_t end) {
    if (end > prev) out->push_back(static_cast<uint32_t>(end - prev));
    prev = end;
  }
};

void split_gpt2(const Span& s, std::vector<uint32_t>* out) {
  Emitter em{out, s.begin};
  size_t pos = s.begin;
  while (pos < s.end) {
    const uint32_t c = s.at(pos);
    if (size_t k = contraction(s, pos, false)) {
      pos += k;
      em.to(pos);
      continue;
    }
    const uint16_t f2 = c == ' ' ? s.flags(pos + 1) : s.flags(pos);
    const size_t skip = c == ' ' ? 1 : 0;
    if (f2 & kLetter) {  // ' ?\p{L}+'
      pos += skip;
      while (s.flags(pos) & kLetter) ++pos;
      em.to(pos);
      continue;
    }
    if (f2 & kNumber) {  // ' ?\p{N}+'
      pos += skip;
      while (s.flags(pos) & kNumber) ++pos;
      em.to(pos);
      continue;
    }
    auto other = [](uint16_t f) { return f != 0 && !(f & (kWhitespace | kLetter | kNumber)); };
    if (other(f2)) {  // ' ?[^\s\p{L}\p{N}]+'
      pos += skip;
      while (other(s.flags(pos))) ++pos;
      em.to(pos);
      continue;
    }
    size_t n_ws = 0;
    while (s.flags(pos + n_ws) & kWhitespace) ++n_ws;
    if (n_ws > 1 && pos + n_ws < s.end) {  // '\s+(?!\S)': leave the last one to the next word
      pos += n_ws - 1;
      em.to(pos);
      continue;
    }
    pos += n_ws > 0 ? n_ws : 1;  // '\s+', or a character nothing matched
    em.to(pos);
  }
}

// Qwen2 (max_digits 1) and Llama-3 (max_digits 3).
void split_llama3(const Span& s, size_t max_digits, std::vector<uint32_t>* out) {
  Emitter em{out, s.begin};
  size_t pos = s.begin;
  while (pos < s.end) {
    const uint32_t c = s.at(pos);
    const uint16_t f = s.flags(pos);
    if (size_t k = contraction(s, pos, true)) {
      pos += k;
      em.to(pos);
      continue;
    }
    // '[^\r\n\p{L}\p{N}]?\p{L}+'
    if (!(c == '\r' || c == '\n' || (f & kNumber)) && ((f & kLetter) || (s.flags(pos + 1) & kLetter))) {
      ++pos;
      while (s.flags(pos) & kLetter) ++pos;
      em.to(pos);
      continue;
    }
    if (f & kNumber) {  // '\p{N}{1,max_digits}'
      size_t run = 0;
      while ((s.flags(pos) & kNumber) && run < max_digits) ++pos, ++run;
      em.to(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (llama.cpp tests the current character for presence)
    const uint16_t f2 = c == ' ' ? s.flags(pos + 1) : f;
    auto other = [](uint16_t g) { return g != 0 && !(g & (kWhitespace | kLetter | kNumber)); };
    if (!(f2 & (kWhitespace | kLetter | kNumber)) && f != 0) {
      pos += c == ' ' ? 1 : 0;
      while (other(s.flags(pos))) ++pos;
      while (s.at(pos) == '\r' || s.at(pos) == '\n') ++pos;
      em.to(pos);
      continue;
    }
    size_t n_ws = 0, last_newline_end = 0;
    while (s.flags(pos + n_ws) & kWhitespace) {
      const uint32_t w = s.at(pos + n_ws);
      if (w == '\r' || w == '\n') last_newline_end = pos + n_ws + 1;
      ++n_ws;
    }
    if (last_newline_end > 0) {  // '\s*[\r\n]+'
      pos = last_newline_end;
    } else if (n_ws > 1 && pos + n_ws < s.end) {  // '\s+(?!\S)'
      pos += n_ws - 1;
    } else {  // '\s+', or a character nothing matched
      pos += n_ws > 0 ? n_ws : 1;
    }
    em.to(pos);
  }
}

// A regex made of one repeated class, as std::regex_iterator splits with it: each match is a
// word and so is each stretch of text between matches. min == max == 3 gives [0-9]{3}.
template <typename Pred>
void split_runs(const Span& s, Pred pred, size_t min_len, size_t max_len, std::vector<uint32_t>* out) {
  Emitter em{out, s.begin};
  size_t pos = s.begin;
  while (pos < s.end) {
    size_t run = 0;
    while (pos + run < s.end && run < max_len && pred(s.cp[pos + run])) ++run;
    if (run >= min_len) {
      em.to(pos);  // the unmatched stretch before the match
      pos += run;
      em.to(pos);
    } else {
      ++pos;
    }
  }
  em.to(s.end);
}

bool is_number_cp(uint32_t c) { return unicode::flags(c) & kNumber; }
bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }
// [\p{P}\$\+<=>\^~\|]
bool is_punct_or_math(uint32_t c) {
  return (unicode::flags(c) & unicode::kPunctuation) || c == '$' || c == '+' || c == '<' || c == '=' ||
         c == '>' || c == '^' || c == '~' || c == '|';
}

enum class Stage { Gpt2, Qwen2, Llama3, EachNumber, NumberRuns, PunctRuns, DigitTriples };

void run_stage(Stage st, const Span& s, std::vector<uint32_t>* out) {
  constexpr size_t kAny = static_cast<size_t>(-1);
  switch (st) {
    case Stage::Gpt2: return split_gpt2(s, out);
    case Stage::Qwen2: return split_llama3(s, 1, out);
    case Stage::Llama3: return split_llama3(s, 3, out);
    case Stage::EachNumber: return split_runs(s, is_number_cp, 1, 1, out);
    case Stage::NumberRuns: return split_runs(s, is_number_cp, 1, kAny, out);
    case Stage::PunctRuns: return split_runs(s, is_punct_or_math, 1, kAny, out);
    case Stage::DigitTriples: return split_runs(s, is_ascii_digit, 3, 3, out);
  }
}

std::vector<Stage> stages_of(PreType t) {
  switch (t) {
    case PreType::Gpt2: return {Stage::Gpt2};
    case PreType::Smollm: return {Stage::EachNumber, Stage::Gpt2};
    case PreType::Qwen2: return {Stage::Qwen2};
    case PreType::Llama3: return {Stage::Llama3};
    case PreType::Default: break;
  }
  return {Stage::PunctRuns, Stage::Gpt2, Stage::NumberRuns, Stage::DigitTriples};
}

}  // namespace

PreInfo pre_info_from_name(const std::string& name) {
  PreInfo info;
  auto any = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (name == n) return true;
    return false;
  };
  if (name.empty() || name == "default") {
    info.type = PreType::Default;
  } else if (any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    info.type = PreType::Llama3;
    info.ignore_merges = true;
    info.add_bos = true;
  } else if (any({"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"})) {
    info.type = PreType::Qwen2;
  } else if (any({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    info.type = PreType::Smollm;
  } else if (any({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                  "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "trillion"})) {
    info.type = PreType::Gpt2;
  } else {
    info.known = false;
  }
  return info;
}

void pretokenize(PreType type, const uint32_t* cp, size_t n, std::vector<uint32_t>* lengths) {
  const std::vector<Stage> stages = stages_of(type);
  // Each stage re-splits every word of the previous one (llama.cpp's regex sequence).
  std::vector<uint32_t> cur{static_cast<uint32_t>(n)}, next;
  if (n == 0) return;
  for (size_t i = 0; i < stages.size(); ++i) {
    std::vector<uint32_t>* out = i + 1 == stages.size() ? lengths : &next;
    size_t start = 0;
    for (uint32_t len : cur) {
      run_stage(stages[i], Span{cp, start, start + len}, out);
      start += len;
    }
    if (out == &next) {
      cur.swap(next);
      next.clear();
    }
  }
}

}  // namespace qd::tok
