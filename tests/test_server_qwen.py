"""A live `quickdraft serve` on the Qwen2.5-Coder pair (0.5B drafting for 1.5B): per-request
drafters and predicted outputs on a real draft model, the text always the target's own."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

from live_server import LiveServer  # noqa: E402

pytestmark = [pytest.mark.real, pytest.mark.server]

MODEL = "qwen2.5-coder-1.5b"
CODE = '''def area(width, height):
    """The area of a rectangle."""
    return width * height


def perimeter(width, height):
    return 2 * (width + height)
'''
EDIT = [{"role": "system", "content": "You edit code. Reply with the whole edited code only, in one code block."},
        {"role": "user", "content": "Rename the function perimeter to rect_perimeter:\n```python\n" + CODE + "```"}]


@pytest.fixture(scope="module")
def server(model_path):
    with LiveServer(model_path(MODEL), "--draft", str(model_path("qwen2.5-coder-0.5b")), "--model-name", MODEL,
                    "--max-tokens", "256", "--n-ctx", "1024") as srv:
        yield srv


def test_per_request_drafters_give_the_same_text(server):
    client = server.client()
    msgs = [{"role": "user", "content": "Write a Python function that reverses a string."}]
    texts, spec, prompt_tokens = {}, {}, {}
    for drafter in ("model", "none", "ngram"):
        r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=32, temperature=0,
                                           extra_body={"speculative": {"drafter": drafter, "adaptive": False}})
        texts[drafter], spec[drafter] = r.choices[0].message.content, r.model_extra["speculative"]
        prompt_tokens[drafter] = r.usage.prompt_tokens
    assert texts["model"] == texts["none"] == texts["ngram"]
    assert spec["model"]["drafter"] == "draft" and spec["model"]["sources"]["draft"]["drafted"] > 0
    assert spec["none"]["drafted"] == 0
    # The draft model read the prompt (all of it but the last token, which its first draft step
    # evaluates); the others read none.
    assert spec["model"]["draft_prompt_tokens"] == prompt_tokens["model"] - 1
    assert spec["none"]["draft_prompt_tokens"] == spec["ngram"]["draft_prompt_tokens"] == 0
    assert server.metric("quickdraft_draft_prompt_tokens_total") >= spec["model"]["draft_prompt_tokens"]
    assert server.metric("quickdraft_drafted_tokens_total", source="draft") >= spec["model"]["drafted"]
    assert server.metric("quickdraft_accepted_tokens_total", source="draft") >= spec["model"]["accepted"]
    with pytest.raises(openai.BadRequestError, match="self"):
        client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4,
                                       extra_body={"speculative": {"drafter": "self"}})


def test_prediction_of_an_edit_gives_the_same_text(server):
    client = server.client()
    kw = dict(model=MODEL, messages=EDIT, max_tokens=96, temperature=0)
    plain = client.chat.completions.create(**kw)
    text = plain.choices[0].message.content
    assert "rect_perimeter" in text  # the edit was made
    # The file as it was (what an editor sends), and the answer with the edit undone: the model's
    # own text but for the edited name, whatever else it chose to write.
    for prediction in ("```python\n" + CODE + "```", text.replace("rect_perimeter", "perimeter")):
        pred = client.chat.completions.create(prediction={"type": "content", "content": prediction}, **kw)
        assert pred.choices[0].message.content == text
    d = pred.usage.completion_tokens_details
    spec = pred.model_extra["speculative"]
    assert d.accepted_prediction_tokens >= pred.usage.completion_tokens // 2
    assert spec["sources"]["prediction"]["drafted"] == d.accepted_prediction_tokens + d.rejected_prediction_tokens
    # Most tokens come out in multi-token steps: the prediction is accepted around the edit.
    assert spec["steps"] * 2 <= pred.usage.completion_tokens
    # The draft model is the fallback where the prediction does not match.
    assert "draft" in spec["sources"]
