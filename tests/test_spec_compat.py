"""Draft/target compatibility from GGUF tokenizer metadata (files written with gguf.GGUFWriter)."""

from __future__ import annotations

import gguf
import pytest

import quickdraft
from quickdraft import _core

TOKENS = ["<s>", "</s>", "<eot>"] + [f"tok{i}" for i in range(200)]


def write(path, tokens=TOKENS, model="gpt2", pre="qwen2", bos=0, eos=1, eot=2, types=None):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    if types is not None:
        w.add_token_types(types)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    if eot is not None:
        w.add_eot_token_id(eot)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_same_tokenizer_is_compatible(tmp_path):
    _core.check_compatible(write(tmp_path / "t.gguf"), write(tmp_path / "d.gguf"))


def test_padding_up_to_128_ids_is_allowed(tmp_path):
    t = write(tmp_path / "t.gguf", TOKENS + [f"<pad{i}>" for i in range(128)])
    _core.check_compatible(t, write(tmp_path / "d.gguf"))
    _core.check_compatible(write(tmp_path / "d2.gguf"), t)


@pytest.mark.parametrize(
    "change,match",
    [
        ({"tokens": TOKENS + [f"<pad{i}>" for i in range(129)]}, "vocabulary sizes"),
        ({"tokens": TOKENS[:100] + ["other"] + TOKENS[101:]}, "token 100 is 'tok97' in the target but 'other'"),
        ({"model": "llama"}, "tokenizer.ggml.model"),
        ({"pre": "smollm"}, "tokenizer.ggml.pre"),
        ({"bos": 5}, "bos_token_id"),
        ({"eos": 2}, "eos_token_id"),
        ({"eot": None}, "eot_token_id: target 2, draft \\(none\\)"),
    ],
)
def test_incompatible_pairs_raise(tmp_path, change, match):
    t = write(tmp_path / "t.gguf")
    d = write(tmp_path / "d.gguf", **change)
    with pytest.raises(quickdraft.IncompatibleModelsError, match=match):
        _core.check_compatible(t, d)
    with pytest.raises(ValueError):  # IncompatibleModelsError is a ValueError
        _core.check_compatible(t, d)


def test_one_side_without_tokenizer_raises(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "bare.gguf"), "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    bare = str(tmp_path / "bare.gguf")
    _core.check_compatible(bare, bare)  # no tokenizer on either side: ids are plain numbers
    with pytest.raises(quickdraft.IncompatibleModelsError):
        _core.check_compatible(write(tmp_path / "t.gguf"), bare)


# A Qwen2.5-like vocabulary: text tokens, then special tokens (CONTROL = 3), then padding
# (USER_DEFINED = 4); and one like DeepSeek-R1-Distill-Qwen's, which redefines the special ids and
# has more padding past the shared range (152,064 against 151,936 in the real files).
NORMAL, CONTROL, USER = 1, 3, 4
TEXT = [f"tok{i}" for i in range(200)]
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>"]
R1_SPECIAL = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>"]


def vocab(special, n_pad):
    tokens = TEXT + special + [f"[PAD{i}]" for i in range(n_pad)]
    return tokens, [NORMAL] * len(TEXT) + [CONTROL] * len(special) + [USER] * n_pad


def test_appended_special_tokens_past_the_shared_range_are_compatible(tmp_path):
    # More than kMaxVocabPadding (128) extra ids, all special: the drafter never proposes them.
    small, big = vocab(QWEN_SPECIAL, 4), vocab(QWEN_SPECIAL, 4 + 200)
    t = write(tmp_path / "t.gguf", big[0], types=big[1])
    d = write(tmp_path / "d.gguf", small[0], types=small[1])
    _core.check_compatible(t, d)
    _core.check_compatible(d, t)


def test_appended_ordinary_token_is_named(tmp_path):
    tokens, types = vocab(QWEN_SPECIAL, 4)
    t = write(tmp_path / "t.gguf", tokens + ["hello"], types=types + [NORMAL])
    d = write(tmp_path / "d.gguf", tokens, types=types)
    with pytest.raises(quickdraft.IncompatibleModelsError,
                       match=r"vocabulary sizes 209 \(target\) and 208 \(draft\) differ, and id 208 past the shared "
                             r"range is the target's ordinary token 'hello'"):
        _core.check_compatible(t, d)


def test_deepseek_r1_qwen_pre_tokenizer_is_qwen2s(tmp_path):
    tokens, types = vocab(QWEN_SPECIAL, 4)
    t = write(tmp_path / "t.gguf", tokens, types=types, pre="qwen2")
    _core.check_compatible(t, write(tmp_path / "d.gguf", tokens, types=types, pre="deepseek-r1-qwen"))
    with pytest.raises(quickdraft.IncompatibleModelsError, match="tokenizer.ggml.pre: target 'qwen2', draft 'llama-bpe'"):
        _core.check_compatible(t, write(tmp_path / "d2.gguf", tokens, types=types, pre="llama-bpe"))


def test_deepseek_r1_distill_against_qwen25_says_exactly_what_differs(tmp_path):
    """The real-world case, refused: R1-Distill redefines Qwen's special ids (and its BOS / EOS)."""
    q_tokens, q_types = vocab(QWEN_SPECIAL, 4)
    r_tokens, r_types = vocab(R1_SPECIAL, 4 + 128)
    target = write(tmp_path / "qwen.gguf", q_tokens, types=q_types, bos=200, eos=202, eot=None)
    draft = write(tmp_path / "r1.gguf", r_tokens, types=r_types, pre="deepseek-r1-qwen", bos=203, eos=200, eot=None)
    with pytest.raises(quickdraft.IncompatibleModelsError) as e:
        _core.check_compatible(target, draft)
    msg = str(e.value)
    assert "different tokenizer.ggml.bos_token_id: target 200, draft 203" in msg
    assert "different tokenizer.ggml.eos_token_id: target 202, draft 200" in msg
    assert "4 special token(s) of the shared ids 0..207 differ (ids 200..203" in msg
    assert "200 '<|endoftext|>' vs '<｜end▁of▁sentence｜>'" in msg
    assert "tokenizer.ggml.pre" not in msg and "vocabulary sizes" not in msg  # the same pre-tokenizer; padding is fine
