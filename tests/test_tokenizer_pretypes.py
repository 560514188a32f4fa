"""Pre-tokenizers selected by tokenizer.ggml.pre, on tiny BPE vocabularies written at test time
with gguf.GGUFWriter, against the Python oracle (Hugging Face regexes + GPT-2 merge loop)."""

from __future__ import annotations

import collections
import uuid

import gguf
import pytest

from quickdraft import Tokenizer
from reference.tokenizer_oracle import GPT2, PyBpe, byte_to_unicode, split

pytest.importorskip("regex")

CORPUS = (
    "The quick brown fox jumps over the lazy dog. I'm sure they've said we'd go; ISN'T IT? "
    "def add(a, b):\n    return a + b\n\n1234567 + 89 = 1234656  3.14159 $100 <tag>|x|^y~ "
    "日本語のテキスト、中文文本。 한국어 텍스트 नमस्ते दुनिया مرحبا بالعالم  \t\t  \r\n end"
)
TEXTS = [
    CORPUS,
    "   leading and trailing   ",
    "numbers 1 12 123 1234 12345 123456 ١٢٣ and punctuation!!! ... ??? ((()))",
    "Hello\r\n\r\nworld\n\n\n  indented\n\tTAB'S 'Ll 'VE don't",
    "a\u00a0b\u3000c\u2009d  e",
    "x+=1; y<=2 || z^3 ~ $5 | <|endoftext|> ok",
]


def train_merges(n_merges: int) -> list[tuple[str, str]]:
    """A tiny BPE trained on CORPUS (word counts over GPT-2 pre-tokenized, byte-encoded words)."""
    b2u = byte_to_unicode()
    words = collections.Counter(tuple(b2u[b] for b in w.encode()) for w in split([GPT2], CORPUS))
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        new = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        words = new
    return merges


@pytest.fixture(scope="module")
def vocab():
    b2u = byte_to_unicode()
    merges = train_merges(300)
    tokens = ["<|endoftext|>"] + [b2u[b] for b in range(256)]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    return tokens, [f"{a} {b}" for a, b in merges]


def write_gguf(path, tokens, merges, pre):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (len(tokens) - 1))
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("pre", ["gpt-2", "smollm", "qwen2", "llama-bpe", "default"])
@pytest.mark.parametrize("index", range(len(TEXTS)))
def test_pre_tokenizer_against_oracle(tmp_path, vocab, pre, index):
    tokens, merges = vocab
    tok = Tokenizer(write_gguf(tmp_path / "tiny.gguf", tokens, merges, pre))
    assert tok.pre == pre
    text = TEXTS[index]
    assert tok.encode(text) == PyBpe(tokens, merges, pre).encode(text)
    assert tok.decode(tok.encode(text)) == text


def test_llama_bpe_adds_bos_by_default(tmp_path, vocab):
    tok = Tokenizer(write_gguf(tmp_path / "l3.gguf", *vocab, "llama-bpe"))
    assert tok.add_bos and tok.encode("hi", add_special=True)[0] == 0
    tok = Tokenizer(write_gguf(tmp_path / "q.gguf", *vocab, "qwen2"))
    assert not tok.add_bos and tok.encode("hi", add_special=True) == tok.encode("hi")


def test_unknown_pre_warns_once_and_uses_default(tmp_path, vocab, capfd):
    name = "no-such-pre-" + uuid.uuid4().hex[:8]
    path = write_gguf(tmp_path / "unknown.gguf", *vocab, name)
    first = Tokenizer(path)
    second = Tokenizer(path)
    err = capfd.readouterr().err
    assert err.count(f"unknown tokenizer.ggml.pre '{name}'") == 1
    default = Tokenizer(write_gguf(tmp_path / "default.gguf", *vocab, "default"))
    for text in TEXTS:
        assert first.encode(text) == second.encode(text) == default.encode(text)


def test_special_token_text_needs_parse_special(tmp_path, vocab):
    tok = Tokenizer(write_gguf(tmp_path / "s.gguf", *vocab, "gpt-2"))
    assert tok.encode("a<|endoftext|>b", parse_special=True).count(0) == 1
    assert 0 not in tok.encode("a<|endoftext|>b")


def _write_raw(path, kv):
    w = gguf.GGUFWriter(str(path), "llama")
    for key, (kind, value) in kv.items():
        getattr(w, f"add_{kind}")(key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_bad_tokenizer_metadata_raises(tmp_path):
    from quickdraft import GGUFError, UnsupportedError

    with pytest.raises(GGUFError, match="no tokenizer.ggml.model"):
        Tokenizer(_write_raw(tmp_path / "none.gguf", {}))
    with pytest.raises(UnsupportedError, match="'bert' is not supported"):
        Tokenizer(_write_raw(tmp_path / "bert.gguf", {"tokenizer.ggml.model": ("string", "bert"),
                                                       "tokenizer.ggml.tokens": ("array", ["a"])}))
    with pytest.raises(GGUFError, match="merges"):
        Tokenizer(_write_raw(tmp_path / "nomerges.gguf", {"tokenizer.ggml.model": ("string", "gpt2"),
                                                          "tokenizer.ggml.tokens": ("array", ["a", "b"])}))
    with pytest.raises(GGUFError, match="one entry per token"):
        Tokenizer(_write_raw(tmp_path / "scores.gguf", {"tokenizer.ggml.model": ("string", "llama"),
                                                        "tokenizer.ggml.tokens": ("array", ["a", "b"]),
                                                        "tokenizer.ggml.scores": ("array", [0.5])}))
    with pytest.raises(GGUFError):
        Tokenizer(tmp_path / "missing.gguf")
