"""An independent byte-level BPE in plain Python for the tests: the Hugging Face pre-tokenizer
regexes (run by the `regex` module) and the classic GPT-2 merge loop over a GGUF vocab."""

from __future__ import annotations

import functools

regex = None  # imported lazily: tests skip when the module is missing

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
DEFAULT = [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"]

# The regex sequence of each tokenizer.ggml.pre, and whether a word that is a token is kept whole.
PRE = {
    "gpt-2": ([GPT2], False),
    "smollm": ([r"\p{N}", GPT2], False),
    "qwen2": ([QWEN2], False),
    "llama-bpe": ([LLAMA3], True),
    "default": (DEFAULT, False),
}


def _regex():
    global regex
    if regex is None:
        import regex as r

        regex = r
    return regex


@functools.lru_cache(maxsize=None)
def byte_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def split(patterns: list[str], text: str) -> list[str]:
    """Each regex splits every piece further into its matches and the text between them."""
    words = [text]
    for p in patterns:
        rx = _regex().compile(p)
        out = []
        for w in words:
            pos = 0
            for m in rx.finditer(w):
                if m.start() > pos:
                    out.append(w[pos:m.start()])
                out.append(m.group())
                pos = m.end()
            if pos < len(w):
                out.append(w[pos:])
        words = out
    return [w for w in words if w]


class PyBpe:
    def __init__(self, tokens: list[str], merges: list[str], pre: str):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.ranks = {}
        for i, m in enumerate(merges):
            a, b = m.split(" ", 1)
            self.ranks.setdefault((a, b), i)
        self.patterns, self.ignore_merges = PRE[pre]
        self.b2u = byte_to_unicode()

    def _bpe(self, word: str) -> list[str]:
        parts = list(word)
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda i: (self.ranks.get((parts[i], parts[i + 1]), 1 << 60), i))
            pair = (parts[best], parts[best + 1])
            if pair not in self.ranks:
                break
            merged, i = [], 0
            while i < len(parts):  # merge every occurrence, left to right
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return parts

    def encode(self, text: str) -> list[int]:
        ids = []
        for w in split(self.patterns, text):
            enc = "".join(self.b2u[b] for b in w.encode("utf-8"))
            if self.ignore_merges and enc in self.vocab:
                ids.append(self.vocab[enc])
                continue
            ids += [self.vocab[p] for p in self._bpe(enc)]
        return ids
