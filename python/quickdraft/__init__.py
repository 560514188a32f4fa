"""quickdraft: exact speculative decoding for quantized GGUF models on the CPU."""

from ._core import GGUFError, IncompatibleModelsError, QuickdraftError, UnsupportedError
from .gguf_file import GGUFFile, TensorInfo
from .inspect import inspect
from .tokenizer import StreamDecoder, Tokenizer
from . import chat

__version__ = "0.1.0"

__all__ = [
    "GGUFError",
    "GGUFFile",
    "IncompatibleModelsError",
    "QuickdraftError",
    "StreamDecoder",
    "TensorInfo",
    "Tokenizer",
    "chat",
    "UnsupportedError",
    "inspect",
]
