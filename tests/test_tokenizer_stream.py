"""Streaming detokenizer: pieces joined equal decode(all); no piece splits a character."""

from __future__ import annotations

import codecs
import random

import pytest

from quickdraft import Tokenizer

pytestmark = pytest.mark.real

TEXTS = [
    "Emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇯🇵🇫🇷 ❤️ 🧑🏿‍🚀",
    "日本語の文章をストリーミングで表示します。漢字とカタカナ、ひらがな。",
    " leading space, then 中文 and 한국어 and नमस्ते",
]
MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"]


@pytest.fixture(scope="module")
def tokenizers(model_path):
    return {k: Tokenizer(model_path(k)) for k in MODELS}


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("add_special", [False, True])
def test_stream_pieces_join_to_decode(tokenizers, key, text, add_special):
    tok = tokenizers[key]
    ids = tok.encode(text, add_special=add_special)
    d = tok.stream_decoder()
    pieces = [d.feed(i) for i in ids]
    tail = d.flush()
    assert "".join(pieces) + tail == tok.decode(ids)
    assert tail == ""  # valid text: nothing is left over
    assert all("\ufffd" not in p for p in pieces)  # no character was cut in two
    assert pieces == _python_incremental(tok, ids)


def _python_incremental(tok: Tokenizer, ids: list[int]) -> list[str]:
    """Oracle: Python's incremental UTF-8 decoder fed the same token bytes."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    out, stripped = [], ids[0] != tok.bos_id if ids else True
    for i in ids:
        b = tok.token_to_piece(i, special=False)
        if not stripped and b:
            b, stripped = (b[1:] if b[:1] == b" " else b), True
        out.append(dec.decode(b))
    return out


@pytest.mark.parametrize("key", ["gemma3-270m", "qwen2.5-coder-0.5b"])
def test_stream_random_bytes_match_python_incremental_decoder(tokenizers, key):
    tok = tokenizers[key]
    byte_tok = {}
    for i in range(tok.vocab_size):
        p = tok.token_to_piece(i)
        if len(p) == 1:
            byte_tok.setdefault(p[0], i)
    rng = random.Random(7)
    for _ in range(300):
        data = bytes(rng.choice([0x61, 0xE3, 0x81, 0x82, 0xF0, 0x9F, 0x98, 0xC3, 0xA9, 0xFF, 0xED, 0xA0])
                     for _ in range(rng.randrange(1, 10)))
        ids = [byte_tok[b] for b in data]
        d = tok.stream_decoder()
        got = [d.feed(i) for i in ids]
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        expected = [dec.decode(bytes([b])) for b in data] + [dec.decode(b"", final=True)]
        got.append(d.flush())
        assert "".join(got) == "".join(expected) == data.decode("utf-8", "replace"), data
        # Never later than Python's decoder (which waits on ED A0..BF; we replace at once).
        for k in range(len(got)):
            assert len("".join(got[: k + 1])) >= len("".join(expected[: k + 1])), data


@pytest.mark.parametrize("key", MODELS)
def test_stream_reset_and_reuse(tokenizers, key):
    tok = tokenizers[key]
    d = tok.stream_decoder()
    ids = tok.encode("再利用 😀")
    first = "".join(d.feed(i) for i in ids) + d.flush()
    second = "".join(d.feed(i) for i in ids) + d.flush()
    assert first == second == tok.decode(ids)


def test_stream_special_tokens(tokenizers):
    tok = tokenizers["qwen2.5-coder-0.5b"]
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>", parse_special=True)
    plain, special = tok.stream_decoder(), tok.stream_decoder(special=True)
    assert "".join(plain.feed(i) for i in ids) == "user\nhi" == tok.decode(ids)
    assert "".join(special.feed(i) for i in ids) == tok.decode(ids, special=True) == "<|im_start|>user\nhi<|im_end|>"


def test_stream_drops_space_after_bos_like_decode(tokenizers):
    tok = tokenizers["gemma3-270m"]
    ids = tok.encode(" Hello", add_special=True)
    assert ids[0] == tok.bos_id
    d = tok.stream_decoder()
    assert "".join(d.feed(i) for i in ids) + d.flush() == tok.decode(ids) == "Hello"
