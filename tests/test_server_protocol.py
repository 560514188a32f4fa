"""The server's parts without a model or a socket: request checks, metrics text, the worker's queue."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("starlette")

from quickdraft.server import protocol  # noqa: E402
from quickdraft.server.metrics import Metrics  # noqa: E402
from quickdraft.server.protocol import APIError, Limits, parse_chat, parse_completion  # noqa: E402
from quickdraft.server.worker import Job, QueueFull, Worker  # noqa: E402

LIMITS = Limits(max_tokens=100, draft_max=8, drafters=("none", "ngram", "model"))
MSG = [{"role": "user", "content": "hi"}]


def chat(**kw):
    return parse_chat({"model": "m", "messages": MSG, **kw}, LIMITS)


def test_chat_parameters_become_engine_options():
    r = chat(max_completion_tokens=7, temperature=0, top_p=0.5, seed=3, stop="x", presence_penalty=1,
             frequency_penalty=-1, n=1, stream=True, stream_options={"include_usage": True}, user="u",
             prediction={"type": "content", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
             speculative={"drafter": "ngram", "draft_max": 3, "adaptive": False}, logprobs=False, tools=[], response_format={"type": "text"})
    o = r.options
    assert (o["max_tokens"], o["temperature"], o["top_p"], o["seed"], o["stop"]) == (7, 0.0, 0.5, 3, ["x"])
    assert (o["presence_penalty"], o["frequency_penalty"], o["prediction"]) == (1.0, -1.0, "ab")
    assert (o["drafter"], o["draft_max"], o["adaptive"], r.stream, r.include_usage) == ("ngram", 3, False, True, True)
    assert chat().options["max_tokens"] == 100 and chat().options["temperature"] == 1.0
    dev = parse_chat({"model": "m", "messages": [{"role": "developer", "content": [{"type": "text", "text": "s"}]}]},
                     LIMITS)
    assert dev.messages == [{"role": "system", "content": "s"}]


@pytest.mark.parametrize("kw, param", [
    ({"n": 2}, "n"), ({"temperature": 2.5}, "temperature"), ({"temperature": "hot"}, "temperature"),
    ({"top_p": 0}, "top_p"), ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"stop": ["a"] * 5}, "stop"),
    ({"stop": [""]}, "stop"), ({"max_tokens": 101}, "max_tokens"), ({"max_tokens": 0}, "max_tokens"),
    ({"frobnicate": 1}, "frobnicate"), ({"logprobs": True}, "logprobs"), ({"tools": [{"type": "function"}]}, "tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"), ({"logit_bias": {"1": 5}}, "logit_bias"),
    ({"stream_options": {"include_usage": True}}, "stream_options"), ({"prediction": "text"}, "prediction"),
    ({"speculative": {"drafter": "self"}}, "speculative.drafter"),
    ({"speculative": {"draft_max": 9}}, "speculative.draft_max"), ({"speculative": {"k": 1}}, "speculative.k"),
    ({"speculative": {"adaptive": 0}}, "speculative.adaptive"),
    ({"messages": []}, "messages"), ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]"),
    ({"model": None}, "model"),
])
def test_bad_chat_parameters_are_named(kw, param):
    with pytest.raises(APIError) as e:
        parse_chat({"model": "m", "messages": MSG, **kw}, LIMITS)
    assert e.value.status == 400 and e.value.param == param
    body = e.value.body()["error"]
    assert body["type"] == "invalid_request_error" and param.split(".")[0].split("[")[0] in body["message"]


def test_completion_prompts():
    assert parse_completion({"model": "m", "prompt": "a"}, LIMITS).prompt == "a"
    assert parse_completion({"model": "m", "prompt": ["a"]}, LIMITS).prompt == "a"
    assert parse_completion({"model": "m", "prompt": [1, 2]}, LIMITS).prompt == [1, 2]
    assert parse_completion({"model": "m", "prompt": [[1, 2]], "echo": True}, LIMITS).echo
    for prompt in (["a", "b"], [], "", None, [1, "a"], 3):
        with pytest.raises(APIError, match="prompt"):
            parse_completion({"model": "m", "prompt": prompt}, LIMITS)
    for kw in ({"suffix": "x"}, {"best_of": 2}, {"messages": MSG}):
        with pytest.raises(APIError):
            parse_completion({"model": "m", "prompt": "a", **kw}, LIMITS)


def test_bad_json():
    for raw in (b"{", b"[1]", b"\xff"):
        with pytest.raises(APIError) as e:
            protocol.parse_json(raw)
        assert e.value.status == 400 and e.value.code == "invalid_json"


def _completion(**stats):
    base = dict(drafter="none", prompt_tokens=5, prompt_tokens_cached=2, draft_prompt_tokens=3, drafted=6, accepted=4, steps=3,
                source_names=["ngram", "prediction"], source_drafted=[2, 4], source_accepted=[1, 3],
                accepted_prediction_tokens=3, rejected_prediction_tokens=1, tokens_per_second=10.0,
                time_generate=0.5, draft_length_histogram=[1, 0, 3], accepted_histogram=[1, 2, 1])
    base.update(stats)
    return SimpleNamespace(stats=SimpleNamespace(**base), tokens=[1, 2, 3, 4, 5, 6], finish_reason="eos", text="x")


def test_usage_and_metrics_text():
    c = _completion()
    u = protocol.usage(c.stats, 6)
    assert u["total_tokens"] == 11 and u["prompt_tokens_details"]["cached_tokens"] == 2
    assert u["completion_tokens_details"]["accepted_prediction_tokens"] == 3
    assert u["completion_tokens_details"]["rejected_prediction_tokens"] == 1
    m = Metrics(lambda: {"quickdraft_queue_waiting": ("waiting", 2)})
    m.generation(c, 0.3)
    m.request("/v1/completions", 200)
    text = m.render()
    assert 'quickdraft_drafted_tokens_total{source="prediction"} 4' in text
    assert 'quickdraft_accepted_tokens_total{source="ngram"} 1' in text
    # Draft lengths [0, 0, 2, 2, 2] and accepted [0, 1, 1, 2]: position 1 judged 3, kept 3; position 2 judged 3, kept 1.
    assert 'quickdraft_draft_position_drafted_total{position="2"} 3' in text
    assert 'quickdraft_draft_position_accepted_total{position="1"} 3' in text
    assert 'quickdraft_draft_position_accepted_total{position="2"} 1' in text
    assert 'quickdraft_prediction_tokens_total{verdict="rejected"} 1' in text
    assert 'quickdraft_requests_total{endpoint="/v1/completions",status="200"} 1' in text
    assert 'quickdraft_request_seconds_bucket{le="0.5"} 1' in text and "quickdraft_queue_waiting 2" in text
    assert "quickdraft_draft_prompt_tokens_total 3" in text
    assert protocol.speculative(c.stats)["draft_prompt_tokens"] == 3


class FakeEngine:
    """Generates one piece per step until cancelled or max_tokens; each step takes `step` seconds."""

    def __init__(self, step=0.01):
        self.step, self.cancelled, self.prompts = step, threading.Event(), []

    def cancel(self):
        self.cancelled.set()

    def stream(self, prompt, max_tokens=10, **kw):
        self.prompts.append(prompt)
        self.cancelled.clear()
        engine = self

        class S:
            completion = None

            def __iter__(self):
                n = 0
                while n < max_tokens and not engine.cancelled.is_set():
                    time.sleep(engine.step)
                    n += 1
                    yield SimpleNamespace(text="t")
                reason = "cancelled" if engine.cancelled.is_set() else "length"
                self.completion = _completion(finish_reason=reason)
                self.completion.finish_reason = reason

            def close(self):
                if self.completion is None:
                    self.completion = _completion()
                    self.completion.finish_reason = "cancelled"

        return S()


def test_worker_queue_is_bounded_fifo_and_cancels():
    async def run():
        loop = asyncio.get_running_loop()
        engine = FakeEngine(step=0.02)
        w = Worker(lambda: engine, queue_size=2)
        w.start()
        while w.state != "ready":
            await asyncio.sleep(0.01)
        req = lambda p, n: protocol.GenRequest("completion", "m", prompt=p, options={"max_tokens": n})  # noqa: E731
        a = Job(req("a", 1000), loop)
        w.submit(a)
        assert (await a.events.get())[0] == "started"
        b, c = Job(req("b", 2), loop), Job(req("c", 2), loop)
        w.submit(b)
        w.submit(c)
        with pytest.raises(QueueFull):
            w.submit(Job(req("d", 2), loop))
        assert w.waiting == 2 and w.running == 1
        w.cancel(c)  # waiting: dropped at once
        assert (await c.events.get())[0] == "dropped"
        w.cancel(a)  # running: stopped within a step
        t0 = time.monotonic()
        kinds = []
        while not kinds or kinds[-1] != "done":
            kinds.append((await a.events.get())[0])
        assert time.monotonic() - t0 < 0.5
        assert [k for k, _ in [await b.events.get() for _ in range(4)]] == ["started", "piece", "piece", "done"]
        assert engine.prompts == ["a", "b"]
        w.stop()

    asyncio.run(run())


def test_health_is_503_while_loading_and_generation_refused():
    from starlette.testclient import TestClient

    from quickdraft.server import Server, ServerConfig

    loaded = threading.Event()

    def slow_load():
        loaded.wait(10)
        return FakeEngine(step=0.001)

    srv = Server(ServerConfig(target="unused.gguf", model_name="m"))
    srv.worker = Worker(slow_load, 2, srv._done)
    with TestClient(srv.app()) as http:
        assert http.get("/health").status_code == 503 and http.get("/health").json()["status"] == "loading"
        r = http.post("/v1/completions", json={"model": "m", "prompt": "a", "max_tokens": 2})
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_loading"
        assert "quickdraft_ready 0" in http.get("/metrics").text
        loaded.set()
        deadline = time.monotonic() + 10
        while http.get("/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        r = http.post("/v1/completions", json={"model": "m", "prompt": "a", "max_tokens": 2})
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "tt"


def test_a_model_that_fails_to_load_is_reported():
    from starlette.testclient import TestClient

    from quickdraft.server import Server, ServerConfig

    def broken():
        raise ValueError("not a GGUF file")

    srv = Server(ServerConfig(target="bad.gguf", model_name="m"))
    srv.worker = Worker(broken, 2, srv._done)
    with TestClient(srv.app()) as http:
        deadline = time.monotonic() + 10
        while srv.worker.state == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        r = http.get("/health")
        assert r.status_code == 500 and "not a GGUF file" in r.json()["error"]
        r = http.post("/v1/completions", json={"model": "m", "prompt": "a"})
        assert r.status_code == 503 and "not a GGUF file" in r.json()["error"]["message"]


def test_server_config_names_a_hybrid_drafter():
    """`quickdraft serve --draft hybrid:MODEL` passes ("hybrid", path): requests may then ask for
    the hybrid drafter by name, not for "model"."""
    from quickdraft.server import ServerConfig

    assert ServerConfig(target="t", draft=("hybrid", "d.gguf")).drafter_kind == "hybrid"
    assert ServerConfig(target="t", draft="d.gguf").drafter_kind == "model"
