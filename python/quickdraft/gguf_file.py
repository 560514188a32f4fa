"""Read GGUF files: metadata, tensor table and dequantized tensors."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file. ``shape`` is numpy order (the shape ``tensor()`` returns);
    ``ne`` is GGML order (``ne[0]`` is the contiguous dimension)."""

    name: str
    shape: tuple[int, ...]
    ne: tuple[int, ...]
    type: str
    type_id: int
    offset: int
    nbytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n


class GGUFFile:
    """A memory-mapped, validated GGUF file. Use as a context manager or call ``close()``.

    Raises ``quickdraft.GGUFError`` (a ``ValueError``) naming the file, the field and the byte
    offset when the file is malformed.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._f = _core.GGUFFile(self.path)
        self._metadata: dict[str, Any] | None = None
        self._tensors: list[TensorInfo] | None = None

    @property
    def version(self) -> int:
        """GGUF format version (2 or 3)."""
        return self._f.version

    @property
    def alignment(self) -> int:
        """Alignment of tensor data in bytes."""
        return self._f.alignment

    @property
    def metadata(self) -> dict[str, Any]:
        """All metadata key/value pairs as Python values (arrays become lists)."""
        if self._metadata is None:
            self._metadata = self._f.metadata
        return self._metadata

    @property
    def tensors(self) -> list[TensorInfo]:
        """The tensor table in file order."""
        if self._tensors is None:
            self._tensors = [TensorInfo(n, tuple(s), tuple(ne), t, tid, off, nb) for (n, s, ne, t, tid, off, nb) in self._f.tensors]
        return self._tensors

    def tensor(self, name: str) -> np.ndarray:
        """The named tensor dequantized to a new float32 array of shape ``TensorInfo.shape``."""
        return self._f.tensor(name)

    def close(self) -> None:
        """Unmap the file. Arrays returned by ``tensor()`` stay valid (they are copies)."""
        self._f.close()

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        arch = self.metadata.get("general.architecture", "?")
        return f"GGUFFile({self.path!r}, version={self.version}, arch={arch!r}, tensors={len(self.tensors)})"
