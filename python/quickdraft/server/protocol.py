"""The OpenAI request and response shapes: requests checked and turned into engine calls,
results turned into completion objects, chunks and error objects.

Every parameter is either implemented or refused with a 400 that names it: the OpenAI
parameters quickdraft cannot honour (logprobs, tools, n > 1...) are named in the error, and
anything else gets OpenAI's own "Unrecognized request argument supplied".
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Optional

FINISH_REASONS = {"eos": "stop", "stop": "stop", "length": "length", "context": "length", "cancelled": "stop"}
ROLES = ("system", "developer", "user", "assistant")
MAX_STOP = 4


class APIError(Exception):
    """An error answered with OpenAI's error object and an HTTP status."""

    TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
             405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
             500: "server_error", 503: "server_error"}

    def __init__(self, status: int, message: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.TYPES.get(self.status, "server_error"),
                          "param": self.param, "code": self.code}}


def bad(message: str, param: Optional[str] = None, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param, code)


@dataclass
class Limits:
    """What a request may ask for: the server's caps and what its engine loaded."""

    max_tokens: int = 4096          # the most tokens one request generates (also the default)
    draft_max: int = 8              # the engine's draft_max: a request may ask for less
    drafters: tuple = ("none", "ngram")  # what "speculative.drafter" may name


@dataclass
class GenRequest:
    """A checked request: what the worker needs to run it and the server to answer it."""

    kind: str                       # "chat" or "completion"
    model: str
    stream: bool = False
    include_usage: bool = False
    messages: Optional[list] = None  # chat: [{"role", "content"}] for the chat template
    prompt: Any = None              # completion: text or token ids
    echo: bool = False
    options: dict = field(default_factory=dict)  # keyword arguments of Engine.stream()


# -- request checks ----------------------------------------------------------------------------

def parse_json(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"the request body is not valid JSON: {e}", None, "invalid_json") from None
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object", None, "invalid_json")
    return body


def _number(body: dict, name: str, lo: float, hi: float, default: Optional[float], lo_open: bool = False):
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad(f"{name} must be a number, got {json.dumps(v)}", name, "invalid_type")
    if not (lo < v if lo_open else lo <= v) or not v <= hi:
        raise bad(f"{name} must be in {'(' if lo_open else '['}{lo}, {hi}], got {v}", name)
    return float(v)


def _int(body: dict, name: str, lo: int, hi: int, default: Optional[int], param: Optional[str] = None):
    v = body.get(name)
    param = param or name
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad(f"{param} must be an integer, got {json.dumps(v)}", param, "invalid_type")
    if not lo <= v <= hi:
        raise bad(f"{param} must be in [{lo}, {hi}], got {v}", param)
    return v


def _bool(body: dict, name: str, default: Optional[bool] = False, param: Optional[str] = None) -> Optional[bool]:
    v = body.get(name)
    param = param or name
    if v is None:
        return default
    if not isinstance(v, bool):
        raise bad(f"{param} must be a boolean, got {json.dumps(v)}", param, "invalid_type")
    return v


def _refuse_unless(body: dict, name: str, ok, why: str) -> None:
    """A known OpenAI parameter this server cannot honour: allowed only at a value that changes nothing."""
    if name in body and body[name] is not None and not ok(body[name]):
        raise bad(f"{name} is not supported by this server ({why})", name, "unsupported_parameter")


def _text_parts(content: Any, param: str) -> str:
    """A message content or a prediction: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise bad(f"{param}[{j}] must be a text part ({{\"type\": \"text\", \"text\": ...}}); "
                          f"{kind!r} parts are not supported", f"{param}[{j}]")
            texts.append(part["text"])
        return "".join(texts)
    raise bad(f"{param} must be a string or a list of text parts", param, "invalid_type")


def _check_keys(body: dict, allowed: frozenset) -> None:
    for name in body:
        if name not in allowed:
            raise bad(f"Unrecognized request argument supplied: {name}", name, "unknown_parameter")


SAMPLING = frozenset({"model", "max_tokens", "temperature", "top_p", "seed", "stop", "presence_penalty",
                      "frequency_penalty", "n", "stream", "stream_options", "user", "logprobs", "logit_bias",
                      "prediction", "speculative", "top_k", "min_p", "repeat_penalty"})
CHAT_KEYS = SAMPLING | {"messages", "max_completion_tokens", "top_logprobs", "response_format", "tools",
                        "tool_choice", "parallel_tool_calls", "functions", "function_call", "store", "metadata",
                        "service_tier", "modalities", "audio", "reasoning_effort"}
COMPLETION_KEYS = SAMPLING | {"prompt", "echo", "suffix", "best_of"}


def _common(body: dict, limits: Limits) -> dict:
    """The sampling, drafting and streaming parameters shared by both endpoints."""
    n = _int(body, "n", 1, 1 << 31, 1)
    if n != 1:
        raise bad(f"n must be 1 (this server generates one choice per request), got {n}", "n", "unsupported_parameter")
    _refuse_unless(body, "logit_bias", lambda v: v == {}, "no per-token biases")
    opt: dict = {
        "temperature": _number(body, "temperature", 0.0, 2.0, 1.0),
        "top_p": _number(body, "top_p", 0.0, 1.0, 1.0, lo_open=True),
        "presence_penalty": _number(body, "presence_penalty", -2.0, 2.0, 0.0),
        "frequency_penalty": _number(body, "frequency_penalty", -2.0, 2.0, 0.0),
        "seed": _int(body, "seed", 0, (1 << 63) - 1, None),
        # Extensions that llama.cpp's server and Ollama take too.
        "top_k": _int(body, "top_k", 0, 1 << 31, 0),
        "min_p": _number(body, "min_p", 0.0, 1.0, 0.0),
        "repeat_penalty": _number(body, "repeat_penalty", 0.0, 10.0, 1.0, lo_open=True),
    }
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise bad("stop must be a non-empty string or a list of them", "stop", "invalid_type")
        if len(stops) > MAX_STOP:
            raise bad(f"stop takes at most {MAX_STOP} strings, got {len(stops)}", "stop")
        opt["stop"] = stops
    prediction = body.get("prediction")
    if prediction is not None:
        if not isinstance(prediction, dict) or prediction.get("type") != "content" or "content" not in prediction:
            raise bad('prediction must be {"type": "content", "content": ...}', "prediction")
        extra = set(prediction) - {"type", "content"}
        if extra:
            raise bad(f"Unrecognized argument supplied: prediction.{sorted(extra)[0]}", "prediction", "unknown_parameter")
        text = _text_parts(prediction["content"], "prediction.content")
        if text:
            opt["prediction"] = text
    spec = body.get("speculative")
    if spec is not None:
        if not isinstance(spec, dict):
            raise bad('speculative must be an object: {"drafter": ..., "draft_max": k, "adaptive": bool}',
                      "speculative", "invalid_type")
        for key in spec:
            if key not in ("drafter", "draft_max", "adaptive"):
                raise bad(f"Unrecognized argument supplied: speculative.{key}", f"speculative.{key}",
                          "unknown_parameter")
        drafter = spec.get("drafter")
        if drafter is not None:
            if drafter not in limits.drafters:
                raise bad(f"speculative.drafter must be one of {', '.join(limits.drafters)} (what this server "
                          f"loaded), got {json.dumps(drafter)}", "speculative.drafter")
            opt["drafter"] = drafter
        k = _int(spec, "draft_max", 0, limits.draft_max, None, "speculative.draft_max")
        if k is not None:
            opt["draft_max"] = k
        adaptive = _bool(spec, "adaptive", None, "speculative.adaptive")
        if adaptive is not None:
            opt["adaptive"] = adaptive
    return opt


def _max_tokens(body: dict, names: tuple, limits: Limits) -> int:
    for name in names:
        v = _int(body, name, 1, 1 << 31, None)
        if v is not None:
            if v > limits.max_tokens:
                raise bad(f"{name} is {v}, more than this server's limit of {limits.max_tokens} "
                          "(quickdraft serve --max-tokens)", name)
            return v
    return limits.max_tokens


def _stream(body: dict) -> tuple:
    stream = _bool(body, "stream")
    so = body.get("stream_options")
    if so is None:
        return stream, False
    if not stream:
        raise bad("stream_options is only allowed when stream is true", "stream_options")
    if not isinstance(so, dict) or set(so) - {"include_usage"}:
        raise bad('stream_options must be {"include_usage": true|false}', "stream_options")
    return stream, _bool(so, "include_usage")


def _model(body: dict) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("you must provide a model parameter (GET /v1/models lists it)", "model", "missing_required_parameter")
    return model


def parse_chat(body: dict, limits: Limits) -> GenRequest:
    """A checked POST /v1/chat/completions body."""
    _check_keys(body, CHAT_KEYS)
    model = _model(body)
    _refuse_unless(body, "logprobs", lambda v: v is False, "no log probabilities")
    _refuse_unless(body, "top_logprobs", lambda v: v == 0, "no log probabilities")
    _refuse_unless(body, "response_format", lambda v: isinstance(v, dict) and v.get("type") == "text",
                   "no JSON mode; only {\"type\": \"text\"}")
    _refuse_unless(body, "tools", lambda v: v == [], "no tool calls")
    _refuse_unless(body, "functions", lambda v: v == [], "no function calls")
    _refuse_unless(body, "tool_choice", lambda v: v == "none", "no tool calls")
    _refuse_unless(body, "function_call", lambda v: v == "none", "no function calls")
    _refuse_unless(body, "parallel_tool_calls", lambda v: False, "no tool calls")
    _refuse_unless(body, "store", lambda v: v is False, "nothing is stored")
    _refuse_unless(body, "metadata", lambda v: v == {}, "nothing is stored")
    _refuse_unless(body, "service_tier", lambda v: v in ("auto", "default"), "one tier")
    _refuse_unless(body, "modalities", lambda v: v == ["text"], "text only")
    _refuse_unless(body, "audio", lambda v: False, "text only")
    _refuse_unless(body, "reasoning_effort", lambda v: False, "not a reasoning model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages must be a non-empty list of {\"role\", \"content\"} objects", "messages",
                  "missing_required_parameter" if messages is None else "invalid_type")
    rendered = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise bad(f"messages[{i}] must be an object", f"messages[{i}]", "invalid_type")
        role = m.get("role")
        if role not in ROLES:
            raise bad(f"messages[{i}].role must be one of {', '.join(ROLES)} (no tool messages), got "
                      f"{json.dumps(role)}", f"messages[{i}].role")
        for key in m:
            if key not in ("role", "content", "name"):
                raise bad(f"messages[{i}].{key} is not supported by this server", f"messages[{i}].{key}",
                          "unsupported_parameter")
        content = m.get("content")
        if content is None:
            raise bad(f"messages[{i}].content is required", f"messages[{i}].content", "missing_required_parameter")
        rendered.append({"role": "system" if role == "developer" else role,
                         "content": _text_parts(content, f"messages[{i}].content")})
    stream, include_usage = _stream(body)
    opt = _common(body, limits)
    opt["max_tokens"] = _max_tokens(body, ("max_completion_tokens", "max_tokens"), limits)
    return GenRequest("chat", model, stream, include_usage, messages=rendered, options=opt)


def parse_completion(body: dict, limits: Limits) -> GenRequest:
    """A checked POST /v1/completions body."""
    _check_keys(body, COMPLETION_KEYS)
    model = _model(body)
    _refuse_unless(body, "logprobs", lambda v: False, "no log probabilities")
    _refuse_unless(body, "suffix", lambda v: v == "", "no fill-in-the-middle")
    _refuse_unless(body, "best_of", lambda v: v == 1, "one choice per request")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list):
        if not prompt or not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            raise bad("prompt must be a string, a list of token ids, or a list of one of these (one prompt per "
                      "request)", "prompt", "invalid_type")
    elif not isinstance(prompt, str):
        raise bad("prompt must be a string or a list of token ids", "prompt",
                  "missing_required_parameter" if prompt is None else "invalid_type")
    elif not prompt:
        raise bad("prompt must not be empty", "prompt")
    stream, include_usage = _stream(body)
    opt = _common(body, limits)
    opt["max_tokens"] = _max_tokens(body, ("max_tokens",), limits)
    return GenRequest("completion", model, stream, include_usage, prompt=prompt, echo=_bool(body, "echo"),
                      options=opt)


# -- responses -------------------------------------------------------------------------------

def new_id(kind: str) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + secrets.token_hex(12)


def usage(stats, completion_tokens: int) -> dict:
    """OpenAI's usage object from quickdraft.Stats; completion_tokens_details counts the prediction."""
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": stats.prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.prompt_tokens_cached},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "rejected_prediction_tokens": stats.rejected_prediction_tokens,
        },
    }


def speculative(stats) -> dict:
    """The "speculative" extension field: what was drafted and accepted, per source."""
    return {
        "drafter": stats.drafter,
        "drafted": stats.drafted,
        "accepted": stats.accepted,
        "steps": stats.steps,
        "draft_prompt_tokens": stats.draft_prompt_tokens,
        "sources": {name: {"drafted": d, "accepted": a}
                    for name, d, a in zip(stats.source_names, stats.source_drafted, stats.source_accepted)},
        "tokens_per_second": round(stats.tokens_per_second, 2),
    }


def response(req: GenRequest, rid: str, created: int, text: str, completion) -> dict:
    """The non-streamed chat.completion or text_completion object."""
    finish = FINISH_REASONS.get(completion.finish_reason, "stop")
    if req.kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                  "logprobs": None, "finish_reason": finish}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    return {"id": rid, "object": obj, "created": created, "model": req.model, "system_fingerprint": None,
            "choices": [choice], "usage": usage(completion.stats, len(completion.tokens)),
            "speculative": speculative(completion.stats)}


def chunk(req: GenRequest, rid: str, created: int, text: Optional[str] = None, finish: Optional[str] = None,
          role: bool = False, usage_obj: Optional[dict] = None, spec: Optional[dict] = None,
          no_choice: bool = False) -> dict:
    """One streamed chat.completion.chunk or text_completion object."""
    if no_choice:
        choices = []
    elif req.kind == "chat":
        delta: dict = {}
        if role:
            delta["role"] = "assistant"
        if text is not None:
            delta["content"] = text
        choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    else:
        choices = [{"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}]
    out = {"id": rid, "object": "chat.completion.chunk" if req.kind == "chat" else "text_completion",
           "created": created, "model": req.model, "system_fingerprint": None, "choices": choices}
    if req.include_usage:
        out["usage"] = usage_obj
    if spec is not None:
        out["speculative"] = spec
    return out


def now() -> int:
    return int(time.time())
