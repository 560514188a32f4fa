"""Prometheus text exposition of the server's counters (GET /metrics), without a client library.

Counters per request endpoint and status; tokens in and out; drafted and accepted tokens per
draft source ("draft", "ngram", "prediction"...); acceptance by draft position (a token at
position i of a draft is judged only if the i - 1 before it were accepted, so position i counts
the rounds whose draft had at least i tokens, and whose accepted prefix had at least i); the
prediction's accepted and rejected tokens; cancellations; the queue.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Callable

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def _labels(**kw) -> str:
    if not kw:
        return ""
    inner = ",".join(f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                     for k, v in kw.items())
    return "{" + inner + "}"


class Metrics:
    """Thread-safe counters, written by the worker and the handlers, read by /metrics."""

    def __init__(self, gauges: Callable[[], dict] = lambda: {}):
        self._lock = threading.Lock()
        self._gauges = gauges
        self.requests = defaultdict(int)          # (endpoint, status) -> count
        self.tokens = defaultdict(int)            # "prompt", "prompt_cached", "draft_prompt", "completion"
        self.generations = defaultdict(int)       # (drafter, finish_reason) -> count
        self.drafted = defaultdict(int)           # source -> tokens
        self.accepted = defaultdict(int)
        self.position_drafted = defaultdict(int)  # draft position (1-based) -> tokens judged there
        self.position_accepted = defaultdict(int)
        self.prediction = defaultdict(int)        # "accepted", "rejected"
        self.cancelled = 0                        # generations stopped because their client left
        self.latency_buckets = [0] * len(LATENCY_BUCKETS)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.time_generate = 0.0

    def request(self, endpoint: str, status: int) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1

    def cancel(self) -> None:
        with self._lock:
            self.cancelled += 1

    def generation(self, completion, seconds: float) -> None:
        """One finished (or cancelled) generation's stats; seconds: from queued to done."""
        s = completion.stats
        with self._lock:
            self.generations[(s.drafter, completion.finish_reason)] += 1
            self.tokens["prompt"] += s.prompt_tokens
            self.tokens["prompt_cached"] += s.prompt_tokens_cached
            self.tokens["draft_prompt"] += s.draft_prompt_tokens
            self.tokens["completion"] += len(completion.tokens)
            self.time_generate += s.time_generate
            for name, d, a in zip(s.source_names, s.source_drafted, s.source_accepted):
                self.drafted[name] += d
                self.accepted[name] += a
            lengths, accepted = list(s.draft_length_histogram), list(s.accepted_histogram)
            for i in range(1, len(lengths)):
                self.position_drafted[i] += sum(lengths[i:])
                self.position_accepted[i] += sum(accepted[i:])
            self.prediction["accepted"] += s.accepted_prediction_tokens
            self.prediction["rejected"] += s.rejected_prediction_tokens
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self.latency_buckets[i] += 1
            self.latency_sum += seconds
            self.latency_count += 1

    def render(self) -> str:
        """The Prometheus text format (version 0.0.4)."""
        out: list[str] = []

        def family(name: str, kind: str, help_: str, samples) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                out.append(f"{name}{_labels(**labels)} {value}")

        with self._lock:
            family("quickdraft_requests_total", "counter", "HTTP requests by endpoint and status.",
                   [({"endpoint": e, "status": s}, n) for (e, s), n in sorted(self.requests.items())])
            family("quickdraft_generations_total", "counter", "Generations by drafter and finish reason.",
                   [({"drafter": d, "finish_reason": f}, n) for (d, f), n in sorted(self.generations.items())])
            family("quickdraft_prompt_tokens_total", "counter", "Prompt tokens.", [({}, self.tokens["prompt"])])
            family("quickdraft_prompt_tokens_cached_total", "counter",
                   "Prompt tokens found in the KV cache from the previous request.",
                   [({}, self.tokens["prompt_cached"])])
            family("quickdraft_draft_prompt_tokens_total", "counter",
                   "Prompt tokens a draft model evaluated (a draft_window reads the end of a long prompt only).",
                   [({}, self.tokens["draft_prompt"])])
            family("quickdraft_completion_tokens_total", "counter", "Generated tokens.",
                   [({}, self.tokens["completion"])])
            family("quickdraft_generate_seconds_total", "counter", "Seconds spent generating (after the prompt).",
                   [({}, round(self.time_generate, 6))])
            family("quickdraft_drafted_tokens_total", "counter", "Draft tokens proposed, by draft source.",
                   [({"source": k}, v) for k, v in sorted(self.drafted.items())])
            family("quickdraft_accepted_tokens_total", "counter", "Draft tokens the target accepted, by draft source.",
                   [({"source": k}, v) for k, v in sorted(self.accepted.items())])
            family("quickdraft_draft_position_drafted_total", "counter",
                   "Draft tokens judged at each draft position (1 = first drafted token).",
                   [({"position": k}, v) for k, v in sorted(self.position_drafted.items())])
            family("quickdraft_draft_position_accepted_total", "counter",
                   "Draft tokens accepted at each draft position.",
                   [({"position": k}, v) for k, v in sorted(self.position_accepted.items())])
            family("quickdraft_prediction_tokens_total", "counter",
                   "Predicted-output tokens drafted, by verdict (accepted, rejected).",
                   [({"verdict": k}, self.prediction[k]) for k in ("accepted", "rejected")])
            family("quickdraft_cancelled_total", "counter", "Generations cancelled because the client disconnected.",
                   [({}, self.cancelled)])
            out.append("# HELP quickdraft_request_seconds Time from queued to generated, per generation.")
            out.append("# TYPE quickdraft_request_seconds histogram")
            for bound, n in zip(LATENCY_BUCKETS, self.latency_buckets):
                out.append(f'quickdraft_request_seconds_bucket{{le="{bound}"}} {n}')
            out.append(f'quickdraft_request_seconds_bucket{{le="+Inf"}} {self.latency_count}')
            out.append(f"quickdraft_request_seconds_sum {round(self.latency_sum, 6)}")
            out.append(f"quickdraft_request_seconds_count {self.latency_count}")
        for name, (help_, value) in self._gauges().items():
            family(name, "gauge", help_, [({}, value)])
        return "\n".join(out) + "\n"
