"""quickdraft: exact speculative decoding for quantized GGUF models on the CPU."""

from ._core import GGUFError, IncompatibleModelsError, QuickdraftError, UnsupportedError
from .engine import Completion, Engine, Piece, Stats, Stream
from ._core import current_isa, isa_available
from .gguf_file import GGUFFile, TensorInfo
from .inspect import inspect
from .model import Context, Model
from .tokenizer import StreamDecoder, Tokenizer
from . import chat

__version__ = "0.1.0"

__all__ = [
    "Completion",
    "Engine",
    "Piece",
    "Stats",
    "Stream",
    "Context",
    "GGUFError",
    "GGUFFile",
    "IncompatibleModelsError",
    "Model",
    "QuickdraftError",
    "StreamDecoder",
    "TensorInfo",
    "current_isa",
    "isa_available",
    "Tokenizer",
    "chat",
    "UnsupportedError",
    "inspect",
]
