"""Tokenizer throughput on ~1 MB of mixed text: quickdraft vs llama.cpp, same files, same text.

    python bench/tokenizer_throughput.py [--mb 1] [--models smollm2-135m,qwen2.5-coder-0.5b,gemma3-270m]

llama.cpp is timed through `llama-tokenize` (QD_LLAMA_TOKENIZE, else /work/peer/build/bin/) as
(time on the text) - (time on an empty text), i.e. without its model-loading time; or through
the llama_cpp Python package (vocab_only) when that is importable.
"""

from __future__ import annotations

import os
import sys

# This file's name shadows the standard library's `tokenize` module when run as a script:
# drop bench/ from the import path before anything imports it.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from quickdraft import Tokenizer, models  # noqa: E402

PARAGRAPHS = [
    "Speculative decoding lets a small draft model propose several tokens that the target model then "
    "verifies in a single batched forward pass. When the draft is right, we keep the whole prefix; "
    "when it is wrong, we keep what matched and sample one corrected token. It's exact, isn't it?",
    "def verify(draft, target, tokens):\n    logits = target.forward(tokens)\n    for i, t in enumerate(draft):\n"
    "        if logits[i].argmax() != t:\n            return i\n    return len(draft)\n",
    '{"model": "qwen2.5-coder", "n_ctx": 4096, "temperature": 0.7, "stop": ["<|im_end|>"], "ids": [1, 22, 333]}',
    "大语言模型的推理速度取决于内存带宽。投机解码用小模型起草，再由大模型一次性验证。",
    "推論の速さはメモリ帯域で決まる。ドラフトモデルが提案し、ターゲットモデルがまとめて検証する。",
    "추측 디코딩은 작은 모델이 초안을 만들고 큰 모델이 한 번에 검증합니다.",
    "Le décodage spéculatif accélère la génération sans changer la distribution de sortie — vraiment.",
    "for (int i = 0; i < n; ++i) { acc += w[i] * x[i]; }  // 0x1F, 3.14159, 1,000,000\n",
    "Emoji and symbols: 😀👍🏽 🇯🇵 ✓ → ∑ ≤ ≥ ± ½ — “quotes” and ‘single’.",
    "नमस्ते दुनिया। مرحبا بالعالم. Привет, мир! Γειά σου Κόσμε.",
    "   indented line\n\n\tTabbed\tcolumns\there\r\nWindows line end\r\n",
]
DEFAULT_MODELS = ["smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m"]


def mixed_text(n_bytes: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    parts, size = [], 0
    while size < n_bytes:
        p = rng.choice(PARAGRAPHS)
        parts.append(p)
        size += len(p.encode()) + 1
    return "\n".join(parts)


def time_ours(path: Path, text: str) -> tuple[int, float, float, list[int]]:
    t0 = time.perf_counter()
    tok = Tokenizer(path)
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    ids = tok.encode(text)
    cold = time.perf_counter() - t0
    warm = min(_timed(tok.encode, text) for _ in range(3))
    return len(ids), cold, warm, ids if load >= 0 else []


def _timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def llama_tokenize_binary() -> str | None:
    for cand in (os.environ.get("QD_LLAMA_TOKENIZE"), "/work/peer/build/bin/llama-tokenize",
                 shutil.which("llama-tokenize")):
        if cand and os.path.exists(cand):
            return cand
    return None


def time_llama_binary(binary: str, path: Path, text: str) -> tuple[int, float] | None:
    def run(file: str) -> tuple[float, str]:
        cmd = [binary, "-m", str(path), "-f", file, "--ids", "--no-bos", "--no-escape", "--no-parse-special", "--log-disable"]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return time.perf_counter() - t0, out

    with tempfile.TemporaryDirectory() as d:
        big, empty = os.path.join(d, "big.txt"), os.path.join(d, "empty.txt")
        Path(big).write_bytes(text.encode())
        Path(empty).write_bytes(b"x")
        base = min(run(empty)[0] for _ in range(2))
        best, out = min(run(big) for _ in range(2))
    line = [ln for ln in out.splitlines() if ln.startswith("[")]
    n = len(line[-1].strip("[]").split(",")) if line else 0
    return n, max(best - base, 1e-9)


def time_llama_python(path: Path, text: str) -> tuple[int, float] | None:
    try:
        import llama_cpp
    except ImportError:
        return None
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    data = text.encode()
    t0 = time.perf_counter()
    ids = llm.tokenize(data, add_bos=False, special=False)
    return len(ids), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    args = ap.parse_args()
    text = mixed_text(int(args.mb * 1e6))
    n_bytes = len(text.encode())
    binary = llama_tokenize_binary()
    print(f"text: {n_bytes / 1e6:.2f} MB mixed (English, code, JSON, CJK, Korean, Hindi, Arabic, emoji)")
    if binary is None:
        print("llama.cpp: llama-tokenize is missing (set QD_LLAMA_TOKENIZE or build /work/peer/build/bin/llama-tokenize)")
    header = f"{'model':<22}{'tokens':>9}{'ours cold tok/s':>17}{'ours warm tok/s':>17}{'llama.cpp tok/s':>17}{'cold/llama':>12}"
    print(header)
    print("-" * len(header))
    for key in args.models.split(","):
        if not models.is_cached(key):
            print(f"{key:<22} (not in the cache: quickdraft fetch {key})")
            continue
        path = models.cached_path(key)
        n, cold, warm, _ = time_ours(path, text)
        peer = time_llama_python(path, text)
        if peer is None and binary:
            peer = time_llama_binary(binary, path, text)
        peer_rate = f"{peer[0] / peer[1]:>17,.0f}" if peer else f"{'-':>17}"
        ratio = f"{(n / cold) / (peer[0] / peer[1]):>11.2f}x" if peer else f"{'-':>12}"
        note = "" if not peer or peer[0] == n else f"  (llama.cpp made {peer[0]} tokens)"
        print(f"{key:<22}{n:>9,}{n / cold:>17,.0f}{n / warm:>17,.0f}{peer_rate}{ratio}{note}")


if __name__ == "__main__":
    main()
