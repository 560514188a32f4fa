"""Where do quickdraft's numbers first differ from llama.cpp's? Layer by layer, tensor by tensor.

    python bench/layer_diff.py --model qwen2.5-coder-1.5b --case 0 --layers 3
    python bench/layer_diff.py --gguf my.gguf --ids 1,2,3,4 --layers 2

Runs one teacher case (or --ids) through llama.cpp's prompt path (one batch, flash attention off,
as ../shared/reference was made) with a graph callback that copies every intermediate tensor, and
through quickdraft's Context.trace_eval, then prints for each of quickdraft's intermediates the
largest difference from llama.cpp's tensor of the same name and the share of unequal elements.
The first unequal tensor names the operation to look at; with llama.cpp's orders (the AVX-512
kernels) every row but the last (n mod 4) of a Q4_K model should be equal.
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
from quickdraft import _core, models  # noqa: E402

REFERENCE = HERE.parent.parent / "shared" / "reference"


class GgmlTensor(ctypes.Structure):  # ggml.h struct ggml_tensor (llama-cpp-python 0.3.36)
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]


EvalCallback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.POINTER(GgmlTensor), ctypes.c_bool, ctypes.c_void_p)


def llama_trace(path: Path, ids: list[int], threads: int) -> dict[str, list[np.ndarray]]:
    """name -> the F32 tensors llama.cpp computed under that name, in graph order."""
    lib = peer.libllama()
    out: dict[str, list[np.ndarray]] = {}

    def on_tensor(tp, ask, _user):
        t = tp.contents
        if ask or t.type != 0 or not t.data:  # F32 results only
            return True
        ne, nb = list(t.ne), list(t.nb)
        span = sum((ne[i] - 1) * nb[i] for i in range(4)) + 4
        raw = np.frombuffer(ctypes.string_at(t.data, span), dtype=np.uint8)
        arr = np.lib.stride_tricks.as_strided(raw.view(np.float32) if span % 4 == 0 else raw, shape=ne[::-1],
                                              strides=nb[::-1]).copy()
        out.setdefault(t.name.decode(), []).append(arr)
        return True

    callback = EvalCallback(on_tensor)
    model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
    params = lib.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = 1024, 512, 512
    params.n_threads = params.n_threads_batch = threads
    params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.cb_eval = ctypes.cast(callback, type(params.cb_eval))
    ctx = lib.llama_init_from_model(model, params)
    batch = lib.llama_batch_init(512, 0, 1)
    batch.n_tokens = len(ids)
    for j, tok in enumerate(ids):
        batch.token[j], batch.pos[j], batch.n_seq_id[j], batch.logits[j] = tok, j, 1, 1
        batch.seq_id[j][0] = 0
    if lib.llama_decode(ctx, batch) != 0:
        raise RuntimeError("llama_decode failed")
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)
    lib.llama_model_free(model)
    return out


# quickdraft's trace name -> (llama.cpp's name, which of its tensors of that name)
NAMES = {"embd": ("inp_embd", 0), "Qrope": ("Qcur", -1), "Krope": ("Kcur", -1), "ffn_act": ("ffn_swiglu", 0)}


def llama_tensor(ll: dict, name: str, il: int, n: int) -> np.ndarray | None:
    lname, which = NAMES.get(name, (name, 0))
    if name == "ffn_act" and f"ffn_swiglu-{il}" not in ll:
        lname = "ffn_geglu"
    cands = ll.get(f"{lname}-{il}" if il >= 0 else lname) or ll.get("embd" if name == "embd" else "")
    if not cands:
        return None
    if name in ("Qcur", "Kcur", "Vcur"):  # after the bias, before the reshape: the last 2-D one
        cands = [a for a in cands if a.shape[0] == 1 and a.shape[1] == 1] or cands
        which = -1
    return cands[which].reshape(n, -1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="a known model key")
    ap.add_argument("--gguf", default=None, help="another GGUF file instead of --model")
    ap.add_argument("--case", type=int, default=0, help="teacher case of --model")
    ap.add_argument("--ids", default=None, help="comma-separated token ids instead of a teacher case")
    ap.add_argument("--layers", type=int, default=2, help="layers to print")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    path = Path(args.gguf) if args.gguf else models.fetch(args.model)
    if args.ids:
        ids = [int(t) for t in args.ids.split(",")]
    else:
        ids = json.loads((REFERENCE / args.model / "teacher.json").read_text())["cases"][args.case]["ids"][:128]
    n = len(ids)
    ll = llama_trace(path, ids, args.threads)
    ctx = _core.Context(_core.LoadedModel(str(path)), 1024, args.threads)
    logits, items = ctx.trace_eval(ids)
    print(f"{path.name}: {n} tokens, isa {quickdraft._core.current_isa()}")
    for name, il, ours in items:
        if il >= args.layers:
            continue
        ref = llama_tensor(ll, name, il, n)
        if ref is None or ref.shape != ours.shape:
            print(f"{name:12s} {il:3d}  (no llama.cpp tensor of this shape)")
            continue
        diff = np.abs(ours - ref)
        rows = np.flatnonzero((ours != ref).any(axis=1))
        print(f"{name:12s} {il:3d}  max |diff| {diff.max():9.3g}  unequal {np.mean(ours != ref):7.2%}  "
              f"rows {rows[:8].tolist()}{' ...' if len(rows) > 8 else ''}")


if __name__ == "__main__":
    main()
