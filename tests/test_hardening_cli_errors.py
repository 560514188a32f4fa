"""Issue 12 F6: the CLI turns every quickdraft error, MemoryError and ValueError into one
"quickdraft: error: ..." line with exit 2, never a traceback, for bad user input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SMOL = "smollm2-135m"


def qd(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "quickdraft", *args], capture_output=True, timeout=timeout, env=env)
    r.stderr = r.stderr.decode("utf-8", "replace")
    r.stdout = r.stdout.decode("utf-8", "replace")
    return r


def assert_clean_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("quickdraft: error: ")]
    assert len(errors) == 1, r.stderr
    for f in fragments:
        assert f in errors[0], r.stderr


@pytest.mark.real
@pytest.mark.parametrize("args, fragments", [
    (["--seed", "-1"], ["seed must be an integer in [0, 2**64)", "got -1"]),
    (["--seed", str(2**70)], ["seed must be an integer in [0, 2**64)"]),
    (["--n-ctx", "1000000000"], ["n_ctx 1000000000 needs a KV cache of", "bytes", "smaller n_ctx"]),
    (["--n-ctx", "99999999999"], ["n_ctx must be in [1, 2147483647], got 99999999999"]),
    (["--threads", "-1"], ["threads must be None (one per core) or >= 1, got -1"]),
    (["--temperature", "-1"], ["temperature must be >= 0"]),
])
def test_bad_values(model_path, args, fragments):
    model_path(SMOL)
    r = qd("run", "Hello", "--target", SMOL, "--draft", "ngram", "--max-tokens", "4", *args)
    assert_clean_error(r, *fragments)


@pytest.mark.real
def test_a_prompt_of_non_utf8_bytes(model_path):
    model_path(SMOL)
    r = qd("run", b"\xff\xfehello", "--target", SMOL, "--draft", "ngram", "--max-tokens", "4")
    assert_clean_error(r, "prompt cannot be encoded as UTF-8", "byte 0xff at index 0")


@pytest.mark.real
def test_warnings_are_one_line_each_and_the_run_goes_on(model_path):
    model_path(SMOL)
    r = qd("run", "Hello", "--target", SMOL, "--draft", "ngram", "--max-tokens", "4", "--threads", "999",
           "--n-ctx", "9000")
    assert r.returncode == 0, r.stderr
    warn = [line for line in r.stderr.splitlines() if line.startswith("quickdraft: warning: ")]
    assert len(warn) == 2 and "threads=999" in warn[0] and "n_ctx 9000 is larger than the 8192" in warn[1], r.stderr
    assert "RuntimeWarning" not in r.stderr and r.stdout.strip()


def test_a_missing_or_bad_model_file(tmp_path):
    r = qd("run", "Hello", "--target", str(tmp_path / "none.gguf"), "--draft", "none")
    assert_clean_error(r)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 8)
    r = qd("run", "Hello", "--target", str(bad), "--draft", "none")
    assert_clean_error(r, "bad.gguf")


def test_a_hostile_chat_template_is_a_clean_error(monkeypatch, capsys):
    # A model whose chat template tries a 10 GB string: `run` says so (it used to fall back to the
    # raw prompt on any template error, hiding it).
    from quickdraft import chat, cli

    class Tok:
        chat_template = "{{ 'x' * 10**10 }}"

        def apply_chat_template(self, messages, add_generation_prompt=True):
            return chat.render({}, messages, add_generation_prompt, template=self.chat_template)

    class FakeEngine:
        tokenizer = Tok()

    monkeypatch.setattr(cli, "_make_engine", lambda args, draft=None: FakeEngine())
    assert cli.main(["run", "Hello", "--target", "x.gguf"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("quickdraft: error: chat template stopped: the result of '*'") and "Traceback" not in err
