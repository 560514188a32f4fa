"""Tokenizer behaviour on the real models, checked against their GGUF metadata and against
Python's own UTF-8 decoder."""

from __future__ import annotations

import random

import pytest

import quickdraft
from quickdraft import GGUFFile, Tokenizer

pytestmark = pytest.mark.real

MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"]


@pytest.fixture(scope="module")
def tok(model_path):
    cache: dict[str, tuple[Tokenizer, dict]] = {}

    def get(key: str):
        if key not in cache:
            path = model_path(key)
            with GGUFFile(path) as f:  # the project's reader, itself checked against the gguf package
                cache[key] = (Tokenizer(path), f.metadata)
        return cache[key]

    return get


@pytest.mark.parametrize("key", MODELS)
def test_metadata_facts(tok, key):
    t, md = tok(key)
    assert t.vocab_size == len(md["tokenizer.ggml.tokens"])
    assert t.bos_id == md["tokenizer.ggml.bos_token_id"]
    assert t.eos_id == md["tokenizer.ggml.eos_token_id"]
    assert t.eos_id in t.eot_ids
    assert t.model == md["tokenizer.ggml.model"]
    for i in (0, t.bos_id, t.eos_id, t.vocab_size - 1):
        assert t.token_text(i) == md["tokenizer.ggml.tokens"][i]
        assert t.token_type(i) in (md["tokenizer.ggml.token_type"][i], 3)  # EOG texts become control
    assert t.chat_template == md.get("tokenizer.chat_template")


@pytest.mark.parametrize("key", MODELS)
def test_bos_eos_only_when_asked_and_declared(tok, key):
    t, md = tok(key)
    plain = t.encode("Hello world")
    with_special = t.encode("Hello world", add_special=True)
    add_bos = md.get("tokenizer.ggml.add_bos_token", t.model == "llama")
    add_eos = md.get("tokenizer.ggml.add_eos_token", False)
    assert with_special == [t.bos_id] * add_bos + plain + [t.eos_id] * add_eos


@pytest.mark.parametrize("key", MODELS)
def test_control_tokens_only_with_parse_special(tok, key):
    t, md = tok(key)
    eos_text = md["tokenizer.ggml.tokens"][t.eos_id]
    assert t.encode(eos_text, parse_special=True) == [t.eos_id]
    assert t.eos_id not in t.encode(eos_text)
    assert t.decode(t.encode(eos_text)) == eos_text  # plain text survives
    assert t.decode([t.eos_id]) == "" and t.decode([t.eos_id], special=True) == eos_text


@pytest.mark.parametrize("key", MODELS)
def test_out_of_range_ids_raise_value_error(tok, key):
    t, _ = tok(key)
    for bad in (-1, t.vocab_size, 2**40):
        with pytest.raises(ValueError):
            t.decode([1, bad])
        with pytest.raises(ValueError):
            t.token_to_piece(bad)
        with pytest.raises(ValueError):
            t.stream_decoder().feed(bad)


def _byte_tokens(t: Tokenizer) -> dict[int, int]:
    """byte value -> a token whose piece is exactly that byte."""
    out = {}
    for i in range(t.vocab_size):
        p = t.token_to_piece(i)
        if len(p) == 1 and p[0] not in out:
            out[p[0]] = i
        if len(out) == 256:
            break
    return out


@pytest.mark.parametrize("key", ["gemma3-270m", "qwen2.5-coder-0.5b"])
def test_invalid_utf8_becomes_replacement_like_python(tok, key):
    t, _ = tok(key)
    byte_tok = _byte_tokens(t)
    assert len(byte_tok) == 256
    rng = random.Random(1234)
    alphabet = [0x41, 0x20, 0x80, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE3, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0x9F, 0xA0, 0x8F]
    for n in range(400):
        data = bytes(rng.choice(alphabet) if n % 2 else rng.randrange(256) for _ in range(rng.randrange(1, 12)))
        ids = [byte_tok[b] for b in data]
        expected = data.decode("utf-8", "replace")
        assert t.decode(ids) == expected, data
        d = t.stream_decoder()
        assert "".join(d.feed(i) for i in ids) + d.flush() == expected, data


def test_tokenizer_is_fast_to_build(model_path):
    # Not a timing assertion: building must not touch tensors, so a file's weights are irrelevant.
    t = Tokenizer(model_path("gemma3-270m"))
    assert t.vocab_size == 262144 and t.model == "llama" and t.pre == ""


def test_exported_names():
    assert quickdraft.Tokenizer is Tokenizer
    assert callable(quickdraft.chat.render)


def test_known_model_key(model_path):
    model_path("smollm2-135m")  # makes sure it is in the cache
    by_key = Tokenizer("smollm2-135m")
    assert by_key.encode("Hello world") == Tokenizer(model_path("smollm2-135m")).encode("Hello world")


@pytest.mark.real
def test_model_tokenizer_is_the_files_tokenizer(model_path):
    import quickdraft

    path = model_path("smollm2-135m")
    model = quickdraft.Model(path, n_ctx=64)
    ref = quickdraft.Tokenizer(path)
    text = "Hello world, this is quickdraft."
    assert model.tokenizer.encode(text) == ref.encode(text)
    assert model.tokenizer.vocab_size == model.n_vocab
