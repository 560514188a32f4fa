"""Multilingual text: round trips on every model, and ids of the BPE models against an
independent Python BPE (Hugging Face pre-tokenizer regexes + the classic GPT-2 merge loop)."""

from __future__ import annotations

import pytest

from quickdraft import GGUFFile, Tokenizer
from reference.tokenizer_oracle import PyBpe

TEXTS = {
    "japanese": "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。カタカナ・ﾊﾝｶｸ",
    "chinese": "大语言模型的推理速度取决于内存带宽，而不是算力！（测试）",
    "korean": "안녕하세요. 대한민국의 수도는 서울입니다. 한글 자모: ㄱㄴㄷ",
    "arabic": "اللغة العربية جميلة، أليس كذلك؟ ١٢٣٤٥",
    "devanagari": "हिन्दी में संयुक्ताक्षर: क्षत्रिय, द्वार, श्री; अंक ०१२३",
    "combining": "e\u0301 a\u0308 n\u0303 Z\u0351\u0352 ḁ́",
    "emoji_zwj": "👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 🧑‍🤝‍🧑 😀😃😄",
    "flags": "🇯🇵🇺🇸🇫🇷🇩🇪 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "whitespace": "a  b   c    d\t\te \t f   \n\n\n  g     ",
    "crlf": "line one\r\nline two\r\n\r\nline four\rlast",
    "nbsp": "100\u00a0km\u202fand\u2009thin\u3000ideographic\u00a0\u00a0two",
    "numbers": "3.14159 2,718 1e-9 0xDEADbeef 123456789012 ½ ² Ⅻ ٣",
    "code": 'def f(x: int) -> int:\n    return x ** 2  # square\n\nif __name__ == "__main__":\n\tprint(f(3), {"k": [1, 2]})\n',
    "contractions": "I'm, you're, he's, they'll, we'd, I've, DON'T, It'S",
    "mixed": "Mixed: English, 日本語, 한국어, العربية, हिन्दी, emoji 🎉 and code `x+=1;`",
}
MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"]
BPE_MODELS = ["smollm2-135m", "qwen2.5-coder-0.5b"]


@pytest.fixture(scope="module")
def tokenizers(model_path):
    return {k: Tokenizer(model_path(k)) for k in MODELS}


@pytest.fixture(scope="module")
def oracles(model_path):
    pytest.importorskip("regex")
    out = {}
    for key in BPE_MODELS:
        with GGUFFile(model_path(key)) as f:
            md = f.metadata
        out[key] = PyBpe(md["tokenizer.ggml.tokens"], md["tokenizer.ggml.merges"], md["tokenizer.ggml.pre"])
    return out


@pytest.mark.real
@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_round_trip(tokenizers, key, name):
    tok = tokenizers[key]
    text = TEXTS[name]
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert b"".join(tok.token_to_piece(i) for i in ids) == text.encode("utf-8")


@pytest.mark.real
@pytest.mark.parametrize("key", BPE_MODELS)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_bpe_against_python_oracle(tokenizers, oracles, key, name):
    assert tokenizers[key].encode(TEXTS[name]) == oracles[key].encode(TEXTS[name])


@pytest.mark.real
@pytest.mark.parametrize("key", BPE_MODELS)
def test_bpe_long_text_against_python_oracle(tokenizers, oracles, key):
    text = "\n".join(TEXTS.values()) * 3
    assert tokenizers[key].encode(text) == oracles[key].encode(text)
