"""quickdraft: exact speculative decoding for quantized GGUF models on the CPU."""

from ._core import GGUFError, IncompatibleModelsError, QuickdraftError, UnsupportedError
from .engine import Completion, Engine, Piece, Stats, Stream
from .gguf_file import GGUFFile, TensorInfo
from .inspect import inspect

__version__ = "0.1.0"

__all__ = [
    "Completion",
    "Engine",
    "Piece",
    "Stats",
    "Stream",
    "GGUFError",
    "GGUFFile",
    "IncompatibleModelsError",
    "QuickdraftError",
    "TensorInfo",
    "UnsupportedError",
    "inspect",
]
