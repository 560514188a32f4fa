// Rope angles of a context: the frequencies of its rotated pairs and the cos / sin table of a
// micro-batch's positions, shared by a Context and the MTP head (model/mtp_head.cpp).
#pragma once
#include <algorithm>
#include <cmath>

#include "model/model.h"

namespace qd::model {

// Rope angles as ggml computes them (ggml_rope_cache_init, rope_yarn), in float: theta starts at
// the position and is multiplied by base^(-2/n_rot) from one pair to the next; the angle of pair
// i is freq_scale * theta / factor[i], blended for YaRN (ext_factor 1) with the unscaled angle by
// a ramp over the pairs between the correction dims, and cos / sin are multiplied by mscale.
// Matching its float rounding keeps q and k closer to llama.cpp's than exact angles would.
struct RopeFreqs {
  float base = 10000.0f, scale = 1.0f;
  const float* factors = nullptr;
  float ext_factor = 0.0f, mscale = 1.0f;
  float corr[2] = {0.0f, 0.0f};  // ggml_rope_yarn_corr_dims: pairs below corr[0] keep their angle

  RopeFreqs() = default;
  RopeFreqs(float b, float s, const float* f, const Hparams& hp)
      : base(b), scale(s), factors(f), ext_factor(hp.rope_ext_factor), mscale(hp.rope_attn_factor) {
    // The pair index at which a rotation completes `beta` turns over the original context.
    auto corr_dim = [&](float beta) {
      return (float)hp.n_rot * logf((float)hp.rope_n_ctx_orig / (beta * 2.0f * (float)M_PI)) / (2.0f * logf(b));
    };
    corr[0] = std::max(0.0f, floorf(corr_dim(32.0f)));                  // beta_fast
    corr[1] = std::min((float)(hp.n_rot - 1), ceilf(corr_dim(1.0f)));   // beta_slow
    if (ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / s);
  }

  // cos and sin of the angle theta (before scaling) of pair j.
  void angle(float theta, int j, float* c, float* s) const {
    const float extrap = theta / (factors ? factors[j] : 1.0f);
    const float interp = scale * extrap;
    float a = interp;
    if (ext_factor != 0.0f) {
      const float y = ((float)j - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
      a = interp * (1.0f - mix) + extrap * mix;
    }
    *c = cosf(a) * mscale;
    *s = sinf(a) * mscale;
  }
};

// cos / sin [n][n_rot / 2] of positions pos0..pos0+n-1. Pairs hp.rope_pair_static marks keep
// angle 0 (the 4th M-RoPE section, whose position is 0 for text).
inline void rope_rows(const RopeFreqs& f, const Hparams& hp, int pos0, int n, float* c, float* s) {
  const int R = hp.n_rot / 2;
  const float theta_scale = std::pow(f.base, -2.0f / (float)hp.n_rot);
  const bool sections = !hp.rope_pair_static.empty();
  for (int i = 0; i < n; i++) {
    float theta = (float)(pos0 + i);
    for (int j = 0; j < R; j++) {
      const float t = sections && hp.rope_pair_static[(size_t)j] ? 0.0f : theta;
      f.angle(t, j, &c[(size_t)i * R + j], &s[(size_t)i * R + j]);
      theta *= theta_scale;
    }
  }
}

}  // namespace qd::model
