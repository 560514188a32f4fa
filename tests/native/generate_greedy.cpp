// generate_greedy MODEL.gguf [PROMPT] [N]: the C++ API end to end. Generates N tokens (default
// 48) greedily from PROMPT, once by plain decoding and once with each cheap drafter (n-gram
// lookup, self-speculation), prints the text and the stats, and fails unless every run
// produced the same tokens: greedy speculative output is the target's own greedy output.
// .ci/run runs it on SmolLM2-135M.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "quickdraft/engine.h"

namespace {

std::vector<int32_t> generate(const std::string& path, qd::DrafterKind kind, const std::string& prompt, int n) {
  qd::EngineOptions opt;
  opt.drafter = kind;
  opt.n_ctx = 512;
  qd::Engine engine(path, opt);

  qd::GenerateOptions gen;
  gen.max_tokens = n;
  gen.sampling.temperature = 0;  // greedy
  std::printf("[%s] %s", engine.drafter(), prompt.c_str());
  engine.generate(engine.tokenize(prompt), gen, [](const qd::Chunk& c) {
    std::fputs(c.text.c_str(), stdout);
    return true;
  });
  const qd::Stats& s = engine.stats();
  std::printf("\n[%s] %d tokens, %.1f tok/s, drafted %d, accepted %d, finish: %s\n\n", s.drafter.c_str(),
              s.generated_tokens, s.tokens_per_second(), s.drafted, s.accepted,
              qd::finish_reason_name(engine.finish_reason()));
  return engine.generated();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::string prompt = argc > 2 ? argv[2] : "The three primary colours are red, blue and";
  const int n = argc > 3 ? std::stoi(argv[3]) : 48;
  try {
    const std::vector<int32_t> plain = generate(path, qd::DrafterKind::none, prompt, n);
    int failed = 0;
    for (qd::DrafterKind kind : {qd::DrafterKind::ngram, qd::DrafterKind::self}) {
      if (generate(path, kind, prompt, n) != plain) {
        std::fprintf(stderr, "FAIL: greedy with drafter %s differs from plain greedy\n", qd::drafter_kind_name(kind));
        failed++;
      }
    }
    if (failed) return 1;
    std::printf("greedy speculative output == plain greedy output (%zu tokens)\n", plain.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
