"""The `quickdraft` command line, driven as a user would: subprocesses, stdin for chat."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SMOL = "smollm2-135m"


def qd(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "quickdraft", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_help_lists_every_command():
    r = qd("--help")
    assert r.returncode == 0
    for cmd in ("run", "chat", "bench", "serve", "inspect", "fetch", "models"):
        assert cmd in r.stdout


def test_serve_help_and_the_base_install_does_not_import_the_server_stack():
    r = qd("serve", "--help")
    assert r.returncode == 0
    for opt in ("--host", "--port", "--api-key", "--queue", "--max-tokens", "--max-body", "--draft"):
        assert opt in r.stdout
    assert "127.0.0.1" in r.stdout
    r = subprocess.run([sys.executable, "-c", "import sys, quickdraft, quickdraft.cli; "
                        "print(sorted(m for m in ('starlette', 'uvicorn') if m in sys.modules))"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_models_lists_known_keys():
    r = qd("models")
    assert r.returncode == 0
    for key in ("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert key in r.stdout


@pytest.mark.real
def test_inspect_by_key_and_path(model_path):
    path = model_path("qwen2.5-coder-0.5b")
    by_path = qd("inspect", str(path))
    by_key = qd("inspect", "qwen2.5-coder-0.5b")
    assert by_path.returncode == 0 and by_key.returncode == 0
    assert "architecture:    qwen2" in by_path.stdout and "Q5_0" in by_path.stdout
    assert by_path.stdout.splitlines()[1:] == by_key.stdout.splitlines()[1:]


INSPECT_CASES = {
    "qwen3": (dict(head_dim=32, rope_scaling="yarn", rope_factor=4.0, rope_orig_ctx=256),
              ["head_dim 32 (not n_embd / n_head = 16)", "q/k norms", "rope scaling yarn x4 (original context 256)"]),
    "phi3": (dict(longrope=True, n_rot=8, sliding_window=8, rope_attn_factor=1.19),
             ["fused qkv", "fused gate/up", "partial rotary (8 of 16 dims)", "LongRoPE", "attn_factor 1.19",
              "sliding window 8 (ignored for phi3"]),
    "smollm3": ({}, ["no rope on every 4th layer"]),
    "qwen3moe": (dict(head_dim=32, n_expert=8, n_expert_used=2, n_ff_exp=64),
                 ["MoE: 8 experts, top-2 per token, expert n_ff 64", "q/k norms"]),
    "gemma3": (dict(sliding_window=6, swa_pattern=2, logit_softcap=5.0),
               ["q/k norms", "sliding window 6, pattern 2", "logit softcap 5"]),
    "llama": (dict(rope_linear_factor=4.0), ["rope scaling linear x4"]),
    "qwen35": (dict(n_layer=4, head_dim=32, n_rot=8, n_mtp=1),
               ["hybrid: 3 Gated DeltaNet + 1 gated attention layers (every 4th layer attention)",
                "Gated DeltaNet: 2 k / 4 v heads of 16, conv kernel 4", "gated attention (sigmoid output gate), q/k norms",
                "partial rotary (8 of 32 dims)", "M-RoPE sections [2, 1, 1, 0]", "MTP: 1 nextn layer(s)"]),
}


@pytest.mark.parametrize("arch", list(INSPECT_CASES))
def test_inspect_names_family_features(tmp_path, arch):
    from fixtures.tiny_models import TinySpec, write_tiny_model

    extra, want = INSPECT_CASES[arch]
    path = write_tiny_model(tmp_path / f"{arch}.gguf", TinySpec(arch=arch, **extra))
    r = qd("inspect", str(path))
    assert r.returncode == 0, r.stderr
    features = next(line for line in r.stdout.splitlines() if line.startswith("features:"))
    for w in want:
        assert w in features, f"{w!r} not in {features!r}"
    assert "supported:       yes" in r.stdout


def test_inspect_plain_llama_has_no_features_and_unknown_arch_is_named(tmp_path):
    import gguf
    import numpy as np

    from fixtures.tiny_models import TinySpec, write_tiny_model

    r = qd("inspect", str(write_tiny_model(tmp_path / "l.gguf", TinySpec(arch="llama"))))
    assert "features:        -" in r.stdout
    w = gguf.GGUFWriter(str(tmp_path / "mamba.gguf"), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = qd("inspect", str(tmp_path / "mamba.gguf"))
    assert r.returncode == 0 and "supported:       no (supported: llama, qwen2" in r.stdout


def test_default_drafter_is_the_known_pair_else_ngram(tmp_path):
    from quickdraft import models

    assert models.default_draft("qwen2.5-coder-1.5b") == "qwen2.5-coder-0.5b"
    assert models.default_draft(tmp_path / models.KNOWN_MODELS["qwen2.5-coder-1.5b"].filename) == "qwen2.5-coder-0.5b"
    assert models.default_draft("smollm2-135m") == "ngram"
    assert models.default_draft(tmp_path / "Qwen3-8B-Q4_K_M.gguf") == "ngram"
    r = qd("run", "--help")
    assert "else ngram" in " ".join(r.stdout.split())


@pytest.mark.real
def test_run_without_draft_uses_ngram_for_a_target_without_a_known_pair(model_path):
    model_path(SMOL)
    r = qd("run", "Count to five.", "--target", SMOL, "--max-tokens", "8", "--threads", "2")
    assert r.returncode == 0, r.stderr
    assert "with drafter ngram" in r.stderr and "[ngram]" in r.stderr
    assert "qwen" not in r.stderr.lower()


def test_inspect_bad_file_is_a_clean_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 8)
    r = qd("inspect", str(bad))
    assert r.returncode == 2
    assert "bad.gguf" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.real
@pytest.mark.parametrize("draft", ["ngram", SMOL, "none"])
def test_run_streams_text_and_stats(model_path, draft):
    model_path(SMOL)
    r = qd("run", "Write a haiku about the sea.", "--target", SMOL, "--draft", draft, "--max-tokens", "24",
           "--threads", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), "no generated text on stdout"
    assert "tok/s" in r.stderr and "finish:" in r.stderr


@pytest.mark.real
def test_run_with_a_requantized_draft(model_path):
    model_path(SMOL)
    args = ("run", "Count to five.", "--target", SMOL, "--draft", SMOL, "--max-tokens", "16", "--threads", "2")
    r = qd(*args, "--draft-quant", "q4_0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() and "accepted" in r.stderr
    r = qd(*args, "--draft-quant", "q9_9")
    assert r.returncode != 0 and "cannot requantize weights to 'q9_9'" in r.stderr


@pytest.mark.real
def test_run_with_a_draft_window(model_path):
    model_path(SMOL)
    args = ("run", "Count to five.", "--target", SMOL, "--draft", SMOL, "--max-tokens", "16", "--threads", "2")
    for window in ("3", "all"):
        r = qd(*args, "--draft-window", window)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() and "accepted" in r.stderr
    for bad, message in (("0", "draft_window must be"), ("many", "--draft-window takes a token count")):
        r = qd(*args, "--draft-window", bad)
        assert r.returncode == 2 and message in r.stderr, r.stderr


@pytest.mark.real
def test_run_with_a_hybrid_drafter(model_path):
    """--draft hybrid:MODEL loads the n-gram lookup beside the model: the run names both sources'
    engine kind, and an unknown model after the prefix is an error that names it."""
    model_path(SMOL)
    args = ("run", "Count to five, twice.", "--target", SMOL, "--max-tokens", "24", "--threads", "2", "--temp", "0")
    plain = qd(*args, "--draft", "none")
    r = qd(*args, "--draft", f"hybrid:{SMOL}")
    assert r.returncode == 0 and plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and "accepted" in r.stderr
    assert "with drafter hybrid:" in r.stderr
    bad = qd(*args, "--draft", "hybrid:no-such-model")
    assert bad.returncode != 0 and "no-such-model" in bad.stderr, bad.stderr


@pytest.mark.real
def test_run_compare_prints_speedup(model_path):
    model_path(SMOL)
    r = qd("run", "List the days of the week.", "--target", SMOL, "--draft", "ngram", "--max-tokens", "16", "--compare")
    assert r.returncode == 0, r.stderr
    assert "speedup over plain decoding" in r.stderr


@pytest.mark.real
def test_bench_prints_a_table(model_path):
    model_path(SMOL)
    r = qd("bench", "--target", SMOL, "--drafters", "ngram", "--prompt", "Count from one to ten.", "--max-tokens", "16")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert lines[0].split()[:3] == ["drafter", "prompt", "tok/s"]
    assert any(ln.startswith("none") for ln in lines) and any(ln.startswith("ngram") for ln in lines)


@pytest.mark.real
def test_chat_through_stdin(model_path):
    model_path(SMOL)
    r = qd("chat", "--target", SMOL, "--draft", "ngram", "--max-tokens", "16", "--temperature", "0",
           stdin="Hello!\n/stats\n/reset\nWhat is 2+2?\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "history cleared" in r.stderr
    assert "tok/s" in r.stderr  # /stats after the first reply
    assert len([ln for ln in r.stdout.splitlines() if ln.strip()]) >= 2  # two replies


def test_unknown_model_is_a_clean_error():
    r = qd("run", "hi", "--target", "no-such-model", "--draft", "none")
    assert r.returncode == 2
    assert "no-such-model" in r.stderr and "Traceback" not in r.stderr
