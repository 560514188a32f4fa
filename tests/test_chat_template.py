"""Chat templates from GGUF metadata, against the exact ChatML text the Qwen2.5 and SmolLM2
formats define (<|im_start|>role\\ncontent<|im_end|>\\n ... <|im_start|>assistant\\n)."""

from __future__ import annotations

import json

import pytest

from quickdraft import Tokenizer, chat

QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
SMOL_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(turns, generation_prompt=True):
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


@pytest.fixture(scope="module")
def qwen(model_path):
    return Tokenizer(model_path("qwen2.5-coder-0.5b"))


@pytest.fixture(scope="module")
def smol(model_path):
    return Tokenizer(model_path("smollm2-135m"))


@pytest.mark.real
def test_qwen_system_user_assistant(qwen):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}]
    expected = chatml([("system", "Be brief."), ("user", "What is 2+2?"), ("assistant", "4"), ("user", "And 3+3?")])
    assert qwen.apply_chat_template(msgs) == expected
    assert chat.render(qwen, msgs, add_generation_prompt=False) == expected[: -len("<|im_start|>assistant\n")]


@pytest.mark.real
def test_qwen_default_system_prompt(qwen):
    msgs = [{"role": "user", "content": "Hi"}]
    assert qwen.apply_chat_template(msgs) == chatml([("system", QWEN_DEFAULT_SYSTEM), ("user", "Hi")])


@pytest.mark.real
def test_qwen_tools_and_tool_messages(qwen):
    tool = {"type": "function", "function": {"name": "add", "description": "Add <a> & <b>",
                                             "parameters": {"type": "object"}}}
    msgs = [{"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2}}}]},
            {"role": "tool", "content": "4"}]
    out = qwen.apply_chat_template(msgs, tools=[tool])
    system = (QWEN_DEFAULT_SYSTEM + "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
              + json.dumps(tool) + "\n</tools>\n\nFor each function call, return a json object with function name and "
              "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
              "\"arguments\": <args-json-object>}\n</tool_call>")
    expected = (chatml([("system", system), ("user", "2+2?")], False)
                + '<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 2}}\n</tool_call><|im_end|>\n'
                + "<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert out == expected  # tojson must not HTML-escape (<a> & <b> stay as they are)


@pytest.mark.real
def test_smollm_template(smol):
    msgs = [{"role": "user", "content": "Hello"}]
    assert smol.apply_chat_template(msgs) == chatml([("system", SMOL_DEFAULT_SYSTEM), ("user", "Hello")])
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert smol.apply_chat_template(msgs, add_generation_prompt=False) == chatml([("system", "S"), ("user", "U")], False)


@pytest.mark.real
def test_rendered_prompt_tokenizes_with_control_tokens(qwen):
    text = qwen.apply_chat_template([{"role": "user", "content": "Hi"}])
    ids = qwen.encode(text, parse_special=True)
    im_start = qwen.encode("<|im_start|>", parse_special=True)[0]
    assert ids.count(im_start) == 3 and qwen.eot_id == qwen.encode("<|im_end|>", parse_special=True)[0]


@pytest.mark.real
def test_gemma_base_has_no_template(model_path):
    gemma = Tokenizer(model_path("gemma3-270m"))
    assert gemma.chat_template is None
    with pytest.raises(ValueError, match="no chat template"):
        gemma.apply_chat_template([{"role": "user", "content": "Hi"}])
    tmpl = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n"
            "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
    out = gemma.apply_chat_template([{"role": "user", "content": "Hi"}], template=tmpl)
    assert out == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_metadata_dict_source_and_helpers():
    md = {"tokenizer.chat_template": "{{ bos_token }}|{{ eos_token }}|{{ strftime_now('%Y') | length }}",
          "tokenizer.ggml.tokens": ["<s>", "</s>"], "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 1}
    assert chat.render(md, []) == "<s>|</s>|4"


def test_raise_exception_and_sandbox():
    md = {"tokenizer.chat_template": "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% endif %}ok"}
    assert chat.render(md, [{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(ValueError, match="first must be user"):
        chat.render(md, [{"role": "assistant", "content": "x"}])
    evil = {"tokenizer.chat_template": "{{ messages.__class__.__mro__ }}"}
    with pytest.raises(ValueError):
        chat.render(evil, [{"role": "user", "content": "x"}])
    mutate = {"tokenizer.chat_template": "{{ messages.append(1) }}"}
    with pytest.raises(ValueError):
        chat.render(mutate, [{"role": "user", "content": "x"}])
