"""Reference forward pass in numpy float64: the oracle for quickdraft's C++ forward pass.

Independent of quickdraft: the file is read with ``gguf.GGUFReader`` and every weight is
dequantized with ``gguf.quants.dequantize``. The architectures follow llama.cpp's graphs
(llama, qwen2, gemma3, qwen3, smollm3, phi3, qwen3moe). The whole sequence is computed at once with a causal mask, no cache.

Keys and values are rounded to float16 before attention, because that is how quickdraft's
KV cache stores them (its documented default). As llama.cpp does (its KQ and KQV matmuls against
the F16 cache take F16 inputs), the roped queries and the normalised softmax probabilities are
rounded to float16 too, and GELU goes through ggml's F16 table (input and output rounded to
float16 for |x| < 10). Everything else is float64.

With ``act_quant=True`` the input of every matmul against a block-quantized weight is first
rounded to 8-bit blocks, the documented numerics of quickdraft's CPU kernels (and, up to the
scale's rounding, of llama.cpp's): blocks of 32 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL weights,
of 256 for the K-quants; q = round-half-even(x * 127 / max|x|) per block, and the scale is
llama.cpp's: float16(max|x| / 127) for 32-blocks (block_q8_0/q8_1 store it as FP16), float32
1 / (127 / max|x|) for 256-blocks (block_q8_K). Against Q4_1/Q5_1 weights (w = d q + m) the min
term uses block_q8_1's stored sum, float16((max|x| / 127) * sum q), as llama.cpp and quickdraft do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# llama.cpp's rope type per architecture: NEOX pairs i with i + n_rot/2, "normal" pairs 2i with 2i+1.
ROPE_NEOX = {"llama": False, "qwen2": True, "gemma3": True, "qwen3": True, "smollm3": False, "phi3": True, "qwen3moe": True,
             "qwen35": True}


@dataclass
class Hparams:
    arch: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    eps: float
    rope_base: float
    rope_scale: float  # multiplies positions on global layers (1 / rope.scaling.factor)
    rope_yarn: bool  # rope.scaling.type yarn
    rope_attn_factor: float  # rope.scaling.attn_factor
    n_ctx_orig: int  # rope.scaling.original_context_length (yarn's correction dims)
    swa: list  # per layer: True for sliding-window layers
    window: int
    attn_scale: float
    softcap: float
    n_expert_used: int  # qwen3moe: experts per token (0: a dense feed-forward)


def _meta(reader: GGUFReader) -> dict:
    out = {}
    for key, f in reader.fields.items():
        if key.startswith("tokenizer."):
            continue
        out[key] = f.contents()
    return out


def _hparams(meta: dict) -> Hparams:
    arch = meta["general.architecture"]

    def g(key, default=None):
        return meta.get(f"{arch}.{key}", default)

    E, H = int(g("embedding_length")), int(g("attention.head_count"))
    L = int(g("block_count"))
    head_dim = int(g("attention.key_length", E // H))
    # As llama.cpp reads them: no type means linear, the factor defaults to 1 (0 means 1 too).
    scaling = g("rope.scaling.type", "linear")
    factor = float(g("rope.scaling.factor", g("rope.scale_linear", 0.0))) or 1.0
    rope_scale = 1.0 / factor if scaling in ("linear", "yarn") else 1.0
    swa, window = [False] * L, 0
    attn_scale = 1.0 / math.sqrt(head_dim)
    eps = float(g("attention.layer_norm_rms_epsilon", 1e-5))
    if arch == "gemma3":
        eps = float(g("attention.layer_norm_rms_epsilon", 1e-6))
        window = int(g("attention.sliding_window", 0))
        if window:
            pattern = g("attention.sliding_window_pattern", 6)
            swa = [bool(b) for b in pattern] if isinstance(pattern, list) else [(il + 1) % pattern != 0 for il in range(L)]
        pre = g("attention.query_pre_attn_scalar", E / H if L == 62 else head_dim)
        attn_scale = 1.0 / math.sqrt(pre)
    return Hparams(arch=arch, n_embd=E, n_layer=L, n_head=H, n_head_kv=int(g("attention.head_count_kv", H)),
                   head_dim=head_dim, n_rot=int(g("rope.dimension_count", head_dim)), eps=eps,
                   rope_base=float(g("rope.freq_base", 10000.0)), rope_scale=rope_scale, rope_yarn=scaling == "yarn",
                   rope_attn_factor=float(g("rope.scaling.attn_factor", 1.0)),
                   n_ctx_orig=int(g("rope.scaling.original_context_length", g("context_length", 0))), swa=swa, window=window,
                   attn_scale=attn_scale, softcap=float(g("final_logit_softcapping", 0.0)),
                   n_expert_used=int(g("expert_used_count", 0)))


def _rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _yarn_corr_dims(n_rot: int, n_ctx_orig: int, base: float) -> tuple[float, float]:
    """The pairs between which YaRN ramps from the original to the scaled angle (betas 32 and 1)."""
    def dim(beta):
        return n_rot * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(base))
    return max(0.0, math.floor(dim(32.0))), min(n_rot - 1.0, math.ceil(dim(1.0)))


def _rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, scale: float, neox: bool,
          yarn_ctx: int = 0, mscale: float = 1.0, factors=None) -> np.ndarray:
    """x: [n, heads, head_dim]; rotates the first n_rot dims of each head by pos * scale * base^(-2i/n_rot).

    yarn_ctx > 0 (YaRN, llama.cpp's ext_factor 1 with that original context): pair i's angle is
    (1 - r_i) * the scaled angle + r_i * the unscaled one, r_i ramping from 1 to 0 between the
    correction dims, and the rotation is scaled by mscale * (1 + 0.1 ln(1 / scale)). Otherwise by mscale.
    factors: per-pair frequency divisors (LongRoPE), or None.
    """
    half = n_rot // 2
    extrap = np.outer(pos, base ** (-2.0 * np.arange(half) / n_rot))  # [n, half]
    if factors is not None:
        extrap = extrap / factors
    theta = extrap * scale
    if yarn_ctx:
        lo, hi = _yarn_corr_dims(n_rot, yarn_ctx, base)
        ramp = 1.0 - np.clip((np.arange(half) - lo) / max(0.001, hi - lo), 0.0, 1.0)
        theta = theta * (1.0 - ramp) + extrap * ramp
        mscale *= 1.0 + 0.1 * math.log(1.0 / scale)
    c, s = np.cos(theta)[:, None, :] * mscale, np.sin(theta)[:, None, :] * mscale
    x = x.copy()
    if neox:
        a, b = x[..., :half].copy(), x[..., half:n_rot].copy()
        x[..., :half], x[..., half:n_rot] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:n_rot:2].copy(), x[..., 1:n_rot:2].copy()
        x[..., 0:n_rot:2], x[..., 1:n_rot:2] = a * c - b * s, a * s + b * c
    return x


# Block length of the 8-bit activation rounding applied before matmuls with these weight types.
ACT_BLOCK = {"Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "Q8_0": 32, "IQ4_NL": 32,
             "Q2_K": 256, "Q3_K": 256, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256, "IQ4_XS": 256}


def _f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).astype(np.float16).astype(np.float64)


# Types whose blocks carry a min m (w = d q + m), at byte offset 2 of the block: block size.
MIN_BLOCK_BYTES = {"Q4_1": 20, "Q5_1": 24}


def _act_quant(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """(x rounded to 8-bit blocks, per block: block_q8_1's rounded sum minus the exact d * sum q)."""
    b = x.reshape(-1, block).astype(np.float32)
    amax = np.abs(b).max(axis=1, keepdims=True)
    iscale = np.divide(np.float32(127), amax, out=np.zeros_like(amax), where=amax > 0)
    q = np.clip(np.rint(b * iscale), -127, 127)  # np.rint rounds half to even
    if block == 32:
        d_exact = amax / np.float32(127)
        d = d_exact.astype(np.float16).astype(np.float32)
        qsum = q.sum(axis=1, keepdims=True)
        delta = (d_exact * qsum).astype(np.float16).astype(np.float64) - d.astype(np.float64) * qsum
    else:
        d = np.divide(np.float32(1), iscale, out=np.zeros_like(iscale), where=iscale > 0)
        delta = np.zeros_like(amax, dtype=np.float64)
    return (q * d).astype(np.float64).reshape(x.shape), delta.reshape(*x.shape[:-1], -1)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """ggml's GELU: tabulated at float16 inputs, with float16 outputs, for |x| < 10."""
    h = _f16(x)
    y = _f16(0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3))))
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y))


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class NumpyTransformer:
    """``NumpyTransformer(path).logits(ids)`` -> float64 [len(ids), n_vocab] for positions 0..n-1."""

    def __init__(self, path: str | Path, kv_dtype=np.float16, act_quant: bool = False, n_ctx: int = 256):
        reader = GGUFReader(str(path))
        self.hp = _hparams(_meta(reader))
        self.kv_dtype = kv_dtype
        self.w: dict[str, np.ndarray] = {}
        self.act_block = {t.name: ACT_BLOCK.get(t.tensor_type.name) if act_quant else None for t in reader.tensors}
        self.mins: dict[str, np.ndarray] = {}  # [rows, cols / 32] for Q4_1 / Q5_1
        for t in reader.tensors:
            shape = tuple(int(d) for d in reversed(t.shape))  # numpy order: [rows, cols]
            self.w[t.name] = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(shape)
            if act_quant and t.tensor_type.name in MIN_BLOCK_BYTES:
                raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1, MIN_BLOCK_BYTES[t.tensor_type.name])
                self.mins[t.name] = raw[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(*shape[:-1], -1)
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self._split_fused()
        # LongRoPE (phi3): long factors when the context, padded to 256 as llama.cpp pads it, is
        # longer than the original context length.
        padded = (n_ctx + 255) // 256 * 256
        self.rope_factors = self.w.get("rope_factors_long.weight" if padded > self.hp.n_ctx_orig
                                       else "rope_factors_short.weight")

    def _split_fused(self) -> None:
        """Phi-3's fused attn_qkv (q, k, v rows) and ffn_up (gate rows, then up rows), split by rows."""
        hp = self.hp
        q, kv = hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            parts = []
            if p + "attn_qkv.weight" in self.w:
                parts.append((p + "attn_qkv.weight", [("attn_q", 0, q), ("attn_k", q, q + kv), ("attn_v", q + kv, q + 2 * kv)]))
            if hp.arch == "phi3":
                f = self.w[p + "ffn_up.weight"].shape[0] // 2
                parts.append((p + "ffn_up.weight", [("ffn_gate", 0, f), ("ffn_up", f, 2 * f)]))
            for fused, pieces in parts:
                w, block, mins = self.w.pop(fused), self.act_block[fused], self.mins.pop(fused, None)
                for name, a, b in pieces:
                    self.w[p + name + ".weight"] = w[a:b]
                    self.act_block[p + name + ".weight"] = block
                    if mins is not None:
                        self.mins[p + name + ".weight"] = mins[a:b]

    def _mm(self, x: np.ndarray, name: str) -> np.ndarray:
        """x @ W.T, with x rounded to 8-bit blocks first when act_quant applies to W's type."""
        block = self.act_block[name]
        if block is None:
            return x @ self.w[name].T
        xq, delta = _act_quant(x, block)
        y = xq @ self.w[name].T
        return y + delta @ self.mins[name].T if name in self.mins else y

    def _attention(self, il: int, h: np.ndarray, pos: np.ndarray) -> np.ndarray:
        hp, w, p = self.hp, self.w, f"blk.{il}."
        n, hd, H, Hkv = h.shape[0], hp.head_dim, hp.n_head, hp.n_head_kv
        q, k, v = self._mm(h, p + "attn_q.weight"), self._mm(h, p + "attn_k.weight"), self._mm(h, p + "attn_v.weight")
        if p + "attn_q.bias" in w:
            q, k, v = q + w[p + "attn_q.bias"], k + w[p + "attn_k.bias"], v + w[p + "attn_v.bias"]
        q, k, v = q.reshape(n, H, hd), k.reshape(n, Hkv, hd), v.reshape(n, Hkv, hd)
        if p + "attn_q_norm.weight" in w:
            q = _rmsnorm(q, w[p + "attn_q_norm.weight"], hp.eps)
            k = _rmsnorm(k, w[p + "attn_k_norm.weight"], hp.eps)
        local = hp.swa[il]
        base, scale = (10000.0, 1.0) if local else (hp.rope_base, hp.rope_scale)
        neox = ROPE_NEOX[hp.arch]
        if not (hp.arch == "smollm3" and (il + 1) % 4 == 0):  # SmolLM3: no rope on every 4th layer
            yarn = hp.n_ctx_orig if hp.rope_yarn else 0
            q = _rope(q, pos, hp.n_rot, base, scale, neox, yarn, hp.rope_attn_factor, self.rope_factors)
            k = _rope(k, pos, hp.n_rot, base, scale, neox, yarn, hp.rope_attn_factor, self.rope_factors)
        attn_scale = hp.attn_scale
        if hp.arch == "phi3":  # its graph scales q itself, before the F16 rounding, then attends with scale 1
            q, attn_scale = q * hp.attn_scale, 1.0
        q = _f16(q)
        k = k.astype(self.kv_dtype).astype(np.float64)
        v = v.astype(self.kv_dtype).astype(np.float64)
        group = H // Hkv
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # query head i uses kv head i // group
        scores = np.einsum("ihd,jhd->hij", q, k) * attn_scale
        i, j = pos[:, None], pos[None, :]
        masked = j > i
        if local:
            masked |= (i - j) >= hp.window
        scores = np.where(masked[None], -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores = _f16(scores / scores.sum(axis=-1, keepdims=True))
        out = np.einsum("hij,jhd->ihd", scores, v).reshape(n, H * hd)
        return self._mm(out, p + "attn_output.weight")

    def _mm_expert(self, x: np.ndarray, name: str, e: int) -> np.ndarray:
        """x @ W[e].T for expert e of a 3-D weight, with the activation rounding of _mm."""
        block = self.act_block[name]
        if block is None:
            return x @ self.w[name][e].T
        xq, delta = _act_quant(x, block)
        y = xq @ self.w[name][e].T
        return y + delta @ self.mins[name][e].T if name in self.mins else y

    def _moe(self, il: int, h: np.ndarray) -> np.ndarray:
        """Softmax router, the top n_expert_used experts per row (weights renormalised to sum 1),
        SwiGLU experts, their outputs weighted and summed (llama.cpp's build_moe_ffn, qwen3moe)."""
        p, k = f"blk.{il}.", self.hp.n_expert_used
        logits = self._mm(h, p + "ffn_gate_inp.weight")
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = np.zeros_like(h)
        for r in range(h.shape[0]):
            sel = np.argsort(-probs[r], kind="stable")[:k]
            w = probs[r, sel] / max(probs[r, sel].sum(), 6.103515625e-5)
            x = h[r:r + 1]
            for e, we in zip(sel, w):
                g = self._mm_expert(x, p + "ffn_gate_exps.weight", e)
                u = self._mm_expert(x, p + "ffn_up_exps.weight", e)
                out[r] += we * self._mm_expert(_silu(g) * u, p + "ffn_down_exps.weight", e)[0]
        return out

    def _ffn(self, il: int, h: np.ndarray) -> np.ndarray:
        p = f"blk.{il}."
        if self.hp.n_expert_used:
            return self._moe(il, h)
        act = _gelu_tanh if self.hp.arch == "gemma3" else _silu
        return self._mm(act(self._mm(h, p + "ffn_gate.weight")) * self._mm(h, p + "ffn_up.weight"), p + "ffn_down.weight")

    def logits(self, ids) -> np.ndarray:
        hp, w = self.hp, self.w
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.arange(len(ids), dtype=np.float64)
        x = w["token_embd.weight"][ids]
        if hp.arch == "gemma3":
            x = x * math.sqrt(hp.n_embd)
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            a = self._attention(il, _rmsnorm(x, w[p + "attn_norm.weight"], hp.eps), pos)
            if hp.arch == "gemma3":
                a = _rmsnorm(a, w[p + "post_attention_norm.weight"], hp.eps)
            x = x + a
            f = self._ffn(il, _rmsnorm(x, w[p + "ffn_norm.weight"], hp.eps))
            if hp.arch == "gemma3":
                f = _rmsnorm(f, w[p + "post_ffw_norm.weight"], hp.eps)
            x = x + f
        x = _rmsnorm(x, w["output_norm.weight"], hp.eps)
        out = self._mm(x, "output.weight" if "output.weight" in w else "token_embd.weight")
        if hp.softcap > 0:
            out = hp.softcap * np.tanh(out / hp.softcap)
        return out


def oracle(path, **kw) -> NumpyTransformer:
    """The numpy reference for the file's architecture (qwen35 has its own, numpy_qwen35.py)."""
    if GGUFReader(str(path)).fields["general.architecture"].contents() == "qwen35":
        from reference.numpy_qwen35 import NumpyQwen35
        return NumpyQwen35(path, **kw)
    return NumpyTransformer(path, **kw)
