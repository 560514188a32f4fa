// Choosing how many tokens to draft, as arithmetic (DESIGN.md "The draft length as arithmetic").
//
// With per-token acceptance a, draft cost c_d for the first drafted token and c_s for each
// further one (a model drafter's first token also brings its KV cache up to date, two tokens
// in one batch), and verify cost c_v(n) for n rows, a draft of k tokens yields on average
// (1 - a^(k+1)) / (1 - a) tokens per step and costs c_d + (k - 1) * c_s + c_v(k + 1)
// (c_s = c_d until measured). next() picks the k in [0, draft_max] that maximises tokens per
// second from running estimates; k = 0 is plain decoding, so speculation that does not pay
// switches itself off.
//
// A model drafter ends its draft at its first unsure token (top probability below p_min): a draft
// of at most k tokens is then shorter where the draft model is unsure, and its unsure last token is
// kept less often than the sure ones. So each drafted token is counted as sure or unsure (the
// drafter says how many of a draft's tokens were sure), with a share s of sure tokens and an
// acceptance of each, a for sure tokens and a_u for unsure ones. A draft of at most k tokens then
// has j < k tokens with probability s^(j-1) (1 - s) (its j-th unsure), k with s^(k-1), and its i-th
// token is kept (all before it being sure and kept) with (s a)^(i-1) (s a + (1 - s) a_u): tokens and
// cost are summed over those lengths. Where every token is sure (p_min 0, drafters without a
// confidence), s = 1 and this is the formula above.
//
// While at k = 0 it probes now and then with a short draft, because acceptance changes with
// the text: as often as a budget of probe_budget of the time allows, counting what a probe
// really costs (a model drafter idle for a while first catches up on the text it missed).
// A refused probe doubles the interval, up to kMaxBackoff doublings, and an acceptance far below
// the one at which the drafter would pay stretches it as far, across generations too; costs at
// which no acceptance would pay (self-drafting where a verify of a few rows is bound by the
// cores) stretch it to kNeverBackoff doublings, until the costs change. A fully
// accepted draft ends the backoff; a new sequence's first step probes at the interval of a probe
// without a catch-up (the drafter has just read the prompt), and a source still idle after
// kBodyProbeStep steps of a sequence probes once more then, whatever its interval: an answer's
// opening tokens (a function's name and parameters, a reply's first words) are the least
// predictable part of it, and evidence from there alone understates what follows. Refused body
// probes skip sequences (1, 3, then 7 before the next), so a drafter that never pays spends
// little on them even in short generations. Only a fully accepted probe restarts drafting from
// k = 0. A source whose text is new (a call's own prediction) restarts: its evidence and backoff
// go, and its next step probes. Acceptance evidence fades with every emitted token, drafted or
// not, so after an idle stretch a probe's evidence outweighs the old, and drafting resumes as
// soon as the (optimistic, while evidence is thin) estimate says it pays.
//
// An engine's warm-up at load times the target's forward of a few rows and the drafter's step
// (record_forward, record_draft), so that a fresh engine's first generation starts from this
// machine's costs. Without it (before anything is timed): plain steps until a plain step's cost
// is known (its first timing is dropped too), since every choice weighs drafts against it and a
// plain step never costs more than plain decoding. A drafter's cost hint (a draft model's weight
// bytes over the target's) stands in for its draft cost until that is timed, so a drafter too
// dear to pay at the prior acceptance starts idle, probing at the budget's pace, instead of
// drafting to find out.
//
// The first timing of every cost is dropped (but record_forward's, which follow an untimed
// forward): it pays first touches (page faults of freshly mapped weights, scratch buffers
// growing), not the steady cost. Timings on a shared machine
// drift with its load, so every measurement rescales all cost estimates together (the level
// follows the machine quickly) and moves the measured one alone only slowly (the shape
// c_v(n) / c_v(1), c_d / c_v is learned over many measurements): by a share per verify pass since
// that cost was last timed, so that one timed rarely (a plain step while drafting) follows a
// change of shape in a few timings. The shape does change with the machine: a verify of several
// rows is bound by the cores, a plain step and a draft step by memory. No timing moves an
// estimate by more than a factor kSpike, so a stall of a few steps cannot set a shape (the cost of
// a length then looks too dear for the length ever to be tried, and timed, again).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace qd::speculative {

struct DraftLengthOptions {
  int draft_max = 8;
  bool adaptive = true;        // false: always draft_max (p_min may still stop a draft early)
  double alpha_prior = 0.6;    // acceptance assumed before any evidence
  double prior_weight = 2.0;   // ... worth this many observed tokens
  double decay = 0.98;         // per emitted token: older evidence fades (acceptance drifts with the text)
  int explore_every = 8;       // steps between tries of a neighbouring draft length
  int probe_every = 4;         // fewest steps at k = 0 between probes
  double probe_budget = 0.05;  // share of the time probes may cost
  int probe_length = 2;
};

class DraftLength {
 public:
  static constexpr int kMaxBackoff = 2;  // refused probes stretch the interval at most 2^this
  static constexpr int kNeverBackoff = 4;  // ... and costs at which no acceptance pays, 2^this
  static constexpr int kBodyProbeStep = 16;  // a sequence's step at which an idle source probes again
  static constexpr int kMaxBodyBackoff = 3;  // refused body probes skip at most 2^this - 1 sequences

  DraftLength(int n_sources, const DraftLengthOptions& opt);

  int next(int source);
  // A draft of n_drafted tokens from `source`: the first token's cost and, when it was measured
  // (>= 0), the cost of each further one. Without it, first_seconds is every token's cost.
  void record_draft(int source, int n_drafted, double first_seconds, double step_seconds = -1.0);
  // Seconds a drafter spent catching up on n_tokens tokens before a draft (after plain steps),
  // left out of record_draft's costs: every probe from k = 0 pays it.
  void record_catch_up(int source, double seconds, int n_tokens);
  // A verify pass over n_rows = n_drafted + 1 rows, n_accepted of the drafted tokens kept; the
  // first n_sure drafted tokens were sure and the others (at most the last) unsure, -1: all sure.
  void record_verify(int source, int n_rows, int n_accepted, double seconds, int n_sure = -1);
  // A forward of the target over n_rows rows timed outside generation, after an untimed one (the
  // engine's warm-up at load): learned as the cost of a verify of n_rows, first timing included,
  // with no evidence on acceptance.
  void record_forward(int n_rows, double seconds);

  // A draft token's expected cost as a share of a plain step, used until the draft is timed
  // (< 0, the default: unknown; the first drafts are then middling ones, to time it), and the
  // most tokens a probe after plain steps catches up on (0: the drafter has no cache).
  void set_cost_hint(int source, double share, int max_catch_up = 0);

  // Acceptance of sure drafted tokens (all of them where none was unsure), of unsure ones, and the
  // share of drafted tokens that are sure.
  double alpha(int source) const;
  double alpha_unsure(int source) const;
  double sure_share(int source) const;
  double alpha_all(int source) const;  // of every drafted token, sure or not
  double draft_cost(int source) const { return src_[source].d.c; }
  double step_cost(int source) const { return src_[source].s.c > 0.0 ? src_[source].s.c : planned_draft_cost(source); }
  // Seconds a probe's catch-up costs: its tokens at the timed per-token cost, or at a batched
  // token's usual share of a draft step until that is timed.
  double catch_up_cost(int source) const;
  double verify_cost(int n_rows) const;  // estimate, seconds; < 0 before any measurement
  // Steps at k = 0 before the next probe of `source`, for a probe that pays a catch-up or not.
  int probe_interval(int source, bool catch_up = true) const;
  // A new generation: the text may be more predictable, so the backoff is reset, and at its first
  // step an idle source probes once a probe without catch-up is due (the drafter has just read
  // the prompt), and at step kBodyProbeStep once more unless refused body probes skip this
  // generation; idle steps count on across generations.
  void new_sequence();
  // The source's text is new (a call's own prediction, unrelated to the last call's): what was
  // learned of its acceptance no longer holds. Its evidence, backoff and idle state start afresh
  // (its costs stay), and its next step probes, so that one fully accepted probe lets it draft at
  // once, as after any stretch of plain steps.
  void restart(int source);
  // Expected tokens per second for a draft of k from `source` (< 0 when unknown).
  double rate(int source, int k) const;
  // The expected tokens per second of the best length for `source` at its measured acceptance
  // (plain steps included: never below their rate), < 0 while unknown.
  double best_rate(int source) const;
  // Of two sources that could both draft the next step (`preferred` the drafter's own pick),
  // the one with the higher best_rate; while one is unknown, that one (`preferred` while both
  // are), so that its costs get measured. The loser is still tried once in kSourceExplore such
  // calls: unused, its evidence only fades toward the prior, and a text turning predictable for
  // it (a file being copied) would otherwise go unnoticed. A try drafts at most a probe's
  // length. A source that still loses after its try has that interval doubled, up to
  // 2^kMaxBackoff; one that wins after it, reset.
  int choose(int preferred, int other);
  static constexpr int kSourceExplore = 8;

  const DraftLengthOptions& options() const { return opt_; }

 private:
  struct Cost {
    double c = -1.0;     // seconds, < 0 unknown
    int n = 0;           // timings learned
    bool seen = false;   // the first timing came (and was dropped)
    int64_t last = 0;    // steps_ at its last timing
  };
  struct Source {
    double accepted = 0.0, rejected = 0.0;  // decayed counts of kept / refused sure draft tokens
    double u_accepted = 0.0, u_rejected = 0.0;  // ... and of unsure ones
    double sure = 0.0, unsure = 0.0;        // decayed counts of drafted tokens, sure or not
    bool any_unsure = false;                // a drafted token was ever unsure
    double judged = 0.0;                    // kept and refused tokens, never decayed: evidence ever seen
    Cost d, s, u;                           // first drafted token, each further one, a caught-up token
    double hint = -1.0;                     // c_d / c_v(1) before c_d is timed, < 0 unknown
    int max_catch_up = 0;                   // tokens a probe catches up on at most
    int idle_steps = 0;                     // consecutive steps at k = 0
    int failed_probes = 0;                  // refused probes since a draft was last fully accepted
    bool idle = false;                      // the arithmetic last chose k = 0
    bool probing = false;                   // the last next() returned a probe
    bool probe_ok = false;                  // the last probe since going idle was fully accepted
    bool probe_due = false;                 // a new sequence began: its first step's probe has no catch-up
    bool probe_next = false;                // restart(): the next step probes
    int sequence_steps = kBodyProbeStep;    // next() calls since the sequence began (none began yet: past the body probe)
    bool body_probing = false;              // the last next() returned a body probe
    int body_misses = 0;                    // body probes refused since one was fully accepted
    int body_skip = 0;                      // sequences left without a body probe
    int steps_since_explore = 0;
    int passed_over = 0;                    // choose() calls this source lost since it last won
    int explore_misses = 0;                 // choose()'s tries of it after which it still lost, in a row
    bool explored = false;                  // choose() last picked it as the loser, and has not chosen since
    bool trying = false;                    // ... and its next() is that try, at a probe's length
    bool explore_up = false;                // the next exploration tries best + 1 (else best - 1)
  };
  int next_length(int source);  // next() but for choose()'s tries
  void rescale(double factor);
  // One timing of *cost, `estimate` what it was expected to cost (< 0 unknown). The first timing
  // is dropped. A cost not yet timed is set to seconds, within kSpike of the estimate (its first
  // gap to the line through the others is its shape, not the machine's load); a timed one
  // rescales every estimate by seconds / estimate (the machine's level), then moves toward
  // seconds; each factor within kSpike.
  void learn(Cost* cost, double seconds, double estimate);
  // The acceptance next() plans with: alpha() plus a bonus that fades as evidence accumulates.
  double alpha_for_choice(int source) const;
  // Tokens per second of drafts of at most k from `source` with sure tokens kept at a (the
  // measured share of sure tokens and acceptance of unsure ones).
  double rate_at(int source, int k, double a) const;
  double rate_at(int source, int k, double a, double a_u) const;  // ... and unsure ones at a_u
  // Whether some k > 0 beats plain steps with every drafted token, sure or not, kept at a.
  bool pays_at(int source, double a) const;
  // The lowest such acceptance at which drafting from `source` pays (within 1e-3; 1 when none
  // does), which probe_interval weighs against alpha_all.
  double break_even(int source) const;
  // c_d as timed, else from the hint (< 0 when neither is known).
  double planned_draft_cost(int source) const;
  double fitted_verify_cost(int n_rows) const;

  DraftLengthOptions opt_;
  std::vector<Source> src_;
  std::vector<Cost> c_v_;  // [draft_max + 2] verify seconds by rows
  int64_t steps_ = 0;      // verify passes recorded
};

}  // namespace qd::speculative
