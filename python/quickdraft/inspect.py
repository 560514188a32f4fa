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


def _qwen35_features(md: dict, names: set[str]) -> list[str]:
    """Qwen3.5's hybrid layers, as llama.cpp reads them: recurrent layers, their state, MTP."""
    def g(key, default=None):
        return md.get(f"qwen35.{key}", default)

    n_mtp = int(g("nextn_predict_layers", 0) or 0)
    n_layer = int(g("block_count", 0)) - n_mtp
    flags = g("attention.recurrent_layers")
    if flags is not None:
        rec = [bool(f) for f in flags][:n_layer]
        how = "attention.recurrent_layers"
    else:
        interval = int(g("full_attention_interval", 4))
        rec = [(il + 1) % interval != 0 for il in range(n_layer)]
        how = f"every {interval}th layer attention"
    out = [f"hybrid: {sum(rec)} Gated DeltaNet + {n_layer - sum(rec)} gated attention layers ({how})",
           f"Gated DeltaNet: {g('ssm.group_count')} k / {g('ssm.time_step_rank')} v heads of {g('ssm.state_size')}, "
           f"conv kernel {g('ssm.conv_kernel')} (recurrent state, rolled back per verify batch)",
           "gated attention (sigmoid output gate), q/k norms"]
    sections = g("rope.dimension_sections")
    if sections is not None:
        out.append(f"M-RoPE sections {list(sections)}")
    if n_mtp:
        out.append(f"MTP: {n_mtp} nextn layer(s) (draft='mtp', picked by draft='self')")
    return out


def _features(md: dict, names: set[str], arch: str) -> list[str]:
    """What a family does beyond the plain Llama block, as far as the file says."""
    def g(key, default=None):
        return md.get(f"{arch}.{key}", default)

    out = []
    n_expert, n_used = g("expert_count"), g("expert_used_count")
    if n_expert:
        ff_exp = g("expert_feed_forward_length")
        out.append(f"MoE: {n_expert} experts, top-{n_used} per token" + (f", expert n_ff {ff_exp}" if ff_exp else ""))
    embd, heads = g("embedding_length"), g("attention.head_count")
    head_dim = g("attention.key_length")
    if head_dim and embd and heads and head_dim * heads != embd:
        out.append(f"head_dim {head_dim} (not n_embd / n_head = {embd // heads})")
    if "blk.0.attn_q_norm.weight" in names:
        out.append("q/k norms (per-head RMS before rope)")
    if "blk.0.attn_q.bias" in names:
        out.append("q/k/v biases")
    if arch == "qwen35":
        out.extend(_qwen35_features(md, names))
    elif "blk.0.attn_qkv.weight" in names:
        out.append("fused qkv")
    if arch == "phi3" and "blk.0.ffn_gate.weight" not in names:
        out.append("fused gate/up")
    n_rot = g("rope.dimension_count")
    hd = head_dim or (embd // heads if embd and heads else None)
    if n_rot and hd and n_rot < hd:
        out.append(f"partial rotary ({n_rot} of {hd} dims)")
    scaling = g("rope.scaling.type")
    factor = g("rope.scaling.factor")
    if scaling not in (None, "none") or factor not in (None, 0, 1, 1.0):
        orig = g("rope.scaling.original_context_length")
        out.append(f"rope scaling {scaling or 'linear'}" + (f" x{factor:g}" if factor else "") +
                   (f" (original context {orig})" if orig else ""))
    if "rope_factors_long.weight" in names:
        attn = g("rope.scaling.attn_factor")
        out.append("LongRoPE (long / short factors" + (f", attn_factor {attn:.3g}" if attn else "") + ")")
    if "rope_freqs.weight" in names:
        out.append("rope frequency factors (Llama 3.1)")
    if arch == "smollm3":
        out.append("no rope on every 4th layer")
    window = g("attention.sliding_window")
    if window:
        pattern = g("attention.sliding_window_pattern")
        out.append(f"sliding window {window}" + (" (ignored for phi3, as llama.cpp does)" if arch == "phi3" else
                                                 f", pattern {pattern}" if pattern is not None else ""))
    cap = g("final_logit_softcapping")
    if cap:
        out.append(f"logit softcap {cap:g}")
    return out


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
        ]
        try:
            from ._core import SUPPORTED_ARCHS  # the architectures this build runs
        except ImportError:
            SUPPORTED_ARCHS = None
        if SUPPORTED_ARCHS is not None:
            ok = arch in SUPPORTED_ARCHS
            lines.append(f"supported:       {'yes' if ok else 'no (supported: ' + ', '.join(SUPPORTED_ARCHS) + ')'}")
        features = _features(md, {t.name for t in f.tensors}, arch)
        lines.append(f"features:        {'; '.join(features) if features else '-'}")
        lines.append("quant types:")
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
