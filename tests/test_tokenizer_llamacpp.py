"""Multilingual ids against llama.cpp itself, when a llama-tokenize binary is at hand
(QD_LLAMA_TOKENIZE, /work/peer/build/bin/llama-tokenize or PATH); skipped otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from quickdraft import Tokenizer
from test_tokenizer_multilingual import TEXTS

MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"]


def _binary() -> str | None:
    for cand in (os.environ.get("QD_LLAMA_TOKENIZE"), "/work/peer/build/bin/llama-tokenize",
                 shutil.which("llama-tokenize")):
        if cand and os.path.exists(cand):
            return cand
    return None


def llama_ids(binary: str, model, text: str, tmp_path, parse_special: bool) -> list[int]:
    f = tmp_path / "prompt.txt"
    f.write_bytes(text.encode("utf-8"))
    cmd = [binary, "-m", str(model), "-f", str(f), "--ids", "--no-bos", "--no-escape", "--log-disable"]
    if not parse_special:  # llama-tokenize parses special tokens by default
        cmd.append("--no-parse-special")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("[")][-1]
    return [int(x) for x in line.strip("[]").split(",") if x.strip()]


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_against_llama_tokenize(model_path, tmp_path, key, name):
    binary = _binary()
    if binary is None:
        pytest.skip("no llama-tokenize binary (set QD_LLAMA_TOKENIZE); see DEVELOPERS.md to build llama.cpp")
    path = model_path(key)
    tok = Tokenizer(path)
    text = TEXTS[name]
    assert tok.encode(text) == llama_ids(binary, path, text, tmp_path, False)
    chat = f"<|im_start|>user\n{text}<|im_end|>\n<start_of_turn>x<end_of_turn>"
    assert tok.encode(chat, parse_special=True) == llama_ids(binary, path, chat, tmp_path, True)
