"""Record llama.cpp's logits on tiny random models into tests/data/llamacpp_logits/<case>.npz.

Each case of CASES is a TinySpec (tests/fixtures/tiny_models.py, seeded: the same spec rebuilds the
same tensors) and a few token sequences. For each, this script writes the model, runs every
sequence through llama.cpp's C API in one batch (a fresh context per sequence, flash attention off,
one thread; as bench/layer_diff.py drives it) and stores what test_forward_llamacpp.py compares
quickdraft with, so that the test needs no llama.cpp binary:

    ids      int32   [n_seq][n_tok]          the token sequences
    logits   float32 [n_seq][n_tok][n_vocab] llama.cpp's logits at every position
    hidden, mtp_logits  (qwen35 files with MTP layers) the trunk's h_nextn [n_seq][n_tok][n_embd] and
                     the MTP head's logits [n_seq][n_tok][n_vocab], row p fed (token p, h of p - 1)
    meta     str     JSON: the spec, the sha256 of the tensors (the test checks its rebuilt model
                     against it), the llama.cpp build that computed them

Re-record (all cases, or the named ones) with the peer of bench/peer.py:
    python tests/reference/record_llamacpp_logits.py [--isa avx2] [case ...]
The shipped files were recorded with the AVX2-only build (bench/peer.py avx2), llama-cpp-python
0.3.36's vendor/llama.cpp.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from fixtures.tiny_models import TinySpec, write_tiny_model  # noqa: E402

OUT = TESTS / "data" / "llamacpp_logits"
N_SEQ, N_TOK = 4, 32  # sequences per case, tokens per sequence: 128 positions, so one near-tie flip leaves 99.2 %
IDS_SEED = 7
N_CTX = 256  # llama.cpp's context size; LongRoPE picks its factors by it (the test uses the same)

# The float and block-quantized types gguf.quants writes; K-quants would need llama-quantize.
WTYPES = ("F32", "F16", "Q8_0", "Q4_0")


def _base(arch: str) -> dict:
    """Several layers, GQA 2, and the family's distinctive shape."""
    spec = dict(arch=arch, n_layer=3, n_head=4, n_head_kv=2, n_vocab=64, n_embd=64, n_ff=96, seed=11)
    if arch == "qwen3":
        spec.update(head_dim=32)  # head_dim decoupled from n_embd / n_head (16), as in Qwen3
    if arch == "qwen3moe":  # 8 experts of 64, top 2 per token, over Qwen3's attention
        spec.update(head_dim=32, n_expert=8, n_expert_used=2, n_ff_exp=64)
    if arch == "smollm3":
        spec.update(n_layer=5)  # layer 3 is a no-rope layer, layers 0-2 and 4 rope
    if arch == "phi3":
        # Heads of 32 (1/sqrt(32) is no power of two: q's scaling must come before its rounding),
        # 3/4 of each rotated as Phi-4-mini, LongRoPE over an original context shorter than the
        # recording's (N_CTX: the long factors), a sliding window llama.cpp ignores for phi3.
        spec.update(n_embd=128, n_rot=24, longrope=True, rope_orig_ctx=128, rope_attn_factor=1.19,
                    sliding_window=8)
    if arch == "qwen35":  # 3 Gated DeltaNet layers and 1 gated attention layer; 4 v heads over 2 k heads
        spec.update(n_layer=4, head_dim=32, n_rot=8)
    return spec


CASES: dict[str, dict] = {}
for _arch in ("qwen3", "smollm3", "phi3", "qwen3moe", "qwen35"):
    for _w in WTYPES:
        CASES[f"{_arch}-{_w.lower()}"] = dict(_base(_arch), wtype=_w)

# Rope scaling of the existing families. YaRN as Qwen2.5 / Qwen3 ship it for long context (factor
# 4 over an original context whose correction dims ramp pairs 0-4 of 8), linear as Llama 2 long
# fine-tunes and Gemma 3's global layers (factor 8) do, with rope.scaling.attn_factor once.
ROPE_YARN = dict(rope_scaling="yarn", rope_factor=4.0, rope_orig_ctx=256)
GEMMA3_SWA = dict(sliding_window=6, swa_pattern=2)
for _arch, _w, _name, _extra in [
    ("qwen2", "F32", "yarn", ROPE_YARN), ("qwen2", "Q8_0", "yarn", ROPE_YARN), ("qwen3", "Q4_0", "yarn", ROPE_YARN),
    ("llama", "F32", "linear", dict(rope_scaling="linear", rope_factor=4.0)),
    ("llama", "Q8_0", "linear-attn", dict(rope_scaling="linear", rope_factor=2.0, rope_attn_factor=0.8)),
    ("gemma3", "Q8_0", "linear", dict(rope_scaling="linear", rope_factor=8.0, **GEMMA3_SWA)),
    ("gemma3", "F32", "yarn", dict(ROPE_YARN, **GEMMA3_SWA)),
    ("phi3", "Q8_0", "short", dict(rope_orig_ctx=512, n_ctx_train=1024)),  # LongRoPE's short factors
]:
    CASES[f"{_arch}-{_name}-{_w.lower()}"] = dict(_base(_arch), wtype=_w, **_extra)

# Qwen3.5 variants: an MTP block in the file (the trunk's logits must not change), layer kinds
# from attention.recurrent_layers with M-RoPE sections that leave a pair unrotated, equal k and v
# heads (Qwen3.5-0.8B's 16 / 16).
for _w, _name, _extra in [
    ("Q8_0", "mtp", dict(n_mtp=1)),
    ("F32", "sections", dict(n_layer=5, recurrent_layers=[True, False, True, True, False], rope_sections=[1, 1, 1, 1])),
    ("Q4_0", "heads", dict(ssm_n_k_heads=4, ssm_d_state=32, n_mtp=1, mtp_head_norm=False)),
]:
    CASES[f"qwen35-{_name}-{_w.lower()}"] = dict(_base("qwen35"), wtype=_w, **_extra)


def case_ids(spec: TinySpec) -> np.ndarray:
    return np.random.default_rng(IDS_SEED).integers(0, spec.n_vocab, (N_SEQ, N_TOK)).astype(np.int32)


def tensor_digest(path: Path) -> str:
    """sha256 over every tensor's name, type, shape and bytes (not the metadata)."""
    from gguf import GGUFReader

    h = hashlib.sha256()
    for t in GGUFReader(str(path)).tensors:
        h.update(f"{t.name}:{t.tensor_type.name}:{list(map(int, t.shape))};".encode())
        h.update(np.ascontiguousarray(t.data).tobytes())
    return h.hexdigest()


def spec_of(case: str) -> TinySpec:
    return TinySpec(**CASES[case])


def load(case: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """(ids, logits, meta) of a recorded case."""
    with np.load(OUT / f"{case}.npz", allow_pickle=False) as z:
        return z["ids"], z["logits"], json.loads(str(z["meta"]))


def load_mtp(case: str) -> tuple[np.ndarray, np.ndarray]:
    """(hidden, mtp_logits) of a recorded case with MTP layers (see _llama_mtp)."""
    with np.load(OUT / f"{case}.npz", allow_pickle=False) as z:
        return z["hidden"], z["mtp_logits"]


def _llama_logits(lib, path: Path, seqs: np.ndarray, n_vocab: int) -> np.ndarray:
    model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path}")
    out = np.zeros((*seqs.shape, n_vocab), dtype=np.float32)
    try:
        for s, ids in enumerate(seqs):
            params = lib.llama_context_default_params()
            params.n_ctx, params.n_batch, params.n_ubatch = N_CTX, N_CTX, N_CTX
            params.n_threads = params.n_threads_batch = 1
            params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
            ctx = lib.llama_init_from_model(model, params)
            batch = lib.llama_batch_init(len(ids), 0, 1)
            batch.n_tokens = len(ids)
            for j, tok in enumerate(ids):
                batch.token[j], batch.pos[j], batch.n_seq_id[j], batch.logits[j] = int(tok), j, 1, 1
                batch.seq_id[j][0] = 0
            if lib.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            ptr = lib.llama_get_logits(ctx)
            out[s] = np.ctypeslib.as_array(ptr, shape=(len(ids), n_vocab)).copy()
            lib.llama_batch_free(batch)
            lib.llama_free(ctx)
    finally:
        lib.llama_model_free(model)
    return out


def _llama_mtp(lib, path: Path, seqs: np.ndarray, n_vocab: int, n_embd: int) -> tuple[np.ndarray, np.ndarray]:
    """(h, mtp_logits): the trunk's h_nextn per position (llama_get_embeddings_nextn, llama-ext.h) and
    the MTP head's logits, as llama.cpp's draft-mtp drives it: an LLAMA_CONTEXT_TYPE_MTP context fed
    row p = (token p at position p, h of p - 1; zeros at p = 0) through llama_batch_ext /
    llama_process, every row's logits kept."""
    # llama-ext.h is a C++ staging header: its functions are exported under their mangled names.
    set_nextn = getattr(lib._lib, "_Z26llama_set_embeddings_nextnP13llama_contextbb")
    set_nextn.argtypes, set_nextn.restype = [ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool], None
    get_nextn = getattr(lib._lib, "_Z26llama_get_embeddings_nextnP13llama_context")
    get_nextn.argtypes, get_nextn.restype = [ctypes.c_void_p], ctypes.POINTER(ctypes.c_float)
    mparams = lib.llama_model_default_params()
    mparams.load_mtp = True
    model = lib.llama_model_load_from_file(str(path).encode(), mparams)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path} with its MTP layers")
    h_all = np.zeros((*seqs.shape, n_embd), dtype=np.float32)
    mtp = np.zeros((*seqs.shape, n_vocab), dtype=np.float32)

    def context(mtp_type: bool):
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = N_CTX, N_CTX, N_CTX
        params.n_threads = params.n_threads_batch = 1
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        if mtp_type:
            params.ctx_type = lib.LLAMA_CONTEXT_TYPE_MTP
        return lib.llama_init_from_model(model, params)

    try:
        for s, ids in enumerate(seqs):
            n = len(ids)
            ctx = context(False)
            set_nextn(ctx, True, False)
            batch = lib.llama_batch_init(n, 0, 1)
            batch.n_tokens = n
            for j, tok in enumerate(ids):
                batch.token[j], batch.pos[j], batch.n_seq_id[j], batch.logits[j] = int(tok), j, 1, 1
                batch.seq_id[j][0] = 0
            if lib.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            h_all[s] = np.ctypeslib.as_array(get_nextn(ctx), shape=(n, n_embd)).copy()
            lib.llama_batch_free(batch)
            lib.llama_free(ctx)

            dctx = context(True)
            h_prev = np.ascontiguousarray(np.concatenate([np.zeros((1, n_embd), np.float32), h_all[s][:-1]]))
            eb = lib.llama_batch_ext_init(dctx)
            for j, tok in enumerate(ids):
                idx = lib.llama_batch_ext_add_token(eb, 0, int(tok))
                pos = lib.llama_pos(j)
                lib.llama_batch_ext_set_pos(eb, idx, ctypes.byref(pos))
                row = h_prev[j].ctypes.data_as(ctypes.POINTER(ctypes.c_float))
                lib.llama_batch_ext_set_embd_token(eb, idx, lib.llama_embd(row, 1, n_embd))
                lib.llama_batch_ext_set_output_logits(eb, idx, True)
            if lib.llama_process(dctx, lib.LLAMA_PROCESS_TYPE_DECODE, eb) != 0:
                raise RuntimeError("llama_process (MTP) failed")
            for j in range(n):
                mtp[s, j] = np.ctypeslib.as_array(lib.llama_get_logits_ith(dctx, j), shape=(n_vocab,))
            lib.llama_batch_ext_free(eb)
            lib.llama_free(dctx)
    finally:
        lib.llama_model_free(model)
    return h_all, mtp


def record(case: str, lib, build: str) -> Path:
    spec = spec_of(case)
    ids = case_ids(spec)
    extra = {}
    with tempfile.TemporaryDirectory() as d:
        path = write_tiny_model(Path(d) / f"{case}.gguf", dataclasses.replace(spec, llamacpp_vocab=True))
        logits = _llama_logits(lib, path, ids, spec.n_vocab)
        if spec.n_mtp:
            extra["hidden"], extra["mtp_logits"] = _llama_mtp(lib, path, ids, spec.n_vocab, spec.n_embd)
        digest = tensor_digest(path)
    meta = {"case": case, "spec": CASES[case], "tensor_sha256": digest, "ids_seed": IDS_SEED, "llama_cpp": build}
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{case}.npz"
    np.savez_compressed(out, ids=ids, logits=logits, meta=np.array(json.dumps(meta, sort_keys=True)), **extra)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="cases to record (default: all)")
    ap.add_argument("--isa", default="avx2", help="peer build of bench/peer.py: avx2 (default) or native")
    args = ap.parse_args()
    sys.path.insert(0, str(TESTS.parent / "bench"))
    import peer

    isa = None if args.isa == "native" else args.isa
    lib = peer.libllama(isa)
    quiet = lib.llama_log_callback(lambda level, text, user: None)
    lib.llama_log_set(quiet, ctypes.c_void_p())
    lib.llama_backend_init()
    build = f"llama-cpp-python {peer.VERSION} vendor/llama.cpp, {args.isa} build, CPU, 1 thread, one batch per sequence"
    for case in args.cases or list(CASES):
        if case not in CASES:
            raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}")
        print(record(case, lib, build))


if __name__ == "__main__":
    main()
