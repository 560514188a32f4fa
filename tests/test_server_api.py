"""The OpenAI API of a live `quickdraft serve` (SmolLM2-135M, n-gram drafter), driven by the
official `openai` client and by raw HTTP for the malformed cases. One server for the module."""

from __future__ import annotations

import json
import statistics
import threading
import time

import pytest

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

import quickdraft  # noqa: E402
from live_server import LiveServer, check_error  # noqa: E402

pytestmark = [pytest.mark.real, pytest.mark.server]

MODEL = "smollm2-135m"
CHAT = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def server(model_path):
    with LiveServer(model_path(MODEL), "--draft", "ngram", "--queue", "16", "--max-tokens", "256", "--n-ctx", "1024",
                    "--model-name", MODEL) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def test_health_models_and_unknown_routes(server, client):
    assert server.get("/health").json() == {"status": "ok", "model": MODEL}
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).owned_by == "quickdraft"
    check_error(server.get("/v1/models/gpt-4"), 404, "model", "model_not_found")
    check_error(server.get("/v1/nothing"), 404)
    check_error(server.get("/v1/chat/completions"), 405)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4", messages=CHAT, max_tokens=4)


def test_chat_streamed_pieces_concatenate_to_the_greedy_text(server, client, model_path):
    full = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=24, temperature=0)
    text = full.choices[0].message.content
    assert full.object == "chat.completion" and full.choices[0].message.role == "assistant"
    assert full.choices[0].finish_reason in ("stop", "length") and text
    u = full.usage
    assert u.completion_tokens <= 24 and u.total_tokens == u.prompt_tokens + u.completion_tokens
    # The same text as the engine in this process: the server adds nothing and loses nothing.
    with quickdraft.Engine(model_path(MODEL), threads=1) as engine:
        assert engine.chat(CHAT, max_tokens=24, temperature=0).text == text

    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == u.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_raw_sse_ends_with_done(server):
    r = server.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT, "max_tokens": 4, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [line for line in r.text.split("\n\n") if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"


def test_completions_streamed_and_not(server, client):
    prompt = "The capital of France is"
    full = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
    text = full.choices[0].text
    assert full.object == "text_completion" and text
    parts = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0, stream=True))
    assert "".join(p.choices[0].text for p in parts) == text
    echoed = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0, echo=True)
    assert echoed.choices[0].text == prompt + text
    ids = client.completions.create(model=MODEL, prompt=[504, 3575], max_tokens=3, temperature=0)
    assert ids.usage.prompt_tokens == 2


def test_sampling_parameters(server, client):
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Write a short poem about rain."}], max_tokens=16)
    a = client.chat.completions.create(temperature=0.9, top_p=0.9, seed=7, **kw).choices[0].message.content
    b = client.chat.completions.create(temperature=0.9, top_p=0.9, seed=7, **kw).choices[0].message.content
    assert a == b
    texts = {client.chat.completions.create(temperature=1.2, seed=s, **kw).choices[0].message.content for s in range(4)}
    assert len(texts) > 1
    greedy = client.chat.completions.create(temperature=0, **kw).choices[0].message.content
    word = greedy.split()[2]
    cut = client.chat.completions.create(temperature=0, stop=[word], **kw)
    assert cut.choices[0].finish_reason == "stop" and word not in cut.choices[0].message.content
    assert greedy.startswith(cut.choices[0].message.content)
    short = client.chat.completions.create(model=MODEL, messages=CHAT, max_completion_tokens=3, temperature=0)
    assert short.usage.completion_tokens == 3 and short.choices[0].finish_reason == "length"
    pen = client.chat.completions.create(temperature=0, presence_penalty=1.5, frequency_penalty=1.0, **kw)
    assert pen.choices[0].message.content != greedy


def test_prediction_changes_the_speed_not_the_text(server, client):
    messages = [{"role": "user", "content": "Write a Python function that returns the sum of a list."}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64, temperature=0)
    text = plain.choices[0].message.content
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0
    for prediction in (text, text.replace("def ", "def my_", 1), "unrelated words"):
        r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64, temperature=0,
                                           prediction={"type": "content", "content": prediction})
        assert r.choices[0].message.content == text
    exact = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64, temperature=0,
                                           prediction={"type": "content", "content": text})
    d = exact.usage.completion_tokens_details
    assert d.accepted_prediction_tokens >= plain.usage.completion_tokens // 2 and d.rejected_prediction_tokens <= 2
    assert exact.model_extra["speculative"]["sources"]["prediction"]["accepted"] == d.accepted_prediction_tokens
    streamed = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64, temperature=0, stream=True,
                                              stream_options={"include_usage": True},
                                              prediction={"type": "content", "content": text})
    chunks = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    # As many accepted as the call before: each call's prediction is judged on its own (its first
    # step probes it, whatever earlier calls taught the shared controller), then drafted in full.
    assert chunks[-1].usage.completion_tokens_details.accepted_prediction_tokens == d.accepted_prediction_tokens
    assert server.metric("quickdraft_prediction_tokens_total", verdict="accepted") >= 2 * d.accepted_prediction_tokens


def test_per_request_drafting(server, client):
    prompt = "Repeat exactly: one two three four five, one two three four five, one two three"
    # A fixed draft length: adapting, the server may have learned that n-gram drafts do not pay on
    # this machine (a verify of several rows costs nearly as many steps where the cores bind).
    texts, spec = {}, {}
    before = server.metric("quickdraft_drafted_tokens_total", source="ngram")
    for drafter in ("none", "ngram"):
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0,
                                      extra_body={"speculative": {"drafter": drafter, "draft_max": 4, "adaptive": False}})
        texts[drafter], spec[drafter] = r.choices[0].text, r.model_extra["speculative"]
    assert texts["none"] == texts["ngram"]
    assert spec["none"]["drafter"] == "none" and spec["none"]["drafted"] == 0
    assert spec["ngram"]["drafter"] == "ngram" and spec["ngram"]["drafted"] > 0
    assert spec["ngram"]["accepted"] <= spec["ngram"]["drafted"]
    assert server.metric("quickdraft_drafted_tokens_total", source="ngram") - before == spec["ngram"]["drafted"]
    p1 = server.metric("quickdraft_draft_position_drafted_total", position="1")
    assert 0 < server.metric("quickdraft_draft_position_accepted_total", position="1") <= p1
    with pytest.raises(openai.BadRequestError, match="speculative.drafter"):
        client.completions.create(model=MODEL, prompt=prompt, max_tokens=4, extra_body={"speculative": {"drafter": "model"}})


def test_the_kv_prefix_is_reused_across_requests(server, client):
    messages = [{"role": "system", "content": "You are a terse assistant. " * 8}, {"role": "user", "content": "Hi."}]
    client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, temperature=0)
    again = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens >= again.usage.prompt_tokens - 1 > 40


BAD = [
    (b"{not json", 400, None, "invalid_json"),
    (b"[1, 2]", 400, None, "invalid_json"),
    ({"messages": CHAT}, 400, "model", None),
    ({"model": MODEL}, 400, "messages", None),
    ({"model": MODEL, "messages": CHAT, "n": 2}, 400, "n", None),
    ({"model": MODEL, "messages": CHAT, "temperature": -1}, 400, "temperature", None),
    ({"model": MODEL, "messages": CHAT, "max_tokens": 100000}, 400, "max_tokens", None),
    ({"model": MODEL, "messages": CHAT, "foo": 1}, 400, "foo", "unknown_parameter"),
    ({"model": MODEL, "messages": CHAT, "logprobs": True}, 400, "logprobs", "unsupported_parameter"),
    ({"model": MODEL, "messages": CHAT, "stream_options": {"include_usage": True}}, 400, "stream_options", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x " * 3000}]}, 400, "messages", None),
    ({"model": "other", "messages": CHAT}, 404, "model", "model_not_found"),
    ({"model": MODEL, "messages": CHAT, "prediction": {"type": "content", "content": "a\ud800"}}, 400, "prediction", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "a\udc80"}]}, 400, "messages", None),
]


@pytest.mark.parametrize("body, status, param, code", BAD, ids=[str(i) for i in range(len(BAD))])
def test_malformed_requests_get_openai_errors(server, body, status, param, code):
    # ensure_ascii: a lone surrogate travels as the JSON escape \ud800, as a client would send it.
    kw = {"content": body if isinstance(body, bytes) else json.dumps(body).encode()}
    check_error(server.post("/v1/chat/completions", **kw), status, param, code)


def test_body_size_is_capped(server):
    check_error(server.post("/v1/completions", json={"model": MODEL, "prompt": "x" * (9 << 20)}), 413)
    assert server.get("/health").status_code == 200


def test_health_and_metrics_answer_during_a_long_prompt(server):
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 90  # ~900 tokens of prompt processing
    done = {}
    t = threading.Thread(target=lambda: done.update(r=server.post(
        "/v1/completions", json={"model": MODEL, "prompt": long_prompt, "max_tokens": 64, "temperature": 0})))
    t.start()
    waits = []
    try:
        deadline = time.monotonic() + 30
        while server.metric("quickdraft_queue_running") == 0 and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.005)
        while t.is_alive() and len(waits) < 5:
            t0 = time.monotonic()
            assert server.get("/health").status_code == 200
            waits.append(time.monotonic() - t0)
    finally:
        t.join()
    assert done["r"].status_code == 200
    assert waits, "the long request finished before /health could be asked"
    assert max(waits) < 1.0, waits


def test_load_8_clients_x_10_requests(server):
    """Bounded load: every response complete and well-formed, none lost, no 429 within the queue."""
    results, lock = [], threading.Lock()

    def one_client(i: int) -> None:
        c = server.client()
        for j in range(10):
            t0 = time.monotonic()
            body = dict(model=MODEL, messages=[{"role": "user", "content": f"Say the number {i}."}], max_tokens=6,
                        temperature=0)
            try:
                if j % 2:
                    chunks = list(c.chat.completions.create(stream=True, **body))
                    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
                    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
                    ok = len(finish) == 1
                else:
                    r = c.chat.completions.create(**body)
                    text, ok = r.choices[0].message.content, r.choices[0].finish_reason in ("stop", "length")
                out = (i, j, ok, text, None)
            except openai.APIError as e:
                out = (i, j, False, None, e)
            with lock:
                results.append(out + (time.monotonic() - t0,))

    before = server.metric("quickdraft_requests_total", endpoint="/v1/chat/completions", status="200")
    threads = [threading.Thread(target=one_client, args=(i,)) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    errors = [r for r in results if r[4] is not None or not r[2]]
    assert len(results) == 80 and not errors, errors[:3]
    # Greedy: each client's ten answers are the same text, streamed or not.
    for i in range(8):
        assert len({r[3] for r in results if r[0] == i}) == 1
    after = server.metric("quickdraft_requests_total", endpoint="/v1/chat/completions", status="200")
    assert after - before == 80
    lat = sorted(r[5] for r in results)
    p50, p95 = statistics.median(lat), lat[int(0.95 * len(lat)) - 1]
    print(f"\nload: 80 requests in {wall:.1f} s, p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
          f"max {lat[-1] * 1000:.0f} ms, 0 errors")
