"""A slice of a real GGUF model small enough to stay in the CPU's caches: its kernels timed bound by
the cores in any phase of the memory.

    python bench/slice_model.py                                # bench/out/qwen2.5-coder-1.5b-slice.gguf
    QD_FORCE_ISA=avx2 python bench/ab_builds.py /tmp/a /tmp/b --model bench/out/qwen2.5-coder-1.5b-slice.gguf

On a machine whose memory changes speed (this project's VM reads at about 35 or about 65 GB/s,
switching within seconds), a forward of the full model is bound by memory in the slow phase, so a
kernel change that saves work on the cores shows only in the fast one, and `bench/ab_builds.py`
may see none of it in a run. The slice keeps the model's real weights, types and layout, and so
its kernels and tile shapes, but only the first --layers layers, the first --ff rows of the FFN
(ffn_down: the first --ff columns of each row, a whole number of blocks) and the first --vocab
tokens of the embedding and the output layer. The default, one layer of the 1.5B with an FFN of
4608 and 1024 tokens, is 19 MB: with the activations it stays in a 32 MB L3.

The slice's logits mean nothing (its layers are cut); it times kernels, nothing else. It carries no
tokenizer: feed it token ids.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from quickdraft import models  # noqa: E402


def copy_fields(reader: GGUFReader, writer: GGUFWriter, overrides: dict) -> None:
    """Every metadata key but the file's own (GGUF.*), the architecture (the writer's), and the
    tokenizer's; those in overrides with their new values."""
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key.startswith("tokenizer.") or key == "general.architecture":
            continue
        kind = field.types[0]
        value = overrides.get(key, field.contents())
        if kind == GGUFValueType.ARRAY:
            writer.add_key_value(key, value, kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, kind)


def sliced(name: str, kind: GGMLQuantizationType, data: np.ndarray, cols: int, args) -> tuple[np.ndarray, int]:
    """The tensor cut to the slice (a quantized one as rows of bytes), and its column count."""
    if data.ndim == 1:  # norms and biases
        n = args.ff if name.endswith("ffn_gate.bias") or name.endswith("ffn_up.bias") else len(data)
        return data[:n], n
    rows = data
    if name in ("token_embd.weight", "output.weight"):
        rows = rows[: args.vocab]
    elif name.endswith("ffn_gate.weight") or name.endswith("ffn_up.weight"):
        rows = rows[: args.ff]
    elif name.endswith("ffn_down.weight"):
        block, size = GGML_QUANT_SIZES[kind]
        if args.ff % block:
            sys.exit(f"slice_model: --ff {args.ff} is not a whole number of {kind.name}'s {block}-weight blocks")
        rows = rows[:, : args.ff // block * size]
        cols = args.ff
    return np.ascontiguousarray(rows), cols


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="a model key or a GGUF path")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--ff", type=int, default=4608, help="FFN rows kept (a multiple of 256)")
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--out", default=None, help="default: bench/out/<model>-slice.gguf")
    args = ap.parse_args()
    src = models.resolve(args.model)
    stem = Path(args.model).name.removesuffix(".gguf")
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "out" / f"{stem}-slice.gguf"
    out.parent.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(str(out), arch)
    copy_fields(reader, writer, {f"{arch}.block_count": args.layers, f"{arch}.feed_forward_length": args.ff})
    kept = 0
    for t in reader.tensors:
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= args.layers:
            continue
        kind = GGMLQuantizationType(t.tensor_type)
        cols = int(t.shape[0])
        data, cols = sliced(t.name, kind, np.asarray(t.data), cols, args)
        if kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            writer.add_tensor(t.name, data)
        else:  # rows of bytes: the writer takes the shape in bytes
            writer.add_tensor(t.name, data, raw_dtype=kind)
        kept += data.nbytes
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{out}: {args.layers} layer(s) of {src.name}, FFN {args.ff}, vocab {args.vocab}: {kept / 1e6:.1f} MB of tensors")


if __name__ == "__main__":
    main()
