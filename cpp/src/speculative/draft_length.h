// Choosing how many tokens to draft, as arithmetic (DESIGN.md "The draft length as arithmetic").
//
// With per-token acceptance a, draft cost c_d for the first drafted token and c_s for each
// further one (a model drafter's first token also brings its KV cache up to date, two tokens
// in one batch, so c_d > c_s), and verify cost c_v(n) for n rows, a draft of k tokens yields on
// average (1 - a^(k+1)) / (1 - a) tokens per step and costs c_d + (k - 1) * c_s + c_v(k + 1)
// (c_s = c_d until measured). next() picks the k in [0, draft_max] that maximises tokens per
// second from running estimates; k = 0 is plain decoding, so speculation that does not pay switches itself
// off. While at k = 0 it probes now and then with a short draft, because acceptance changes
// with the text: as often as a budget of probe_budget of the time allows (cheap n-gram probes
// often, model probes rarely), and less often after each probe that finds nothing.
//
// Timings on a shared machine drift with its load. A row count measured long ago would then
// look dearer or cheaper than one measured now, so every measurement rescales all cost
// estimates together (the level follows the machine quickly) and moves the measured one alone
// only slowly (the shape c_v(n) / c_v(1), c_d / c_v is learned over many measurements).
#pragma once
#include <vector>

namespace qd::speculative {

struct DraftLengthOptions {
  int draft_max = 8;
  bool adaptive = true;        // false: always draft_max (p_min may still stop a draft early)
  double alpha_prior = 0.6;    // acceptance assumed before any evidence
  double prior_weight = 2.0;   // ... worth this many observed tokens
  double decay = 0.98;         // per drafted token: older evidence fades (acceptance drifts with the text)
  int explore_every = 8;       // steps between tries of a neighbouring draft length
  int probe_every = 4;         // fewest steps at k = 0 between probes
  double probe_budget = 0.05;  // share of the time probes may cost
  int probe_length = 2;
};

class DraftLength {
 public:
  DraftLength(int n_sources, const DraftLengthOptions& opt);

  int next(int source);
  // A draft of n_drafted tokens from `source`: the first token's cost and, when it was measured
  // (>= 0), the cost of each further one. Without it, first_seconds is every token's cost.
  void record_draft(int source, int n_drafted, double first_seconds, double step_seconds = -1.0);
  // A verify pass over n_rows = n_drafted + 1 rows, n_accepted of the drafted tokens kept.
  void record_verify(int source, int n_rows, int n_accepted, double seconds);

  double alpha(int source) const;
  double draft_cost(int source) const { return src_[source].c_d; }
  double step_cost(int source) const { return src_[source].c_s > 0.0 ? src_[source].c_s : src_[source].c_d; }
  double verify_cost(int n_rows) const;  // estimate, seconds; < 0 before any measurement
  // Steps at k = 0 before the next probe of `source`.
  int probe_interval(int source) const;
  // A new generation: the text may be more predictable, probe again soon.
  void new_sequence();
  // Expected tokens per second for a draft of k from `source` (< 0 when unknown).
  double rate(int source, int k) const;

  const DraftLengthOptions& options() const { return opt_; }

 private:
  struct Source {
    double accepted = 0.0, rejected = 0.0;  // decayed counts of kept / refused draft tokens
    double c_d = -1.0;                      // seconds for the first drafted token, < 0 unknown
    double c_s = -1.0;                      // seconds per further drafted token, < 0 unknown
    int n_d = 0, n_s = 0;                   // measurements of c_d, c_s
    int idle_steps = 0;                     // consecutive steps at k = 0
    int failed_probes = 0;                  // probes since drafting last paid
    int steps_since_explore = 0;
    bool explore_up = false;                // the next exploration tries best + 1 (else best - 1)
  };
  void rescale(double factor);
  // One timing of the cost *c (measured *n times): rescales every estimate by seconds /
  // estimate (the machine's level, when estimate > 0), then moves *c toward seconds.
  void learn(double* c, int* n, double seconds, double estimate);
  // The acceptance next() plans with: alpha() plus a bonus that fades as evidence accumulates.
  double alpha_for_choice(int source) const;
  double rate_at(int source, int k, double a) const;
  double fitted_verify_cost(int n_rows) const;

  DraftLengthOptions opt_;
  std::vector<Source> src_;
  std::vector<double> c_v_;                 // [draft_max + 2] verify seconds by rows, < 0 unknown
  std::vector<int> n_v_;                    // [draft_max + 2] measurements of each
};

}  // namespace qd::speculative
