// Sampler settings shared by the target's verifier and the drafter: both must process logits
// identically, or speculative sampling no longer reproduces the target's distribution.
#pragma once
#include <cstdint>

namespace qd::sampling {

struct SamplerParams {
  float temperature = 0.8f;       // 0: greedy (argmax after penalties); negative is an error
  int top_k = 0;                  // 0: off
  float top_p = 1.0f;             // 1: off
  float min_p = 0.0f;             // 0: off; keep tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;    // 1: off; CTRL rule (divide positive logits, multiply negative)
  float presence_penalty = 0.0f;  // subtracted once from every token seen in the window
  float frequency_penalty = 0.0f; // subtracted per occurrence in the window
  int penalty_last_n = 64;        // window over the history (prompt + generated); -1: all of it
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return penalty_last_n != 0 && (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  // Throws ArgError naming the first bad setting.
  void validate() const;
};

}  // namespace qd::sampling
