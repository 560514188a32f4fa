"""Type stubs for quickdraft._core (generated with pybind11-stubgen, then edited by hand)."""
"""
quickdraft native core
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
import typing_extensions


__all__: list[str] = ['Context', 'DrafterKind', 'MtpHead', 'Engine', 'EngineOptions', 'GGUFError', 'GGUFFile', 'GenerateOptions', 'IncompatibleModelsError', 'LoadedModel', 'QuickdraftError', 'SUPPORTED_ARCHS', 'SamplerParams', 'Stats', 'StreamDecoder', 'Tokenizer', 'UnsupportedError', 'check_compatible', 'cpu_features', 'current_isa', 'default_skip_layers', 'dequantize', 'isa_available', 'measure_read_bandwidth', 'quantize', 'type_info']
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
    reproducible: bool
    drafter: str
    draft_max: int
    adaptive: bool
    prediction: list[int]
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
class DrafterKind:
    """What proposes the tokens the target verifies."""
    none: typing.ClassVar[DrafterKind]
    ngram: typing.ClassVar[DrafterKind]
    self: typing.ClassVar[DrafterKind]
    model: typing.ClassVar[DrafterKind]
    hybrid: typing.ClassVar[DrafterKind]
    mtp: typing.ClassVar[DrafterKind]
    __members__: typing.ClassVar[dict[str, DrafterKind]]
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class EngineOptions:
    drafter: DrafterKind
    draft_path: str
    skip_layers: list[int]
    n_ctx: int
    threads: int
    draft_max: int
    adaptive: bool
    p_min: float
    ngram_min: int
    ngram_max: int
    draft_max_lag: int
    draft_window: int
    draft_head: int
    draft_quant: str
    draft_skip: list[int]
    stop_ids: list[int]
    mmap: bool
    def __init__(self) -> None:
        ...
class Stats:
    """
    What a generation drafted, accepted and spent its time on (seconds).
    """
    drafter: str
    prompt_tokens: int
    prompt_tokens_cached: int
    draft_prompt_tokens: int
    generated_tokens: int
    steps: int
    drafted: int
    accepted: int
    time_prompt: float
    time_draft: float
    time_verify: float
    time_sampling: float
    time_generate: float
    accepted_histogram: list[int]
    draft_length_histogram: list[int]
    seed: int
    source_names: list[str]
    source_drafted: list[int]
    source_accepted: list[int]
    prediction_tokens: int
    accepted_prediction_tokens: int
    rejected_prediction_tokens: int
    def __init__(self) -> None:
        ...
    def as_dict(self) -> dict:
        """
        The stats as a plain dict (JSON-friendly).
        """
    @property
    def acceptance_rate(self) -> float:
        ...
    @property
    def mean_accepted_length(self) -> float:
        """
        Accepted draft tokens per round.
        """
    @property
    def tokens_per_second(self) -> float:
        ...
class Engine:
    """
    A target with an optional drafter; the speculative loop, one step at a time.
    """
    def __init__(self, target: str, options: EngineOptions) -> None:
        ...
    def cancel(self) -> None:
        ...
    def detokenize(self, ids: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> str:
        ...
    def start(self, prompt: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], options: GenerateOptions) -> None:
        ...
    def stats(self) -> Stats:
        """
        The last generation's Stats (a copy).
        """
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
    def n_ctx_train(self) -> int:
        ...
    @property
    def n_vocab(self) -> int:
        ...
    @property
    def text(self) -> str:
        ...
    @property
    def warm_up_seconds(self) -> float:
        ...
class LoadedModel:
    """
    A GGUF model's weights, mapped in place; shared by contexts.
    """
    def __init__(self, path: str, requantize: str = '', mmap: bool = True) -> None:
        """
        requantize: a GGML type name ('q4_0'); matrices stored wider are requantized to it at load. mmap=False reads the file into memory instead of mapping it.
        """
    @property
    def mapped(self) -> bool:
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
    def matrix_types(self) -> dict[str, str]:
        """
        {GGUF tensor name: GGML type name} of every weight matrix as computed with (a tied output is listed as its embedding).
        """
    @property
    def matrix_storage(self) -> dict[str, tuple[int, int, str]]:
        """
        {GGUF tensor name: (address, bytes, layout)} of every weight matrix as computed with: 'rows8' for the copies repacked at load (one buffer for the whole model), 'gguf' for matrices read as stored.
        """
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
    def eval_hidden(self, ids: typing.Any) -> tuple[numpy.typing.NDArray[numpy.float32], numpy.typing.NDArray[numpy.float32]]:
        """
        (logits [n, n_vocab], h [n, n_embd]): also every row's output-normed final hidden state.
        """
    def set_rollback(self, mode: str, window: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Recurrent models: 'snapshot' or 'recompute' state rollback over `window` positions; resets.
        """
    @property
    def truncate_floor(self) -> int:
        """
        The smallest n_past > 0 truncate() accepts (0 for a transformer: any).
        """
    @property
    def rollback_mode(self) -> str:
        ...
    @property
    def rollback_window(self) -> int:
        ...
    @property
    def recurrent_state_bytes(self) -> int:
        ...
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
class MtpHead:
    """
    A qwen35 file's multi-token-prediction head with its own KV cache.
    """
    def __init__(self, model: LoadedModel, n_ctx: typing.SupportsInt | typing.SupportsIndex, n_threads: typing.SupportsInt | typing.SupportsIndex = 1) -> None:
        ...
    def eval(self, ids: typing.Any, h: numpy.typing.ArrayLike) -> tuple[numpy.typing.NDArray[numpy.float32], numpy.typing.NDArray[numpy.float32]]:
        """
        (logits [n, n_vocab], h_out [n, n_embd]) of rows (ids[i] at position n_past + i, h[i] the hidden state of the position before).
        """
    def truncate(self, n_past: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_past(self) -> int:
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
def measure_read_bandwidth(mib: typing.SupportsFloat = 512.0, threads: typing.SupportsInt = 0, passes: typing.SupportsInt = 5) -> dict:
    """
    The memory's read rate as a decode sees it: `threads` threads (0: every CPU this process may
    use) stream a `mib`-MiB buffer on transparent huge pages, allocated as a model's weights are,
    `passes` times. {best_GBps, median_GBps (1e9 bytes/s), checksum (the wrapping sum of its
    64-bit words, word i = i * 0x9E3779B97F4A7C15), bytes (whole 4 KiB pages), threads}. Take a
    buffer several times the last-level cache, or it measures the cache; ValueError past half the
    machine's memory.
    """
def quantize(x: numpy.typing.ArrayLike, type_id: typing.SupportsInt | typing.SupportsIndex) -> numpy.typing.NDArray[numpy.uint8]:
    """
    Quantize float32 values to raw GGML data with the scalar reference.
    """
def isa_available() -> list[str]:
    """
    Kernel ISAs this build and CPU can run, scalar first.
    """
def type_info(arg0: typing.SupportsInt | typing.SupportsIndex) -> typing.Any:
    ...
SUPPORTED_ARCHS: tuple = ('llama', 'qwen2', 'gemma3', 'qwen3', 'smollm3', 'phi3', 'qwen3moe')

import types
# Test hooks, not API (cpp/bindings/bind_testing.cpp): engine_from_tables, sample_many,
# verify_trials, process_logits, sample_tokens, quant_types, DraftLength, and the submodule
# kernels (matmul, bench_matmul, quantize_row, f16_to_f32, f32_to_f16, table).
_testing: types.ModuleType
kernels: types.ModuleType  # the kernel tables of this build: describe(), table(), built_isas()
