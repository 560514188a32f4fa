"""A live `quickdraft serve` under faults: API key, a full queue (429), clients that disconnect
mid-stream (cancelled within a step, the server still serving, its RSS flat)."""

from __future__ import annotations

import json
import threading
import time

import pytest

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from live_server import LiveServer, check_error  # noqa: E402

pytestmark = [pytest.mark.real, pytest.mark.server]

MODEL = "smollm2-135m"
KEY = "sk-test-key"
# A prompt SmolLM2 continues for hundreds of tokens: long enough to hold the engine.
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,"
LONG = {"model": MODEL, "prompt": COUNTING, "max_tokens": 1000, "temperature": 0, "stream": True}


@pytest.fixture(scope="module")
def server(model_path):
    with LiveServer(model_path(MODEL), "--queue", "2", "--max-tokens", "1000", "--model-name", MODEL,
                    api_key=KEY) as srv:
        yield srv


def test_api_key_is_enforced(server):
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 2}
    err = check_error(server.post("/v1/completions", json=body, headers={"Authorization": ""}), 401,
                      code="invalid_api_key")
    assert "API key" in err["message"]
    check_error(server.post("/v1/completions", json=body, headers={"Authorization": "Bearer wrong"}), 401)
    check_error(httpx.get(server.base_url + "/v1/models"), 401)
    check_error(httpx.get(server.base_url + "/metrics"), 401)
    assert httpx.get(server.base_url + "/health").status_code == 200  # health stays open for probes
    assert server.post("/v1/completions", json=body).status_code == 200
    bad = openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    assert [m.id for m in server.client().models.list().data] == [MODEL]


def _wait_for(cond, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_full_queue_gets_429_and_the_queued_requests_are_served(server):
    client = server.client()
    with httpx.Client(timeout=120, headers=server.headers()) as http:
        with http.stream("POST", server.base_url + "/v1/completions", json=LONG) as running:
            lines = running.iter_lines()
            assert next(lines).startswith("data: ")  # the engine is busy with it now
            answers = {}

            def queued(name):
                answers[name] = client.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0)

            waiting = [threading.Thread(target=queued, args=(n,)) for n in ("b", "c")]
            for t in waiting:
                t.start()
            _wait_for(lambda: server.metric("quickdraft_queue_waiting") == 2)
            r = server.post("/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 2})
            check_error(r, 429, code="queue_full")
            assert r.headers.get("retry-after") == "1"
            with pytest.raises(openai.RateLimitError):
                client.completions.create(model=MODEL, prompt="Hi", max_tokens=2)
            assert all(t.is_alive() for t in waiting)  # still waiting, not refused
        # Leaving the block hung up on the running stream: the queued two are served next.
        for t in waiting:
            t.join(120)
    assert set(answers) == {"b", "c"} and all(a.choices[0].text is not None for a in answers.values())
    assert answers["b"].choices[0].text == answers["c"].choices[0].text
    assert server.metric("quickdraft_generations_total", drafter="none", finish_reason="cancelled") >= 1


def test_disconnects_cancel_within_a_step_and_leave_rss_flat(server):
    body = json.dumps(LONG).encode()
    gens = lambda: server.metric("quickdraft_generations_total", drafter="none", finish_reason="cancelled")  # noqa: E731
    tokens = lambda: server.metric("quickdraft_completion_tokens_total")  # noqa: E731
    # Warm up: the first disconnects pay first-use allocations.
    for _ in range(3):
        server.raw_stream_and_hang_up(body, read_bytes=400)
    _wait_for(lambda: server.metric("quickdraft_queue_running") == 0)
    rss_before, cancelled_before, tokens_before = server.rss_kib(), gens(), tokens()
    for i in range(20):
        got = server.raw_stream_and_hang_up(body, read_bytes=400)
        assert got.startswith(b"HTTP/1.1 200") and b"data: " in got
        # Cancelled within a step: the engine is free again long before 1000 tokens.
        _wait_for(lambda: server.metric("quickdraft_queue_running") == 0, timeout=10)
    _wait_for(lambda: gens() - cancelled_before == 20, timeout=10)
    per_stream = (tokens() - tokens_before) / 20
    assert per_stream < 200, per_stream
    rss_after = server.rss_kib()
    assert rss_after - rss_before < 16 * 1024, (rss_before, rss_after)
    print(f"\ndisconnects: 20 cancelled, {per_stream:.0f} tokens each, RSS {rss_before} -> {rss_after} KiB")
    # ... and the next request is served normally.
    r = server.client().completions.create(model=MODEL, prompt="The capital of France is", max_tokens=5,
                                           temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    assert server.metric("quickdraft_cancelled_total") >= 20
