"""quickdraft: exact speculative decoding for quantized GGUF models on the CPU.

    import quickdraft
    with quickdraft.Engine("qwen2.5-coder-1.5b", draft="qwen2.5-coder-0.5b") as engine:
        print(engine.generate("def fib(n):", max_tokens=64, temperature=0).text)
"""

from . import chat, models
from ._core import GGUFError, IncompatibleModelsError, QuickdraftError, UnsupportedError, current_isa, isa_available
from .engine import Completion, Engine, Piece, Stats, Stream
from .gguf_file import GGUFFile, TensorInfo
from .inspect import inspect
from .model import Context, Model
from .models import ModelNotFoundError
from .tokenizer import StreamDecoder, Tokenizer

QuickdraftError.__doc__ = "Base class of quickdraft's native errors."
GGUFError.__doc__ = "A malformed, truncated or hostile GGUF file; the message names the file, the field and the byte offset."
UnsupportedError.__doc__ = "A well-formed file quickdraft cannot run (architecture, tensor type, feature)."
IncompatibleModelsError.__doc__ = "A draft model that cannot draft for the target (tokenizer, special ids, vocabulary)."

__version__ = "0.1.0"

__all__ = [
    "Completion",
    "Context",
    "Engine",
    "GGUFError",
    "GGUFFile",
    "IncompatibleModelsError",
    "Model",
    "ModelNotFoundError",
    "Piece",
    "QuickdraftError",
    "Stats",
    "Stream",
    "StreamDecoder",
    "TensorInfo",
    "Tokenizer",
    "UnsupportedError",
    "chat",
    "current_isa",
    "inspect",
    "isa_available",
    "models",
]
