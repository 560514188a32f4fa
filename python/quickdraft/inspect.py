"""A readable summary of a GGUF file."""

from __future__ import annotations

import os
from collections import defaultdict

from .gguf_file import GGUFFile


def _human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _human_count(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.2f} B"
    if n >= 1e6:
        return f"{n / 1e6:.1f} M"
    return str(n)


def inspect(path: str | os.PathLike) -> str:
    """Summarise a GGUF file: architecture, parameters, quant-type mix, tokenizer, context, template."""
    with GGUFFile(path) as f:
        md = f.metadata
        arch = md.get("general.architecture", "unknown")
        n_params = sum(t.n_elements for t in f.tensors)
        by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for t in f.tensors:
            by_type[t.type][0] += 1
            by_type[t.type][1] += t.nbytes
        tokens = md.get("tokenizer.ggml.tokens")
        lines = [
            f"file:            {os.fspath(path)} ({_human_bytes(os.path.getsize(path))}, GGUF v{f.version})",
            f"name:            {md.get('general.name', '-')}",
            f"architecture:    {arch}",
            f"parameters:      {_human_count(n_params)} in {len(f.tensors)} tensors",
            f"layers:          {md.get(f'{arch}.block_count', '-')}, embedding {md.get(f'{arch}.embedding_length', '-')}, "
            f"heads {md.get(f'{arch}.attention.head_count', '-')} (kv {md.get(f'{arch}.attention.head_count_kv', '-')})",
            f"context length:  {md.get(f'{arch}.context_length', '-')}",
            "quant types:",
        ]
        for name, (count, nbytes) in sorted(by_type.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"  {name:<8} {count:4d} tensors  {_human_bytes(nbytes):>10}")
        tok_model = md.get("tokenizer.ggml.model", "-")
        lines.append(
            f"tokenizer:       {tok_model}, pre {md.get('tokenizer.ggml.pre', '-')}, "
            f"{len(tokens) if tokens is not None else 0} tokens, bos {md.get('tokenizer.ggml.bos_token_id', '-')}, "
            f"eos {md.get('tokenizer.ggml.eos_token_id', '-')}"
        )
        lines.append(f"chat template:   {'yes' if 'tokenizer.chat_template' in md else 'no'}")
        return "\n".join(lines)
