"""Reference Qwen3.5 (hybrid Gated DeltaNet) forward pass and MTP head in numpy float64.

Independent of quickdraft, like numpy_transformer.py (whose weight reading, matmul rounding and
helpers it reuses): written from llama.cpp's src/models/qwen35.cpp and delta-net-base.cpp and
ggml's CPU ops (ssm_conv, gated_delta_net, rope_multi in IMROPE mode). The recurrence is the
textbook sequential one: per position and v head, with S the head's [S_v][S_k] state,
    S *= exp(g);  d = (v - S k) * beta;  S += d k^T;  o = S q / sqrt(S_k)
Keys and values of the attention layers are rounded to float16 as the KV cache stores them.
"""

from __future__ import annotations

import math

import numpy as np

from reference.numpy_transformer import NumpyTransformer, _f16, _rmsnorm, _rope, _silu


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def _l2norm(x, eps):
    n = x.shape[-1]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps / n) / math.sqrt(n)


class NumpyQwen35(NumpyTransformer):
    """``NumpyQwen35(path).logits(ids)``; ``hidden(ids)``; ``mtp_logits(ids, h)`` for the MTP head."""

    def __init__(self, path, **kw):
        super().__init__(path, **kw)
        from gguf import GGUFReader

        meta = {k: f.contents() for k, f in GGUFReader(str(path)).fields.items() if k.startswith("qwen35.")}
        g = lambda k, d=None: meta.get(f"qwen35.{k}", d)  # noqa: E731
        self.n_mtp = int(g("nextn_predict_layers", 0))
        self.n_trunk = self.hp.n_layer - self.n_mtp
        self.S, self.H, self.Hk = int(g("ssm.state_size")), int(g("ssm.time_step_rank")), int(g("ssm.group_count"))
        self.K = int(g("ssm.conv_kernel"))
        flags = g("attention.recurrent_layers")
        if flags is not None:
            self.recurrent = [bool(f) for f in flags][: self.n_trunk]
        else:
            interval = int(g("full_attention_interval", 4))
            self.recurrent = [(il + 1) % interval != 0 for il in range(self.n_trunk)]
        sec = [int(x) for x in g("rope.dimension_sections")] + [0] * 4
        total = sum(sec[:4])
        half = self.hp.n_rot // 2
        self.static_pairs = [j for j in range(half) if not (
            ((j % total) % 3 == 1 and j % total < 3 * sec[1]) or ((j % total) % 3 == 2 and j % total < 3 * sec[2])
            or ((j % total) % 3 == 0 and j % total < 3 * sec[0]))]

    def _split_fused(self) -> None:
        """Nothing is fused: attn_qkv is the Gated DeltaNet's input projection, used whole."""

    def _rope35(self, x, pos):
        hp = self.hp
        yarn = hp.n_ctx_orig if hp.rope_yarn else 0
        y = _rope(x, pos, hp.n_rot, hp.rope_base, hp.rope_scale, True, yarn, hp.rope_attn_factor)
        mscale = hp.rope_attn_factor * ((1.0 + 0.1 * math.log(1.0 / hp.rope_scale)) if yarn else 1.0)
        half = hp.n_rot // 2
        for j in self.static_pairs:  # the 4th section's position is 0 for text: angle 0
            y[..., j], y[..., j + half] = x[..., j] * mscale, x[..., j + half] * mscale
        return y

    def _gated_attention(self, p, h, pos):
        hp, w = self.hp, self.w
        n, hd, H, Hkv = h.shape[0], hp.head_dim, hp.n_head, hp.n_head_kv
        qg = self._mm(h, p + "attn_q.weight").reshape(n, H, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(n, H * hd)
        k = self._mm(h, p + "attn_k.weight").reshape(n, Hkv, hd)
        v = self._mm(h, p + "attn_v.weight").reshape(n, Hkv, hd)
        q = self._rope35(_rmsnorm(q, w[p + "attn_q_norm.weight"], hp.eps), pos)
        k = self._rope35(_rmsnorm(k, w[p + "attn_k_norm.weight"], hp.eps), pos)
        q, k, v = _f16(q), _f16(k), _f16(v)
        group = H // Hkv
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, k) / math.sqrt(hd)
        scores = np.where((pos[None, :] > pos[:, None])[None], -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores = _f16(scores / scores.sum(axis=-1, keepdims=True))
        out = np.einsum("hij,jhd->ihd", scores, v).reshape(n, H * hd) * _sigmoid(gate)
        return self._mm(out, p + "attn_output.weight")

    def _linear_attention(self, p, h):
        w, eps = self.w, self.hp.eps
        n, S, H, Hk, K = h.shape[0], self.S, self.H, self.Hk, self.K
        mix = self._mm(h, p + "attn_qkv.weight")  # [n][C]
        z = self._mm(h, p + "attn_gate.weight")
        beta = _sigmoid(self._mm(h, p + "ssm_beta.weight"))
        g = _softplus(self._mm(h, p + "ssm_alpha.weight") + w[p + "ssm_dt.bias"]) * w[p + "ssm_a"]
        taps = w[p + "ssm_conv1d.weight"]  # [C][K]
        padded = np.concatenate([np.zeros((K - 1, mix.shape[1])), mix])
        conv = _silu(sum(padded[k:k + n] * taps[:, k] for k in range(K)))
        kd = Hk * S
        q = _l2norm(conv[:, :kd].reshape(n, Hk, S), eps)
        k = _l2norm(conv[:, kd:2 * kd].reshape(n, Hk, S), eps)
        v = conv[:, 2 * kd:].reshape(n, H, S)
        state = np.zeros((H, S, S))  # [head][v index][k index]
        out = np.zeros((n, H, S))
        for t in range(n):
            for hh in range(H):
                qh, kh = q[t, hh % Hk], k[t, hh % Hk]  # v head hh reads q / k head hh % Hk (ggml's broadcast)
                st = state[hh] * math.exp(g[t, hh])
                d = (v[t, hh] - st @ kh) * beta[t, hh]
                st = st + np.outer(d, kh)
                state[hh] = st
                out[t, hh] = st @ qh / math.sqrt(S)
        o = _rmsnorm(out, w[p + "ssm_norm.weight"], eps).reshape(n, H * S) * _silu(z)
        return self._mm(o, p + "ssm_out.weight")

    def _block(self, il, x, pos, recurrent):
        w, p, eps = self.w, f"blk.{il}.", self.hp.eps
        h = _rmsnorm(x, w[p + "attn_norm.weight"], eps)
        x = x + (self._linear_attention(p, h) if recurrent else self._gated_attention(p, h, pos))
        return x + self._ffn(il, _rmsnorm(x, w[p + "post_attention_norm.weight"], eps))

    def hidden(self, ids) -> np.ndarray:
        """The trunk's output-normed final hidden states [n][n_embd] (llama.cpp's h_nextn)."""
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.arange(len(ids), dtype=np.float64)
        x = self.w["token_embd.weight"][ids]
        for il in range(self.n_trunk):
            x = self._block(il, x, pos, self.recurrent[il])
        return _rmsnorm(x, self.w["output_norm.weight"], self.hp.eps)

    def _head(self, h):
        return self._mm(h, "output.weight" if "output.weight" in self.w else "token_embd.weight")

    def logits(self, ids) -> np.ndarray:
        return self._head(self.hidden(ids))

    def mtp_logits(self, ids, h_prev) -> tuple[np.ndarray, np.ndarray]:
        """The MTP block over rows (ids[p], h_prev[p]) at positions 0..n-1, causal: (logits, its h_nextn).

        h_prev[p] is the trunk's hidden state of position p - 1 (zeros for p = 0, as llama.cpp's
        draft-mtp pairs the first token), so row p predicts the token at p + 2."""
        w, eps, il = self.w, self.hp.eps, self.n_trunk
        p = f"blk.{il}."
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.arange(len(ids), dtype=np.float64)
        emb = w.get(p + "nextn.embed_tokens.weight", w["token_embd.weight"])[ids]
        cat = np.concatenate([_rmsnorm(emb, w[p + "nextn.enorm.weight"], eps),
                              _rmsnorm(h_prev, w[p + "nextn.hnorm.weight"], eps)], axis=1)
        x = self._block(il, self._mm(cat, p + "nextn.eh_proj.weight"), pos, False)
        hn = _rmsnorm(x, w.get(p + "nextn.shared_head_norm.weight", w["output_norm.weight"]), eps)
        head = p + "nextn.shared_head_head.weight"
        return (self._mm(hn, head) if head in w else self._head(hn)), hn
