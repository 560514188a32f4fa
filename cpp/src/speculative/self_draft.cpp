#include "speculative/self_draft.h"

#include <algorithm>

namespace qd::speculative {

std::vector<int> default_skip_layers(int n_layer) {
  const int keep = std::max(1, n_layer / 8);
  std::vector<int> skip;
  for (int i = keep + 1; i < n_layer - keep; i += 2) skip.push_back(i);
  return skip;
}

}  // namespace qd::speculative
