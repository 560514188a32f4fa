"""SentencePiece-style vocabularies on a tiny GGUF written at test time: score-ordered merges,
byte fallback, the U+2581 space rule with add_space_prefix, against a small Python oracle."""

from __future__ import annotations

import gguf
import pytest

from quickdraft import Tokenizer

SP = "\u2581"
PIECES = {  # text -> score (higher merges first)
    SP: -1.0, "H": -5.0, "e": -5.0, "l": -5.0, "o": -5.0, "w": -5.0, "r": -5.0, "d": -5.0, "a": -5.0, "b": -5.0,
    SP + "H": -3.0, "el": -2.5, "ell": -2.0, "ll": -2.2, SP + "Hell": -1.5, SP + "Hello": -1.0,
    SP + "w": -3.0, "or": -2.0, "ld": -2.0, SP + "wor": -1.8, SP + "world": -0.5, SP + SP: -2.0, "lo": -2.1,
}


def write_spm(path, add_space_prefix: bool):
    tokens = ["<unk>", "<s>", "</s>", "<tag>"] + [f"<0x{b:02X}>" for b in range(256)] + list(PIECES)
    types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL, gguf.TokenType.USER_DEFINED]
             + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * len(PIECES))
    scores = [0.0] * 260 + list(PIECES.values())
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_scores(scores)
    w.add_add_space_prefix(add_space_prefix)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tokens


def oracle(tokens: list[str], text: str) -> list[int]:
    """Merge the best-scoring adjacent pair that is a token (leftmost on ties) until none is."""
    vocab = {t: i for i, t in enumerate(tokens)}
    syms = list(text.replace(" ", SP))
    while True:
        best = None
        for i in range(len(syms) - 1):
            cat = syms[i] + syms[i + 1]
            if cat in vocab and (best is None or PIECES.get(cat, 0.0) > best[0]):
                best = (PIECES.get(cat, 0.0), i)
        if best is None:
            break
        i = best[1]
        syms[i:i + 2] = [syms[i] + syms[i + 1]]
    ids = []
    for s in syms:
        ids += [vocab[s]] if s in vocab else [vocab[f"<0x{b:02X}>"] for b in s.encode()]
    return ids


TEXTS = ["Hello world", "Hello  world", "Hellowor ld", "ab é 日本", "lol", "  Hello"]


@pytest.mark.parametrize("text", TEXTS)
def test_spm_against_oracle(tmp_path, text):
    tokens = write_spm(tmp_path / "spm.gguf", add_space_prefix=False)
    tok = Tokenizer(tmp_path / "spm.gguf")
    assert tok.encode(text) == oracle(tokens, text)
    assert tok.decode(tok.encode(text)) == text


def test_space_prefix_and_bos(tmp_path):
    tokens = write_spm(tmp_path / "spm.gguf", add_space_prefix=True)
    tok = Tokenizer(tmp_path / "spm.gguf")
    assert tok.add_bos and not tok.add_eos  # SentencePiece defaults
    assert tok.encode("Hello world") == oracle(tokens, " Hello world")
    assert tok.encode("Hello", add_special=True) == [1] + oracle(tokens, " Hello")
    # The prefix is added again after a special token, not after user-defined text such as <tag>.
    assert tok.encode("Hello<s>world", parse_special=True) == (
        oracle(tokens, " Hello") + [1] + oracle(tokens, " world"))
    assert tok.encode("Hello<s>world") == oracle(tokens, " Hello<s>world")
    assert tok.encode("<tag>world") == [3] + oracle(tokens, " world")
    # decode: the space after a leading BOS is dropped, byte tokens rebuild characters.
    assert tok.decode(tok.encode("Hello world é", add_special=True)) == "Hello world é"
    assert tok.token_to_piece(tokens.index("<0xC3>")) == b"\xc3"
