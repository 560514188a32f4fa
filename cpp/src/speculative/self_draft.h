// Self-speculation: the target's own weights with some layers skipped draft for the full model.
#pragma once
#include <vector>

namespace qd::speculative {

// The default skip set: about half of the middle layers (every other one), keeping the first
// and last eighth (at least one layer each) whole, where skipping costs the most accuracy.
std::vector<int> default_skip_layers(int n_layer);

}  // namespace qd::speculative
