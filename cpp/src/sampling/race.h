// A sample fixed by (seed, position): the exponential race.
//
// Every token id at a position gets its own uniform U(seed, position, id) from a hash, and the
// sample is the id whose key log(U) / p(id) is largest (the smallest of independent exponential
// arrival times -log(U) / p(id)), which is a sample of p exactly. The same (seed, position) gives
// the same U to every id whatever the distribution, so two distributions raced at one position
// mostly pick the same token (the Gumbel-max coupling): a draft token drawn this way from the
// draft's q is the target's own draw from p at that position as often as speculative sampling's
// min(1, p / q) test keeps one, within a few per cent, and the target's token at each position
// does not depend on what was drafted, or how much. Seeded generation draws every token this way,
// so its text is the target's alone, whatever drafts it.
#pragma once
#include <cstdint>

#include "sampling/distribution.h"

namespace qd::sampling {

// The race's winner among p's tokens (p non-empty; only its tokens with p > 0 take part).
int32_t sample_race(const Distribution& p, uint64_t seed, uint64_t position);

}  // namespace qd::sampling
