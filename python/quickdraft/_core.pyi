"""Type stubs for quickdraft._core (generated with pybind11-stubgen, then checked in)."""
"""
quickdraft native core
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
import typing_extensions


__all__: list[str] = ['Context', 'EngineConfig', 'GGUFError', 'GGUFFile', 'GenerateOptions', 'IncompatibleModelsError', 'LoadedModel', 'QuickdraftError', 'SUPPORTED_ARCHS', 'SamplerParams', 'SpecEngine', 'StreamDecoder', 'Tokenizer', 'UnsupportedError', 'check_compatible', 'cpu_features', 'current_isa', 'default_skip_layers', 'dequantize', 'isa_available', 'kernels', 'type_info']
class QuickdraftError(RuntimeError):
    pass
class GGUFError(ValueError):
    pass
class UnsupportedError(ValueError):
    pass
class IncompatibleModelsError(ValueError):
    pass
class GGUFFile:
    def __init__(self, path: str) -> None:
        ...
    def close(self) -> None:
        ...
    def tensor(self, name: str) -> numpy.typing.NDArray[numpy.float32]:
        ...
    @property
    def alignment(self) -> int:
        ...
    @property
    def data_offset(self) -> int:
        ...
    @property
    def metadata(self) -> dict:
        ...
    @property
    def path(self) -> str:
        ...
    @property
    def size(self) -> int:
        ...
    @property
    def tensors(self) -> list:
        ...
    @property
    def version(self) -> int:
        ...
class SamplerParams:
    def __init__(self) -> None:
        ...
    def validate(self) -> None:
        ...
    @property
    def frequency_penalty(self) -> float:
        ...
    @frequency_penalty.setter
    def frequency_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def min_p(self) -> float:
        ...
    @min_p.setter
    def min_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def penalty_last_n(self) -> int:
        ...
    @penalty_last_n.setter
    def penalty_last_n(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def presence_penalty(self) -> float:
        ...
    @presence_penalty.setter
    def presence_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def repeat_penalty(self) -> float:
        ...
    @repeat_penalty.setter
    def repeat_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def seed(self) -> int:
        ...
    @seed.setter
    def seed(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def temperature(self) -> float:
        ...
    @temperature.setter
    def temperature(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def top_k(self) -> int:
        ...
    @top_k.setter
    def top_k(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def top_p(self) -> float:
        ...
    @top_p.setter
    def top_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
class GenerateOptions:
    ignore_eos: bool
    sampling: SamplerParams
    def __init__(self) -> None:
        ...
    @property
    def max_tokens(self) -> int:
        ...
    @max_tokens.setter
    def max_tokens(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def stop(self) -> list[str]:
        ...
    @stop.setter
    def stop(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
class EngineConfig:
    adaptive: bool
    def __init__(self) -> None:
        ...
    @property
    def draft_max(self) -> int:
        ...
    @draft_max.setter
    def draft_max(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def draft_max_lag(self) -> int:
        ...
    @draft_max_lag.setter
    def draft_max_lag(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_ctx(self) -> int:
        ...
    @n_ctx.setter
    def n_ctx(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def ngram_max(self) -> int:
        ...
    @ngram_max.setter
    def ngram_max(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def ngram_min(self) -> int:
        ...
    @ngram_min.setter
    def ngram_min(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def p_min(self) -> float:
        ...
    @p_min.setter
    def p_min(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def stop_ids(self) -> list[int]:
        ...
    @stop_ids.setter
    def stop_ids(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
class SpecEngine:
    def cancel(self) -> None:
        ...
    def detokenize(self, ids: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> str:
        ...
    def sample_many(self, prompt: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], options: GenerateOptions, n: typing.SupportsInt | typing.SupportsIndex, seed0: typing.SupportsInt | typing.SupportsIndex) -> numpy.typing.NDArray[numpy.int32]:
        ...
    def start(self, prompt: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], options: GenerateOptions) -> None:
        ...
    def stats(self) -> dict:
        ...
    def step(self) -> list:
        """
        One prefill chunk or draft-verify round: [(text, tokens, from_draft)].
        """
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        ...
    @property
    def drafter(self) -> str:
        ...
    @property
    def finish_reason(self) -> str:
        ...
    @property
    def finished(self) -> bool:
        ...
    @property
    def generated(self) -> list[int]:
        ...
    @property
    def has_tokenizer(self) -> bool:
        ...
    @property
    def n_ctx(self) -> int:
        ...
    @property
    def n_vocab(self) -> int:
        ...
    @property
    def text(self) -> str:
        ...
class _DraftLength:
    """
    Test hook: the draft-length controller.
    """
    def __init__(self, n_sources: typing.SupportsInt | typing.SupportsIndex = 1, draft_max: typing.SupportsInt | typing.SupportsIndex = 8, adaptive: bool = True, probe_every: typing.SupportsInt | typing.SupportsIndex = 4) -> None:
        ...
    def alpha(self, source: typing.SupportsInt | typing.SupportsIndex = 0) -> float:
        ...
    def draft_cost(self, source: typing.SupportsInt | typing.SupportsIndex = 0) -> float:
        ...
    def new_sequence(self) -> None:
        ...
    def next(self, source: typing.SupportsInt | typing.SupportsIndex = 0) -> int:
        ...
    def probe_interval(self, source: typing.SupportsInt | typing.SupportsIndex = 0) -> int:
        ...
    def rate(self, source: typing.SupportsInt | typing.SupportsIndex, k: typing.SupportsInt | typing.SupportsIndex) -> float:
        ...
    def record_draft(self, source: typing.SupportsInt | typing.SupportsIndex, n_drafted: typing.SupportsInt | typing.SupportsIndex, seconds_per_token: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def record_verify(self, source: typing.SupportsInt | typing.SupportsIndex, n_rows: typing.SupportsInt | typing.SupportsIndex, n_accepted: typing.SupportsInt | typing.SupportsIndex, seconds: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def verify_cost(self, n_rows: typing.SupportsInt | typing.SupportsIndex) -> float:
        ...
class LoadedModel:
    """
    A GGUF model's weights, mapped in place; shared by contexts.
    """
    def __init__(self, path: str) -> None:
        ...
    @property
    def arch(self) -> str:
        ...
    @property
    def hparams(self) -> dict:
        ...
    @property
    def n_ctx_train(self) -> int:
        ...
    @property
    def n_embd(self) -> int:
        ...
    @property
    def n_layer(self) -> int:
        ...
    @property
    def n_vocab(self) -> int:
        ...
    @property
    def path(self) -> str:
        ...
class Context:
    """
    KV cache and scratch for one sequence over a LoadedModel.
    """
    def __init__(self, model: LoadedModel, n_ctx: typing.SupportsInt | typing.SupportsIndex, n_threads: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
        ...
    def eval(self, ids: typing.Any, last_only: bool = False) -> numpy.typing.NDArray[numpy.float32]:
        """
        Logits float32 [len(ids), n_vocab] (or [n_vocab] with last_only), continuing from n_past.
        """
    def feed(self, ids: typing.Any) -> None:
        """
        Append ids to the KV cache without computing logits.
        """
    def reset(self) -> None:
        ...
    def truncate(self, n_past: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Keep the first n_past positions.
        """
    @property
    def n_ctx(self) -> int:
        ...
    @property
    def n_past(self) -> int:
        ...
    @property
    def n_threads(self) -> int:
        ...
    @property
    def skip_layers(self) -> list[int]:
        ...
    @skip_layers.setter
    def skip_layers(self, arg1: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
class Tokenizer:
    """
    Tokenizer from a GGUF file's metadata.
    """
    def __init__(self, path: str) -> None:
        ...
    def decode(self, ids: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], special: bool = False) -> str:
        """
        Text of ids (ill-formed UTF-8 as U+FFFD).
        """
    def encode(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """
        Token ids of text.
        """
    def is_eog(self, id: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def token_text(self, id: typing.SupportsInt | typing.SupportsIndex) -> bytes:
        """
        The token's text as stored in the GGUF file.
        """
    def token_to_piece(self, id: typing.SupportsInt | typing.SupportsIndex, special: bool = True) -> bytes:
        """
        Raw bytes of one token.
        """
    def token_type(self, id: typing.SupportsInt | typing.SupportsIndex) -> int:
        """
        GGUF token type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
        """
    @property
    def add_bos(self) -> bool:
        ...
    @property
    def add_eos(self) -> bool:
        ...
    @property
    def bos_id(self) -> typing.Any:
        ...
    @property
    def chat_template(self) -> typing.Any:
        ...
    @property
    def eog_ids(self) -> list[int]:
        ...
    @property
    def eos_id(self) -> typing.Any:
        ...
    @property
    def eot_id(self) -> typing.Any:
        ...
    @property
    def model(self) -> str:
        ...
    @property
    def n_vocab(self) -> int:
        ...
    @property
    def pad_id(self) -> typing.Any:
        ...
    @property
    def pre(self) -> str:
        ...
    @property
    def unk_id(self) -> typing.Any:
        ...
class StreamDecoder:
    """
    Incremental detokenizer: feed ids, get whole characters.
    """
    def __init__(self, tokenizer: Tokenizer, special: bool = False) -> None:
        ...
    def feed(self, id: typing.SupportsInt | typing.SupportsIndex) -> str:
        ...
    def flush(self) -> str:
        ...
    def reset(self) -> None:
        ...
def _engine_from_models(target: str, kind: str, draft_path: str, skip_layers: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], threads: typing.SupportsInt | typing.SupportsIndex, config: EngineConfig) -> SpecEngine:
    ...
def _engine_from_tables(target: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], draft: typing.Any, pieces: typing.Any, config: EngineConfig) -> SpecEngine:
    """
    Test hook: a SpecEngine over [V][V][V] table models.
    """
def _process_logits(logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], history: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], params: SamplerParams) -> numpy.typing.NDArray[numpy.float32]:
    ...
def _sample_tokens(logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], history: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], params: SamplerParams, n: typing.SupportsInt | typing.SupportsIndex, seed: typing.SupportsInt | typing.SupportsIndex) -> list[int]:
    ...
def _verify_trials(p_logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], q_logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], params: SamplerParams, n: typing.SupportsInt | typing.SupportsIndex, seed: typing.SupportsInt | typing.SupportsIndex) -> numpy.typing.NDArray[numpy.int32]:
    """
    Test hook: n draft-and-verify trials over fixed logit rows.
    """
def check_compatible(target: str, draft: str) -> None:
    """
    Raises IncompatibleModelsError unless the draft GGUF can draft for the target GGUF.
    """
def cpu_features() -> dict:
    """
    CPU features detected at run time: {name: bool} (x86-64 and aarch64 names).
    """
def current_isa() -> str:
    """
    The ISA matmul uses: the best available, or QD_FORCE_ISA.
    """
def default_skip_layers(n_layer: typing.SupportsInt | typing.SupportsIndex) -> list[int]:
    """
    The layers self-speculation skips by default for a model of n_layer layers.
    """
def dequantize(data: typing_extensions.Buffer, type_id: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex) -> numpy.typing.NDArray[numpy.float32]:
    """
    Dequantize n elements of raw GGML data with the scalar reference.
    """
def isa_available() -> list[str]:
    """
    Kernel ISAs this build and CPU can run, scalar first.
    """
def type_info(arg0: typing.SupportsInt | typing.SupportsIndex) -> typing.Any:
    ...
SUPPORTED_ARCHS: tuple = ('llama', 'qwen2', 'gemma3')

import types
kernels: types.ModuleType  # test hooks: matmul, bench_matmul, quantize_row, f16_to_f32, f32_to_f16; the kernel table: describe, table, built_isas
