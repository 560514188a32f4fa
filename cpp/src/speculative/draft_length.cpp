#include "speculative/draft_length.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"

namespace qd::speculative {

namespace {
// A new timing moves the level of every cost estimate by kLevel (in log space) and the
// measured entry's share of the shape by kShape: a load change shows up at every row count
// at once, a difference in shape only through many measurements.
constexpr double kLevel = 0.2;
constexpr double kShape = 0.02;
// A timing moves no estimate by more than this factor (a first one: from the line through the
// others): a stall of a few steps (another process, a page fault) must not set a cost's shape.
constexpr double kSpike = 1.5;

// The shape weight of the n-th measurement of an entry, `since` verify passes after its last: a
// running (geometric) mean at first, so that one unlucky early timing does not set the shape for
// long, then kShape per pass since the last timing, up to kStale. An entry timed at every pass
// (the usual draft length) learns at kShape; one timed rarely (c_v(1) while drafting, timed by
// exploration only) as fast per pass, so that its shape follows the machine's (a plain step gets
// cheaper against a verify of several rows when memory gets faster, since a verify is bound by
// the cores) within tens of passes, not hundreds.
constexpr double kStale = 0.3;
double shape_weight(int* count, int64_t since) {
  *count += 1;
  const double stale = std::min(kStale, 1.0 - std::pow(1.0 - kShape, (double)since));
  return std::max({kShape, 1.0 / *count, stale});
}
constexpr double kThinEvidence = 4.0;       // judged draft tokens below which probes come quickly
constexpr double kFitWeight = 2.0;          // measurements at which an entry counts as much as the line
constexpr double kOptimismEvidence = 32.0;  // judged tokens at which the choice's optimism ends
constexpr double kPriorSlope = 0.15; // c_v(n) ~ c_v(1) * (1 + slope * (n - 1)) until measured
// A token evaluated in a batch (a catch-up) costs about this share of a single-token step
// until timed: prompt processing runs 4-5x the decode rate on an AVX2 laptop.
constexpr double kBatchedShare = 0.25;
// Before evidence (worth prior_weight tokens, like the acceptance's prior): an unsure drafted
// token's acceptance, and the share of drafted tokens that are sure once one was not (until
// then every token is sure). The 0.5B drafting for the 1.5B at p_min 0.7 measured 0.75-0.89 sure
// and 0.6-0.8 of its unsure tokens kept on code and chat (bench/draft_cost_model.py --controller).
constexpr double kUnsurePrior = 0.6;
constexpr double kSurePrior = 0.75;
}  // namespace

DraftLength::DraftLength(int n_sources, const DraftLengthOptions& opt) : opt_(opt), src_(n_sources) {
  if (opt.draft_max < 0 || opt.draft_max > 64)
    throw ArgError("draft_max must be in [0, 64], got " + std::to_string(opt.draft_max));
  if (opt.probe_every < 1) throw ArgError("probe_every must be >= 1");
  if (!(opt.probe_budget > 0.0)) throw ArgError("probe_budget must be > 0");
  c_v_.assign(opt.draft_max + 2, Cost());
}

void DraftLength::set_cost_hint(int source, double share, int max_catch_up) {
  if (source < 0 || source >= (int)src_.size()) throw ArgError("set_cost_hint: no source " + std::to_string(source));
  src_[source].hint = std::isfinite(share) ? share : -1.0;
  src_[source].max_catch_up = std::max(0, max_catch_up);
}

double DraftLength::catch_up_cost(int source) const {
  const Source& s = src_[source];
  const double per_token = s.u.c >= 0.0 ? s.u.c : kBatchedShare * std::max(0.0, planned_draft_cost(source));
  return per_token * s.max_catch_up;
}

double DraftLength::planned_draft_cost(int source) const {
  const Source& s = src_[source];
  if (s.d.c >= 0.0) return s.d.c;
  const double c1 = verify_cost(1);
  return s.hint >= 0.0 && c1 > 0.0 ? s.hint * c1 : -1.0;
}

double DraftLength::alpha(int source) const {
  const Source& s = src_[source];
  const double a = (s.accepted + opt_.alpha_prior * opt_.prior_weight) / (s.accepted + s.rejected + opt_.prior_weight);
  return std::clamp(a, 0.0, 0.995);
}

double DraftLength::alpha_all(int source) const {
  const Source& s = src_[source];
  const double kept = s.accepted + s.u_accepted, judged = kept + s.rejected + s.u_rejected;
  return std::clamp((kept + opt_.alpha_prior * opt_.prior_weight) / (judged + opt_.prior_weight), 0.0, 0.995);
}

double DraftLength::alpha_unsure(int source) const {
  const Source& s = src_[source];
  const double a = (s.u_accepted + kUnsurePrior * opt_.prior_weight) / (s.u_accepted + s.u_rejected + opt_.prior_weight);
  return std::clamp(a, 0.0, 0.995);
}

double DraftLength::sure_share(int source) const {
  const Source& s = src_[source];
  if (!s.any_unsure) return 1.0;
  return (s.sure + kSurePrior * opt_.prior_weight) / (s.sure + s.unsure + opt_.prior_weight);
}

double DraftLength::verify_cost(int n) const {
  if (n < 1 || n >= (int)c_v_.size()) return -1.0;
  const double fit = fitted_verify_cost(n);
  const Cost& e = c_v_[n];
  if (e.c <= 0.0) return fit;
  // An entry timed a few times only (perhaps while the machine was busy) leans on the line
  // through all the others until it has its own history.
  const double w = e.n / (e.n + kFitWeight);
  return w * e.c + (1.0 - w) * fit;
}

double DraftLength::fitted_verify_cost(int n) const {
  // Weighted least squares line through the measured entries (weight: times measured, capped),
  // the prior slope when only one row count was measured.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  int distinct = 0, last = 0;
  for (int m = 1; m < (int)c_v_.size(); m++) {
    const double c = c_v_[m].c;
    if (c <= 0.0) continue;
    const double w = std::min(c_v_[m].n, 8);
    sw += w, sx += w * m, sy += w * c, sxx += w * m * m, sxy += w * m * c;
    distinct++, last = m;
  }
  if (distinct == 0) return -1.0;
  if (distinct == 1) return c_v_[last].c / (1.0 + kPriorSlope * (last - 1)) * (1.0 + kPriorSlope * (n - 1));
  const double slope = std::max(0.0, (sw * sxy - sx * sy) / (sw * sxx - sx * sx));
  const double at = (sy - slope * sx) / sw + slope * n;
  return std::max(at, 0.25 * sy / sw);  // a wild line never makes a row count nearly free
}

double DraftLength::alpha_for_choice(int source) const {
  // Optimism in proportion to the uncertainty while the evidence is thin: a first draft that
  // fails (often the first token of an answer) would otherwise hold the length at 1 for
  // tens of steps, each adding one token of evidence; longer drafts judge more tokens a step.
  const Source& s = src_[source];
  const double a = alpha(source), n = s.accepted + s.rejected;
  const double thin = std::max(0.0, 1.0 - n / kOptimismEvidence);
  return std::clamp(a + thin * std::sqrt(a * (1.0 - a) / (n + opt_.prior_weight)), 0.0, 0.995);
}

double DraftLength::rate(int source, int k) const { return rate_at(source, k, alpha(source)); }

double DraftLength::best_rate(int source) const {
  // The acceptance as measured: a source drafting rarely keeps its evidence thin as it fades,
  // and the optimism that shortens a new source's first drafts would keep choosing it.
  const double a = alpha(source);
  double best = rate_at(source, 0, a);
  for (int k = 1; k <= opt_.draft_max && best >= 0.0; k++) best = std::max(best, rate_at(source, k, a));
  return best;
}

int DraftLength::choose(int preferred, int other) {
  const double rp = best_rate(preferred), ro = best_rate(other);
  if (rp < 0.0 || ro < 0.0) return rp < 0.0 ? preferred : other;  // the unknown one, to learn its cost
  const int win = ro > rp ? other : preferred, lose = win == other ? preferred : other;
  Source &w = src_[win], &l = src_[lose];
  w.passed_over = 0;
  if (std::exchange(w.explored, false)) w.explore_misses = 0;  // its try turned the comparison
  if (std::exchange(l.explored, false)) l.explore_misses = std::min(l.explore_misses + 1, kMaxBackoff);
  if (++l.passed_over < (kSourceExplore << l.explore_misses)) return win;
  l.passed_over = 0;
  l.explored = l.trying = true;
  return lose;
}

double DraftLength::rate_at(int source, int k, double a) const { return rate_at(source, k, a, alpha_unsure(source)); }

double DraftLength::rate_at(int source, int k, double a, double a_u) const {
  const double cd = planned_draft_cost(source);
  if (verify_cost(k + 1) <= 0.0 || cd < 0.0) return -1.0;
  if (k == 0) return 1.0 / verify_cost(1);
  const double s = sure_share(source), cs = step_cost(source);
  // Over the draft's lengths j = 1..k: reach = s^(j-1), the chance that it reaches token j, and
  // kept, the chance that tokens 1..j-1 were all sure and kept.
  double tokens = 1.0, cost = 0.0, reach = 1.0, kept = 1.0;
  for (int j = 1; j <= k; j++) {
    tokens += kept * (s * a + (1.0 - s) * a_u);
    const double ends_here = j < k ? reach * (1.0 - s) : reach;
    cost += ends_here * (cd + (j - 1) * cs + verify_cost(j + 1));
    reach *= s;
    kept *= s * a;
  }
  return tokens / cost;
}

int DraftLength::next(int source) {
  const int k = next_length(source);
  // choose()'s try of a source it expects to pay less is a short one: a probe's length (that
  // step only: steps where the source alone could draft are not tries).
  return std::exchange(src_[source].trying, false) ? std::min(k, opt_.probe_length) : k;
}

int DraftLength::next_length(int source) {
  Source& s = src_[source];
  const int kmax = opt_.draft_max;
  if (!opt_.adaptive || kmax == 0) return kmax;
  // Plain steps until one is timed (every choice is against it), then, while the draft cost
  // is neither timed nor hinted, a middling draft so that it gets timed.
  if (c_v_[1].c <= 0.0) return 0;
  if (planned_draft_cost(source) < 0.0) return std::min(kmax, 4);
  const bool due = std::exchange(s.probe_due, false);
  const bool body_probe = s.sequence_steps < kBodyProbeStep && ++s.sequence_steps == kBodyProbeStep;
  const double a = alpha_for_choice(source);
  int best = 0;
  double best_rate = rate_at(source, 0, a);
  for (int k = 1; k <= kmax; k++) {
    const double r = rate_at(source, k, a);
    if (r > best_rate) best = k, best_rate = r;
  }
  // From k = 0 only a probe that was fully accepted restarts drafting: the estimate after a
  // stretch of plain steps is an optimistic one (its evidence has faded), and the first draft
  // after it pays a catch-up that only a probe's budget accounts for.
  if (best > 0 && (!s.idle || s.probe_ok)) {
    s.idle = false;
    s.idle_steps = 0;
    // Now and then a neighbouring length whose expected rate is close: row counts never used
    // keep their first (or prior) cost, and an unlucky one would otherwise never be revisited.
    // That includes a plain step below k = 1: every choice is against c_v(1), which drafting
    // steps never time (only rescale), so one early timing would otherwise hold it for good.
    if (++s.steps_since_explore >= opt_.explore_every) {
      s.steps_since_explore = 0;
      s.explore_up = !s.explore_up;
      const int alt = s.explore_up ? best + 1 : best - 1;
      if (alt >= 0 && alt <= kmax && rate_at(source, alt, a) >= 0.9 * best_rate) return alt;
    }
    return best;
  }
  if (!s.idle) s.probe_ok = false;
  s.idle = true;
  if (std::exchange(s.probe_next, false) || ++s.idle_steps >= probe_interval(source, /*catch_up=*/!due) || body_probe) {
    s.idle_steps = 0;
    s.probing = true;
    s.body_probing = body_probe;
    return std::min(kmax, opt_.probe_length);
  }
  return 0;
}

int DraftLength::probe_interval(int source, bool catch_up) const {
  const Source& s = src_[source];
  const int kp = std::min(opt_.draft_max, opt_.probe_length);
  const double c1 = verify_cost(1), cd = planned_draft_cost(source);
  if (c1 <= 0.0 || cd < 0.0) return opt_.probe_every;
  // Little evidence yet (one unlucky first draft, often the first token of an answer, gives
  // a = 0.4): probe at the fastest rate until a few tokens have been judged, where drafting
  // would pay at the prior acceptance (a drafter too dear for that waits for the budget).
  if (s.judged < kThinEvidence && pays_at(source, opt_.alpha_prior)) return opt_.probe_every;
  // A probe costs its catch-up, its draft and the verify rows beyond the plain step's one.
  const double cost = std::max(
      0.0, (catch_up ? catch_up_cost(source) : 0.0) + cd + (kp - 1) * step_cost(source) + verify_cost(kp + 1) - c1);
  // Refused probes stretch the interval (up to 2^kMaxBackoff), and so does, as far, an acceptance
  // far below the one at which the drafter would pay: by (break-even / acceptance)^2. A new
  // sequence resets the first, not the second, so a drafter that never pays (self-speculation on
  // a small model) does not probe at the full budget's rate at the start of every generation. The
  // evidence fades with every token emitted, and the stretch with it. Where no acceptance would
  // pay at the costs measured, the stretch is 2^kNeverBackoff: a probe can only find costs changed
  // (a plain step's timing moves the level of every estimate, not their shape).
  const double a = alpha_all(source);
  double doubt = 1.0;  // pays at a: break-even <= a, no stretch (and no bisection)
  int most = kMaxBackoff;
  if (!pays_at(source, a)) {
    const double be = break_even(source);
    if (be >= 1.0) {  // no acceptance pays at these costs
      doubt = 1e9;
      most = kNeverBackoff;
    } else {
      doubt = a > 0.0 ? (be / a) * (be / a) : 1e9;
    }
  }
  const double stretch = std::min<double>(1 << most, std::max<double>(1 << s.failed_probes, doubt));
  const double base = std::clamp(cost / (opt_.probe_budget * c1), (double)opt_.probe_every, 4096.0);
  return (int)(base * stretch);
}

double DraftLength::break_even(int source) const {
  if (pays_at(source, 0.0)) return 0.0;
  if (!pays_at(source, 0.999)) return 1.0;
  double lo = 0.0, hi = 0.999;
  for (int i = 0; i < 12; i++) (pays_at(source, 0.5 * (lo + hi)) ? hi : lo) = 0.5 * (lo + hi);
  return hi;
}

bool DraftLength::pays_at(int source, double a) const {
  const double plain = rate_at(source, 0, a, a);
  for (int k = 1; k <= opt_.draft_max; k++)
    if (rate_at(source, k, a, a) > plain) return true;
  return false;
}

void DraftLength::new_sequence() {
  // Idle steps keep counting across sequences: from zero again at each, they would never reach an
  // interval longer than a generation (chat turns of a few hundred tokens). At the new text's first
  // step the drafter has just read the prompt, so a probe there pays no catch-up and is due sooner.
  // The body probe at step kBodyProbeStep is armed unless refused body probes skip this sequence.
  for (Source& s : src_) {
    s.failed_probes = 0;
    s.probe_due = true;
    const bool body = s.body_skip == 0;
    s.body_skip = std::max(0, s.body_skip - 1);
    s.sequence_steps = body ? 0 : kBodyProbeStep;
  }
}

void DraftLength::restart(int source) {
  Source& s = src_[source];
  Source fresh;
  fresh.d = s.d, fresh.s = s.s, fresh.u = s.u;
  fresh.hint = s.hint;
  fresh.max_catch_up = s.max_catch_up;
  fresh.probe_due = s.probe_due;
  fresh.sequence_steps = s.sequence_steps;
  fresh.idle = true;  // from k = 0 only a fully accepted probe starts drafting ...
  fresh.probe_next = true;  // ... and the next step is one
  s = fresh;
}

void DraftLength::rescale(double factor) {
  if (!(factor > 0.0) || !std::isfinite(factor)) return;
  const double g = std::pow(factor, kLevel);
  for (Cost& e : c_v_)
    if (e.c > 0.0) e.c *= g;
  for (Source& s : src_)
    for (Cost* e : {&s.d, &s.s, &s.u})
      if (e->c > 0.0) e->c *= g;
}

void DraftLength::learn(Cost* cost, double seconds, double estimate) {
  if (!(seconds > 0.0)) return;
  if (!cost->seen) {
    cost->seen = true;
    return;
  }
  if (cost->c <= 0.0) {
    cost->c = estimate > 0.0 ? std::clamp(seconds, estimate / kSpike, estimate * kSpike) : seconds;
    cost->n = 1;
    cost->last = steps_;
  } else {
    if (estimate > 0.0) rescale(std::clamp(seconds / estimate, 1.0 / kSpike, kSpike));
    cost->c *= std::pow(std::clamp(seconds / cost->c, 1.0 / kSpike, kSpike), shape_weight(&cost->n, steps_ - cost->last));
    cost->last = steps_;
  }
}

void DraftLength::record_draft(int source, int n_drafted, double first_seconds, double step_seconds) {
  Source& s = src_[source];
  if (n_drafted <= 0) return;
  learn(&s.d, first_seconds, s.d.c);
  if (n_drafted > 1) learn(&s.s, step_seconds, s.s.c);
}

void DraftLength::record_catch_up(int source, double seconds, int n_tokens) {
  // Per token, without level rescaling (a batched token's cost is its own shape).
  if (n_tokens > 0) learn(&src_[source].u, seconds / n_tokens, -1.0);
}

void DraftLength::record_forward(int n_rows, double seconds) {
  if (n_rows < 1 || n_rows >= (int)c_v_.size()) return;
  c_v_[n_rows].seen = true;  // the warm-up ran an untimed forward first: no first touch to drop
  learn(&c_v_[n_rows], seconds, verify_cost(n_rows));
}

void DraftLength::record_verify(int source, int n_rows, int n_accepted, double seconds, int n_sure) {
  if (n_rows < 1) return;
  steps_++;
  // The level follows entries with a history of their own: an entry's first gap to the line
  // through the others is its shape, not the machine's load.
  if (n_rows < (int)c_v_.size()) learn(&c_v_[n_rows], seconds, verify_cost(n_rows));
  // The text moves on by the kept tokens and the target's own one, drafted or not.
  const double fade = std::pow(opt_.decay, n_accepted + 1);
  for (Source& t : src_) {
    t.accepted *= fade, t.rejected *= fade, t.u_accepted *= fade, t.u_rejected *= fade;
    t.sure *= fade, t.unsure *= fade;
  }
  Source& s = src_[source];
  const bool probe = s.probing, body = s.body_probing;
  s.probing = s.body_probing = false;
  const int n_drafted = n_rows - 1;
  if (n_drafted <= 0) return;
  const int sure = n_sure < 0 ? n_drafted : std::clamp(n_sure, 0, n_drafted);
  const bool refused = n_accepted < n_drafted;
  s.sure += sure;
  s.unsure += n_drafted - sure;
  s.any_unsure = s.any_unsure || sure < n_drafted;
  s.accepted += std::min(n_accepted, sure);
  s.u_accepted += n_accepted - std::min(n_accepted, sure);
  if (refused) (n_accepted < sure ? s.rejected : s.u_rejected) += 1.0;
  s.judged += n_accepted + (refused ? 1.0 : 0.0);
  if (!refused) s.failed_probes = 0;
  else if (probe) s.failed_probes = std::min(s.failed_probes + 1, kMaxBackoff);
  if (probe) s.probe_ok = !refused;
  if (body) {
    s.body_misses = refused ? std::min(s.body_misses + 1, kMaxBodyBackoff) : 0;
    s.body_skip = (1 << s.body_misses) - 1;
  }
}

}  // namespace qd::speculative
