// A sparse probability distribution over token ids: the output of logit processing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qd::sampling {

struct Distribution {
  std::vector<int32_t> ids;  // [n] tokens with nonzero probability
  std::vector<float> probs;  // [n] summing to 1

  size_t size() const { return ids.size(); }
  void clear() {
    ids.clear();
    probs.clear();
  }
  void set_one_hot(int32_t id) {
    ids.assign(1, id);
    probs.assign(1, 1.0f);
  }
  // Probability of `id` (0 when outside the support). At once where the support lists the ids
  // in order from 0 (no filter took any out), else linear in the support size.
  float prob(int32_t id) const {
    if (id >= 0 && (size_t)id < ids.size() && ids[id] == id) return probs[id];  // ids are distinct
    for (size_t i = 0; i < ids.size(); i++)
      if (ids[i] == id) return probs[i];
    return 0.0f;
  }
  float max_prob() const {
    float m = 0.0f;
    for (float p : probs) m = p > m ? p : m;
    return m;
  }
};

}  // namespace qd::sampling
