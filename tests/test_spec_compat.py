"""Draft/target compatibility from GGUF tokenizer metadata (files written with gguf.GGUFWriter)."""

from __future__ import annotations

import gguf
import pytest

import quickdraft
from quickdraft import _core

TOKENS = ["<s>", "</s>", "<eot>"] + [f"tok{i}" for i in range(200)]


def write(path, tokens=TOKENS, model="gpt2", pre="qwen2", bos=0, eos=1, eot=2):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
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
