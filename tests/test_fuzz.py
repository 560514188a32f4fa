"""Fuzzing the GGUF reader: mutated files are opened in a child process (so a crash is seen, not
suffered) under a 2 GB address-space limit and a timeout. Each file must open, with metadata and
every dequantizable tensor readable, or raise GGUFError naming the file and the byte offset.
QD_FUZZ_ITERATIONS (default 2000) sets the number of mutated files; the seeds are fixed."""

from __future__ import annotations

import math
import os
import random
import signal
import struct
import subprocess
import sys
from pathlib import Path

import gguf
import pytest

import quickdraft
from quickdraft import GGUFFile
from fixtures.hostile import Built, mutate, write_corpus
from fixtures.tiny_models import TinySpec, write_tiny_model

ITERATIONS = int(os.environ.get("QD_FUZZ_ITERATIONS", "2000"))
SEEDS = (0, 1)  # fixed: the corpus is the same on every run
MEMORY_LIMIT = 2 << 30

# The child reads paths from stdin; for each it prints "BEGIN <path>" and then one status line,
# so the parent knows which file was being read if the child dies.
CHILD = r"""
import sys
from quickdraft import GGUFError, GGUFFile, _core

for line in sys.stdin:
    path = line.rstrip("\n")
    print("BEGIN", path, flush=True)
    try:
        f = GGUFFile(path)
    except GGUFError as e:
        msg = str(e)
        ok = msg.startswith(path + ": ") and "(at byte " in msg
        print("REJECTED" if ok else "BADMSG " + repr(msg), flush=True)
        continue
    except BaseException as e:
        print("UNEXPECTED " + repr(e)[:500], flush=True)
        continue
    try:
        f.metadata
        for t in f.tensors:
            if _core.type_info(t.type_id)[3]:  # dequantizable by this build
                a = f.tensor(t.name)
                assert a.shape == t.shape and str(a.dtype) == "float32", (t, a.shape, a.dtype)
        print("OPENED", flush=True)
    except BaseException as e:
        print("UNEXPECTED " + repr(e)[:500], flush=True)
    finally:
        f.close()
"""


def _limit_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def replay(paths: list[Path], workdir: Path, timeout: float = 300, child_code: str = CHILD) -> tuple[dict[str, str], list[str]]:
    """Open every path in child processes. Returns ({path: status}, [crash or hang reports]);
    after a crash a new child carries on with the files after the one that killed it."""
    pkg_root = os.path.dirname(os.path.dirname(quickdraft.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_root, os.environ.get("PYTHONPATH", "")]))
    results: dict[str, str] = {}
    failures: list[str] = []
    remaining = [str(p) for p in paths]
    while remaining and len(failures) < 10:
        (workdir / "in.txt").write_text("\n".join(remaining) + "\n")
        with open(workdir / "in.txt") as fin, open(workdir / "out.txt", "w") as fout, open(workdir / "err.txt", "w") as ferr:
            child = subprocess.Popen([sys.executable, "-c", child_code], stdin=fin, stdout=fout, stderr=ferr, env=env,
                                     preexec_fn=_limit_memory)
            try:
                rc = child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                rc = None
        current = None
        for line in (workdir / "out.txt").read_text().splitlines():
            if line.startswith("BEGIN "):
                current = line[len("BEGIN "):]
            elif current is not None:
                results[current] = line
                current = None
        if rc == 0 and current is None:
            break
        why = f"hung for {timeout} s" if rc is None else (
            f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with {rc}")
        stderr = (workdir / "err.txt").read_text()[-1500:]
        failures.append(f"child {why} while reading {current}\n{stderr}")
        if current is None or current not in remaining:
            break
        remaining = remaining[remaining.index(current) + 1:]
    return results, failures


@pytest.fixture(scope="module")
def fuzz_results(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    paths = []
    for seed in SEEDS:
        paths += write_corpus(base / f"corpus{seed}", ITERATIONS // len(SEEDS), seed)
    paths = list(dict.fromkeys(paths))
    results, failures = replay(paths, base)
    return paths, results, failures


def test_fuzz_corpus_never_crashes_or_hangs(fuzz_results):
    paths, results, failures = fuzz_results
    assert not failures, "\n\n".join(failures)
    assert len(results) == len(paths)


def test_fuzz_corpus_opens_or_raises_gguf_error_with_location(fuzz_results):
    _, results, _ = fuzz_results
    bad = [f"{p}: {s}" for p, s in results.items() if s not in ("OPENED", "REJECTED")]
    assert not bad, f"{len(bad)} files gave something other than GGUFError with a location:\n" + "\n".join(bad[:20])


def test_fuzz_corpus_exercises_both_outcomes(fuzz_results):
    """The seeds open, the catalogue cases are refused, and mutations land on both sides."""
    _, results, _ = fuzz_results
    by_name = {Path(p).name: s for p, s in results.items()}
    assert by_name["seed0.gguf"] == by_name["seed1.gguf"] == "OPENED"
    assert all(s == "REJECTED" for n, s in by_name.items() if n.startswith("case_"))
    mutated = [s for n, s in by_name.items() if n.startswith("mut")]
    assert len(mutated) == ITERATIONS // len(SEEDS) * len(SEEDS)
    assert mutated.count("OPENED") >= len(mutated) // 50 and mutated.count("REJECTED") >= len(mutated) // 2


def real_header(path: Path) -> Built:
    """The header of a real model file (everything before the tensor data), with the offset of
    every 32- and 64-bit integer field (lengths, counts, types, dims, offsets) located by the
    gguf package."""
    ref = gguf.GGUFReader(str(path))
    at = {}
    for fld in [*ref.fields.values(), *(t.field for t in ref.tensors)]:
        pos = fld.offset
        for i, part in enumerate(fld.parts):
            if part.size == 1 and part.nbytes in (4, 8):
                at[f"{fld.name}.{i}"] = pos
            pos += part.nbytes
    with open(path, "rb") as f:
        return Built(bytearray(f.read(ref.data_offset)), at)


@pytest.mark.real
def test_real_model_header_mutations(model_path, tmp_path):
    """Mutations and truncations of a real header (49k-token vocabulary, merges, 272 tensors)."""
    b = real_header(model_path("smollm2-135m"))
    rng = random.Random(7)
    files = {f"mut{i}": mutate(b, rng) for i in range(40)}
    files.update({f"cut{i}": bytes(b.data[:rng.randrange(len(b.data))]) for i in range(10)})
    paths = []
    for name, data in files.items():
        paths.append(tmp_path / f"{name}.gguf")
        paths[-1].write_bytes(data)
    results, failures = replay(paths, tmp_path)
    assert not failures, "\n\n".join(failures)
    bad = [f"{p}: {s}" for p, s in results.items() if s not in ("OPENED", "REJECTED")]
    assert not bad, "\n".join(bad[:20])
    for p in paths:  # 1.8 MB each: do not leave them in pytest's kept temp dirs
        p.unlink()


# Loads each file as a model and evaluates three tokens; any quickdraft error is a refusal.
MODEL_CHILD = r"""
import sys
import quickdraft
refusals = (quickdraft.GGUFError, quickdraft.UnsupportedError, quickdraft.QuickdraftError)
for line in sys.stdin:
    path = line.rstrip("\n")
    print("BEGIN", path, flush=True)
    try:
        m = quickdraft.Model(path, n_ctx=16, threads=1)
        logits = m.eval([t % m.n_vocab for t in (1, 2, 3)])
        assert logits.shape == (3, m.n_vocab), logits.shape
        print("OPENED", flush=True)
    except refusals:
        print("REJECTED", flush=True)
    except BaseException as e:
        print("UNEXPECTED " + repr(e)[:500], flush=True)
"""

INT_EDGES = [0, 1, 2, 3, 7, 31, 33, 63, 65, 2**15, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1]
FLOAT_EDGES = [0.0, -0.0, -1.0, 1e-45, 3e38, math.inf, -math.inf, math.nan]


def value_targets(path: Path) -> list[tuple[int, int, str]]:
    """(offset, bytes, numpy kind) of every scalar metadata value and every tensor dimension."""
    ref = gguf.GGUFReader(str(path))
    targets = []
    for fld in ref.fields.values():
        pos = fld.offset
        for i, part in enumerate(fld.parts):
            if i in fld.data and part.size == 1 and not fld.name.startswith("GGUF."):
                targets.append((pos, part.nbytes, part.dtype.kind))
            pos += part.nbytes
    for t in ref.tensors:
        pos = t.field.offset + sum(p.nbytes for p in t.field.parts[:3])  # name length, name, n_dims
        targets += [(pos + 8 * d, 8, "u") for d in range(len(t.shape))]
    return targets


def mutate_values(data: bytes, targets: list[tuple[int, int, str]], rng: random.Random) -> bytes:
    """Set one or two hyperparameters or tensor dimensions to edge values or off-by-one."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 2)):
        pos, n, kind = rng.choice(targets)
        if kind == "f":
            out[pos:pos + n] = struct.pack("<f" if n == 4 else "<d", rng.choice(FLOAT_EDGES))
        else:
            old = int.from_bytes(out[pos:pos + n], "little")
            value = rng.choice(INT_EDGES + [old + d for d in (-2, -1, 1, 2)] + [old * 2])
            out[pos:pos + n] = (value % (1 << (8 * n))).to_bytes(n, "little")
    return bytes(out)


def test_tiny_model_mutations_load_or_refuse(tmp_path):
    """Hyperparameters and tensor dimensions of tiny models set to edge values: Model() plus an
    eval must work or raise a quickdraft error, never crash, hang or run out of memory."""
    seeds = []
    for arch, wtype in (("llama", "Q8_0"), ("qwen2", "Q4_0"), ("gemma3", "F16")):
        spec = TinySpec(arch=arch, wtype=wtype, n_layer=1, n_embd=32, n_ff=64, n_vocab=40,
                        sliding_window=4 if arch == "gemma3" else 0)
        path = write_tiny_model(tmp_path / f"seed_{arch}.gguf", spec)
        seeds.append((path.read_bytes(), value_targets(path)))
    rng = random.Random(3)
    paths = [tmp_path / f"seed_{arch}.gguf" for arch in ("llama", "qwen2", "gemma3")]
    for i in range(max(ITERATIONS // 6, 30)):
        data, targets = seeds[i % len(seeds)]
        paths.append(tmp_path / f"mut{i:05d}.gguf")
        paths[-1].write_bytes(mutate_values(data, targets, rng))
    results, failures = replay(paths, tmp_path, child_code=MODEL_CHILD)
    assert not failures, "\n\n".join(failures)
    bad = [f"{p}: {s}" for p, s in results.items() if s not in ("OPENED", "REJECTED")]
    assert not bad, "\n".join(bad[:20])
    assert [results[str(p)] for p in paths[:3]] == ["OPENED"] * 3


def test_accepted_mutants_read_like_gguf_package(fuzz_results):
    """Differential check: every mutated file we accept, the gguf package reads to the same table."""
    _, results, _ = fuzz_results
    accepted = [p for p, s in results.items() if s == "OPENED" and Path(p).name.startswith("mut")]
    mismatches = []
    for p in accepted:
        try:
            ref = gguf.GGUFReader(p)
        except Exception as e:  # noqa: BLE001 - any refusal by the oracle is a finding
            mismatches.append(f"{p}: gguf package refuses it: {e!r}")
            continue
        with GGUFFile(p) as f:
            ours = [(t.name, t.ne, t.type, f._f.data_offset + t.offset) for t in f.tensors]
            keys = list(f.metadata)
        theirs = [(t.name, tuple(int(x) for x in t.shape), t.tensor_type.name, int(t.data_offset)) for t in ref.tensors]
        ref_keys = [k for k in ref.fields if not k.startswith("GGUF.")]
        if ours != theirs or keys != ref_keys:
            mismatches.append(f"{p}: ours {ours} {keys} != gguf {theirs} {ref_keys}")
    assert not mismatches, "\n".join(mismatches[:10])


# A stand-in child that dies on files named crash*.gguf and hangs on hang*.gguf.
FAULTY_CHILD = r"""
import ctypes, os, sys, time
for line in sys.stdin:
    path = line.rstrip("\n")
    print("BEGIN", path, flush=True)
    name = os.path.basename(path)
    if name.startswith("crash"):
        ctypes.string_at(0)
    if name.startswith("hang"):
        time.sleep(3600)
    print("REJECTED", flush=True)
"""


def test_replay_names_the_file_that_kills_or_hangs_the_child(tmp_path):
    names = ["a", "crash1", "b", "crash2", "c", "hang", "d"]
    paths = [tmp_path / f"{n}.gguf" for n in names]
    results, failures = replay(paths, tmp_path, timeout=10, child_code=FAULTY_CHILD)
    assert set(results) == {str(tmp_path / f"{n}.gguf") for n in "abcd"}
    assert len(failures) == 3
    assert "SIGSEGV while reading " + str(paths[1]) in failures[0]
    assert "SIGSEGV while reading " + str(paths[3]) in failures[1]
    assert "hung for 10 s while reading " + str(paths[5]) in failures[2]
