"""Record llama.cpp's token ids for the multilingual texts into tests/data/llamacpp_tokenize.json.

Run once with a llama.cpp build (llama-tokenize):
    python tests/reference/record_llamacpp_tokenize.py /path/to/llama-tokenize
The test (test_tokenizer_llamacpp.py) then compares against the recorded ids without the binary.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/
from test_tokenizer_multilingual import TEXTS  # noqa: E402

from quickdraft import models  # noqa: E402

MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"]
OUT = Path(__file__).resolve().parents[1] / "data" / "llamacpp_tokenize.json"


def chat_text(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<start_of_turn>x<end_of_turn>"


def llama_ids(binary: str, model, text: str, parse_special: bool) -> list[int]:
    with tempfile.NamedTemporaryFile("wb", suffix=".txt") as f:
        f.write(text.encode("utf-8"))
        f.flush()
        cmd = [binary, "-m", str(model), "-f", f.name, "--ids", "--no-bos", "--no-escape", "--log-disable"]
        if not parse_special:  # llama-tokenize parses special tokens by default
            cmd.append("--no-parse-special")
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("[")][-1]
    return [int(x) for x in line.strip("[]").split(",") if x.strip()]


def main(binary: str) -> None:
    data = {"source": "llama-tokenize from llama-cpp-python 0.3.36 vendor/llama.cpp (native build)", "models": {}}
    for key in MODELS:
        path = models.resolve(key)
        data["models"][key] = {
            name: {"plain": llama_ids(binary, path, text, False), "special": llama_ids(binary, path, chat_text(text), True)}
            for name, text in sorted(TEXTS.items())
        }
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=0))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
