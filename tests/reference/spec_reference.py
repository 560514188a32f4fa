"""Independent numpy oracles for sampling and speculative decoding tests.

process() is the logit-processing chain written from its definition (penalties ->
temperature -> top_k -> softmax -> top_p -> min_p) in float64; table_marginals() enumerates
every continuation of a tiny table model to get the exact distribution of each generated
token; chi_square_check() compares sampled counts with expected probabilities.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Params:
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64

    def native(self, core, seed: int = 0):
        p = core.SamplerParams()
        for k, v in self.__dict__.items():
            setattr(p, k, v)
        p.seed = seed
        return p


def process(logits, history, prm: Params) -> np.ndarray:
    """Dense next-token probabilities after the processing chain."""
    l = np.asarray(logits, dtype=np.float64).copy()
    v = len(l)
    n = len(history) if prm.penalty_last_n < 0 else min(len(history), prm.penalty_last_n)
    window = list(history[len(history) - n :]) if n else []
    for tok in set(window):
        c = window.count(tok)
        l[tok] = l[tok] / prm.repeat_penalty if l[tok] > 0 else l[tok] * prm.repeat_penalty
        l[tok] -= c * prm.frequency_penalty + prm.presence_penalty
    if prm.temperature <= 0:
        out = np.zeros(v)
        out[int(np.argmax(l))] = 1.0
        return out
    keep = np.ones(v, dtype=bool)
    if 0 < prm.top_k < v:
        order = sorted(range(v), key=lambda i: (-l[i], i))
        keep[:] = False
        keep[order[: prm.top_k]] = True
    p = np.where(keep, np.exp((l - l[keep].max()) / prm.temperature), 0.0)
    if prm.top_p < 1.0:
        order = sorted(np.flatnonzero(keep), key=lambda i: (-p[i], i))
        cum = np.cumsum(p[order])
        last = int(np.searchsorted(cum, prm.top_p * p.sum()))  # first index with cum >= target
        drop = order[last + 1 :]
        p[drop] = 0.0
    if prm.min_p > 0:
        p[p < prm.min_p * p.max()] = 0.0
    return p / p.sum()


def random_table(rng: np.random.Generator, v: int, scale: float = 2.0) -> np.ndarray:
    """A [V][V][V] table model: row [prev][cur] holds the next-token logits."""
    return (rng.standard_normal((v, v, v)) * scale).astype(np.float32)


def table_logits(table, seq, i):
    """Logits the table model gives after seq[: i + 1]."""
    prev = seq[i - 1] if i > 0 else seq[i]
    return table[prev, seq[i]]


def table_marginals(table, prompt, n_gen: int, prm: Params) -> list[np.ndarray]:
    """Exact distribution of generated token j, j < n_gen, by enumerating every path."""
    v = table.shape[0]
    margins = [np.zeros(v) for _ in range(n_gen)]
    paths = {tuple(): 1.0}
    for j in range(n_gen):
        nxt = {}
        for gen, w in paths.items():
            seq = list(prompt) + list(gen)
            p = process(table_logits(table, seq, len(seq) - 1), seq, prm)
            for t in np.flatnonzero(p):
                margins[j][t] += w * p[t]
                nxt[gen + (int(t),)] = w * p[t]
        paths = nxt
    return margins


def greedy_table(table, prompt, n_gen: int, prm: Params) -> list[int]:
    """Greedy continuation of the table model (argmax after penalties)."""
    seq = list(prompt)
    g = Params(**{**prm.__dict__, "temperature": 0.0})
    for _ in range(n_gen):
        seq.append(int(np.argmax(process(table_logits(table, seq, len(seq) - 1), seq, g))))
    return seq[len(prompt) :]


def chi2_threshold(df: int, alpha: float = 1e-4) -> float:
    """Upper alpha quantile of chi-square(df): scipy when present, else Wilson-Hilferty."""
    try:
        from scipy.stats import chi2

        return float(chi2.ppf(1 - alpha, df))
    except ImportError:
        z = 3.719016485455709 if alpha == 1e-4 else _normal_quantile(1 - alpha)
        a = 2.0 / (9.0 * df)
        return df * (1 - a + z * math.sqrt(a)) ** 3


def _normal_quantile(q: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < q:
            lo = mid
        else:
            hi = mid
    return lo


def chi_square_check(samples, probs, alpha: float = 1e-4) -> tuple[float, float]:
    """Asserts samples follow probs; returns (statistic, threshold). Bins with an expected
    count below 5 are pooled; a token of probability 0 must never appear."""
    samples = np.asarray(samples)
    probs = np.asarray(probs, dtype=np.float64)
    n = len(samples)
    counts = np.bincount(samples, minlength=len(probs)).astype(np.float64)
    assert len(counts) == len(probs), "sampled an id outside the vocabulary"
    impossible = probs <= 1e-12
    assert counts[impossible].sum() == 0, f"sampled ids of probability 0: {np.flatnonzero(impossible & (counts > 0))}"
    exp = probs * n
    big = (exp >= 5) & ~impossible
    obs_b, exp_b = list(counts[big]), list(exp[big])
    small = ~big & ~impossible
    if small.any():
        obs_b.append(counts[small].sum())
        exp_b.append(exp[small].sum())
    obs_b, exp_b = np.array(obs_b), np.array(exp_b)
    stat = float(((obs_b - exp_b) ** 2 / exp_b).sum())
    df = max(1, len(obs_b) - 1)
    thr = chi2_threshold(df, alpha)
    assert stat < thr, f"chi-square {stat:.1f} >= {thr:.1f} (df {df}): observed {counts} expected {exp}"
    return stat, thr


SETTINGS = {
    "t1": Params(temperature=1.0),
    "t0.7_top_p0.9": Params(temperature=0.7, top_p=0.9),
}
