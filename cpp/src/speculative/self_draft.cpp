// Self-speculation: the target's own weights with some layers skipped draft for the full model.
#include <algorithm>

#include "quickdraft/engine.h"

namespace qd {

// About half of the middle layers (every other one), keeping the first and last eighth (at
// least one layer each) whole, where skipping costs the most accuracy.
std::vector<int> default_skip_layers(int n_layer) {
  const int keep = std::max(1, n_layer / 8);
  std::vector<int> skip;
  for (int i = keep + 1; i < n_layer - keep; i += 2) skip.push_back(i);
  return skip;
}

}  // namespace qd
