"""How exactly can anyone reproduce ../shared/reference/<model>/teacher.json? llama.cpp against itself.

    python bench/teacher_floor.py                 # all four models (about 2 minutes on 2 cores)
    python bench/teacher_floor.py --models smollm2-135m --batches 1,512
    python bench/teacher_floor.py --gguf my-q5_k_m.gguf --cases qwen2.5-coder-1.5b   # any file

The reference holds llama.cpp's top-5 next tokens for every position of each case, computed with
the whole case in one batch (its prompt path). This bench replays the same cases through
llama.cpp's C API on this machine, once per batch size (--batches; 1 = one token per llama_decode,
its decode path), and through quickdraft, and prints for each the teacher-forced top-1 agreement
with the reference and the mean |d log p| of the reference's top token: how llama.cpp's own decode
path fares against its own prompt path, beside quickdraft, whose AVX-512 kernels follow the prompt
path's orders (100 % on the four models). quickdraft gives the same logits for a position at every
batch size (tests/test_forward_invariance.py), so it has one row.

--gguf checks other files the same way (other quantizations of a model, say): the token ids of
--cases's teacher.json (same tokenizer), with llama.cpp's prompt path on that file as the reference.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import peer  # noqa: E402

import quickdraft  # noqa: E402
from quickdraft import models  # noqa: E402

REFERENCE = HERE.parent.parent / "shared" / "reference"
DEFAULT_MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def agreement(cases: list[dict], logits_of) -> tuple[int, int, float]:
    """(agreeing positions, positions, mean |d log p| of the reference's top-1 token)."""
    agree, total, dlogp = 0, 0, []
    for case in cases:
        lp = log_softmax(logits_of(case["ids"]))
        for i, (top5, top5_lp) in enumerate(zip(case["top5_ids"], case["top5_logprobs"])):
            total += 1
            agree += int(lp[i].argmax()) == top5[0]
            dlogp.append(abs(lp[i, top5[0]] - top5_lp[0]))
    return agree, total, float(np.mean(dlogp))


class LlamaCpp:
    """One llama.cpp context evaluating a case in batches of n_batch tokens, logits for every token."""

    def __init__(self, lib, path: Path, threads: int, n_batch: int, flash_attn: bool, n_ctx: int = 1024):
        self.lib, self.n_batch = lib, n_batch
        self.model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_batch, n_batch
        params.n_threads = params.n_threads_batch = threads
        # llama-cpp-python's Llama (which made the reference) turns flash attention off by default;
        # the C API's default is "auto", on for the CPU.
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self.ctx = lib.llama_init_from_model(self.model, params)
        self.n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.model))
        self.batch = lib.llama_batch_init(n_batch, 0, 1)

    def logits(self, ids: list[int]) -> np.ndarray:
        lib, b = self.lib, self.batch
        lib.llama_memory_clear(lib.llama_get_memory(self.ctx), True)
        out = np.empty((len(ids), self.n_vocab), dtype=np.float32)
        for start in range(0, len(ids), self.n_batch):
            chunk = ids[start:start + self.n_batch]
            b.n_tokens = len(chunk)
            for j, tok in enumerate(chunk):
                b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = tok, start + j, 1, 1
                b.seq_id[j][0] = 0
            if lib.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
            for j in range(len(chunk)):
                row = lib.llama_get_logits_ith(self.ctx, j)
                out[start + j] = np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)),
                                                       shape=(self.n_vocab,))
        return out

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)
        self.lib.llama_model_free(self.model)


def llama_reference(lib, path: Path, cases: list[dict], threads: int) -> list[dict]:
    """cases re-scored by llama.cpp's prompt path (one batch, flash attention off) on `path`."""
    llama = LlamaCpp(lib, path, threads, 512, False)
    out = []
    for case in cases:
        lp = log_softmax(llama.logits(case["ids"]))
        top5 = np.argsort(-lp, axis=1, kind="stable")[:, :5]
        out.append({"ids": case["ids"], "top5_ids": top5.tolist(),
                    "top5_logprobs": np.take_along_axis(lp, top5, axis=1).tolist()})
    llama.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batches", default="512,16,8,3,1", help="llama.cpp batch sizes (tokens per llama_decode)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flash-attn", default="off", help="off, on, or both: llama.cpp with and without it")
    ap.add_argument("--gguf", nargs="*", default=[], help="other GGUF files, checked instead of --models")
    ap.add_argument("--cases", default="qwen2.5-coder-1.5b", help="with --gguf: whose teacher.json ids to use")
    args = ap.parse_args()
    lib = peer.libllama()
    lib.llama_backend_init()
    quiet = lib.llama_log_callback(lambda level, text, user_data: None)
    lib.llama_log_set(quiet, None)
    batches = [int(b) for b in args.batches.split(",")]
    targets = [(Path(f).name, Path(f)) for f in args.gguf] or [(k, None) for k in args.models.split(",")]
    width = max(20, *(len(k) + 2 for k, _ in targets))
    header = f"{'model':<{width}}{'engine':<26}{'top-1 agreement':>18}{'mean |dlogp|':>14}"
    print(header)
    print("-" * len(header))
    results = {}
    for key, path in targets:
        if path is None:
            cases = json.loads((REFERENCE / key / "teacher.json").read_text())["cases"]
            path = models.cached_path(key) if models.is_cached(key) else models.fetch(key)
        else:
            cases = llama_reference(lib, path, json.loads((REFERENCE / args.cases / "teacher.json").read_text())["cases"],
                                    args.threads)
        rows = []
        for fa in {"off": [False], "on": [True], "both": [False, True]}[args.flash_attn]:
            for n_batch in batches:
                llama = LlamaCpp(lib, path, args.threads, n_batch, fa)
                rows.append((f"llama.cpp batch {n_batch}{' FA' if fa else ''}", *agreement(cases, llama.logits)))
                llama.close()
        ours = quickdraft.Model(path, n_ctx=1024, threads=args.threads)

        def ours_logits(ids):
            ours.reset()
            return ours.eval(ids)

        rows.append(("quickdraft (any batch)", *agreement(cases, ours_logits)))
        for name, agree, total, d in rows:
            print(f"{key:<{width}}{name:<26}{f'{agree}/{total} = {agree / total:.1%}':>18}{d:>14.4f}")
        results[key] = [{"engine": n, "agree": a, "total": t, "mean_abs_dlogp": d} for n, a, t, d in rows]
    out = HERE / "out" / "teacher_floor.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
