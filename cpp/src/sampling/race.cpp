#include "sampling/race.h"

#include <cmath>

#include "common/error.h"

namespace qd::sampling {

namespace {
// splitmix64's finalizer: a bijection of 64-bit words whose outputs pass as independent uniforms.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// U(seed, position, id) in (0, 1], from its position's key.
double uniform(uint64_t key, int32_t id) {
  return (double)((mix(key + 0x9e3779b97f4a7c15ULL * ((uint64_t)(uint32_t)id + 1)) >> 11) + 1) * 0x1.0p-53;
}
}  // namespace

int32_t sample_race(const Distribution& p, uint64_t seed, uint64_t position) {
  if (p.size() == 0) throw Error("sample_race: empty distribution");
  const uint64_t key = mix(seed ^ mix(position + 0x632be59bd9b4e019ULL));
  // The most probable token first: its key bounds the others', so that few need a logarithm.
  size_t top = 0;
  for (size_t i = 1; i < p.size(); i++)
    if (p.probs[i] > p.probs[top]) top = i;
  int32_t winner = p.ids[top];
  double best = std::log(uniform(key, winner)) / p.probs[top];
  for (size_t i = 0; i < p.size(); i++) {
    const double pi = p.probs[i];
    if (!(pi > 0.0) || i == top) continue;
    const double u = uniform(key, p.ids[i]);
    // key_i > best needs u > exp(pi * best) >= 1 + pi * best: at or below that bound (less a
    // margin for the rounding of 1 + pi * best) it cannot win, and needs no logarithm.
    if (u <= 1.0 + pi * best - 0x1.0p-50) continue;
    const double k = std::log(u) / pi;
    if (k > best || (k == best && p.ids[i] < winner)) best = k, winner = p.ids[i];
  }
  return winner;
}

}  // namespace qd::sampling
