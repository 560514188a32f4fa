"""Issue 12 F5: chat templates (untrusted: they come with the model file) render under a time
limit and a size limit, and every failure inside one raises ChatTemplateError with the reason."""

from __future__ import annotations

import time

import pytest

from quickdraft import chat
from quickdraft.chat import ChatTemplateError

MD = {"tokenizer.ggml.tokens": ["<s>", "</s>"], "tokenizer.ggml.bos_token_id": 0}
MSGS = [{"role": "user", "content": "hi"}]
NESTED = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def render(template, **kw):
    return chat.render(MD, MSGS, template=template, **kw)


def test_nested_loops_stop_at_the_time_limit():
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match=r"longer than the time limit of 2 s"):
        render(NESTED)
    assert time.monotonic() - t0 < 5
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match=r"time limit of 0.3 s"):
        render(NESTED, time_limit=0.3)
    assert time.monotonic() - t0 < 2


def test_the_time_limit_default_is_configurable(monkeypatch):
    monkeypatch.setattr(chat, "DEFAULT_TIME_LIMIT", 0.2)
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match="time limit of 0.2 s"):
        render(NESTED)
    assert time.monotonic() - t0 < 2


@pytest.mark.parametrize("template, what", [
    ("{{ 'x' * 10**10 }}", "'\\*'"),
    ("{{ 10**10 * 'x' }}", "'\\*'"),
    ("{{ 'x'|center(10**10) }}", "'center' filter"),
    ("{{ 'x'.ljust(10**10) }}", "ljust"),
    ("{{ '%10000000000s' % 'x' }}", "'%' format"),
    ("{{ '{:>10000000000}'.format('x') }}", "str.format"),
    ("{% set s = 'x' * 100000 %}{{ s.replace('', s) }}", "replace"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "'~'"),
    ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}", "output is longer"),
    ("{{ messages|tojson(indent=10**9) }}", "'tojson' filter"),
])
def test_huge_values_are_refused_before_they_are_built(template, what):
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match=f"{what}.*limit of 1000000"):
        render(template)
    assert time.monotonic() - t0 < 1, "the value was built before being refused"


def test_the_size_limit_is_configurable(monkeypatch):
    assert render("{{ 'x' * 2000 }}", max_chars=2000) == "x" * 2000
    with pytest.raises(ChatTemplateError, match="limit of 1999"):
        render("{{ 'x' * 2000 }}", max_chars=1999)
    monkeypatch.setattr(chat, "DEFAULT_MAX_CHARS", 10)
    with pytest.raises(ChatTemplateError, match="limit of 10 characters"):
        render("{% for m in range(20) %}a{% endfor %}")


@pytest.mark.parametrize("template, reason", [
    ("{{ 2.0 ** 10000 }}", "OverflowError"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "RecursionError"),
    ("{{ 1 // 0 }}", "ZeroDivisionError"),
    ("{{ messages[0].content + 1 }}", "TypeError"),
    ("{{ raise_exception('no system role') }}", "no system role"),
])
def test_every_failure_inside_a_template_is_a_chat_template_error(template, reason):
    with pytest.raises(ChatTemplateError, match=reason):
        render(template)


def test_bad_limits_are_value_errors_of_the_caller():
    with pytest.raises(ValueError, match="time_limit must be > 0"):
        render("x", time_limit=0)
    with pytest.raises(ValueError, match="max_chars must be a positive integer"):
        render("x", max_chars=-5)


def test_normal_templates_render_as_before():
    t = "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}{{ '%-4s|' % 'ab' }}"
    assert render(t) == "<|user|>hi\nab  |"
    for _ in range(50):  # the time limit's watchdog leaves no pending exception behind
        assert render("{{ bos_token }}ok", time_limit=0.01) == "<s>ok"
    time.sleep(0.05)


@pytest.mark.real
def test_issue_reproducer_chat_on_an_engine(model_path):
    from quickdraft import Engine

    e = Engine(model_path("smollm2-135m"), draft="ngram", threads=1)
    tok = e.tokenizer
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match="time limit"):
        tok.apply_chat_template(MSGS, template=NESTED)
    with pytest.raises(ChatTemplateError, match="limit of 1000000"):
        tok.apply_chat_template(MSGS, template="{{ 'x' * 10**10 }}")
    assert time.monotonic() - t0 < 6
    assert e.chat(MSGS, max_tokens=8, temperature=0).text  # the engine's own template still renders
