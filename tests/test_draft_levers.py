"""Cheaper drafts: a draft model requantized at load (draft_quant), a draft model with layers
skipped (draft_skip), and the draft head's size. Oracles: gguf.quants.quantize for the Q4_0
quantizer, bit for bit; a file written already requantized (gguf-py: quantize to the stored type,
dequantize, quantize to Q4_0) for the model requantized at load, logits bit for bit; and plain
greedy decoding, which greedy speculation must reproduce token for token whatever the draft."""

from __future__ import annotations

import os
import subprocess
import sys

import gguf
import numpy as np
import pytest

from quickdraft import Engine, _core
from fixtures.tiny_models import TinySpec, write_tiny_model

T = gguf.GGMLQuantizationType
PROMPT = [3, 17, 5, 3, 17, 9, 40, 3, 17, 70, 81]


# -- the Q4_0 quantizer -------------------------------------------------------------------------

def q4_0_inputs():
    rng = np.random.default_rng(7)
    for scale in (1.0, 1e-3, 3e4):
        x = (rng.standard_normal(32 * 257) * scale).astype(np.float32)
        x[:32] = 0                      # an all-zero block: d = 0
        x[32:64] = np.float32(0.375)    # all equal
        x[64], x[65] = 2 * scale, -2 * scale  # +max and -max tie: the first one sets the sign
        x[96:128] = rng.integers(-8, 8, 32).astype(np.float32) * np.float32(scale / 8)  # exact grid points
        yield scale, x


@pytest.mark.parametrize("scale,x", list(q4_0_inputs()), ids=lambda v: str(v) if np.isscalar(v) else "")
def test_q4_0_quantizer_is_gguf_bit_for_bit(scale, x):
    want = gguf.quants.quantize(x.reshape(-1, 32), T.Q4_0).reshape(-1)
    np.testing.assert_array_equal(_core.quantize(x, int(T.Q4_0)), want)


def test_quantize_refuses_types_it_cannot_write():
    with pytest.raises(_core.UnsupportedError, match="Q5_0"):
        _core.quantize(np.zeros(32, np.float32), int(T.Q5_0))
    with pytest.raises(ValueError, match="multiple of the block size"):
        _core.quantize(np.zeros(31, np.float32), int(T.Q4_0))


# -- a model requantized at load --------------------------------------------------------------

@pytest.mark.parametrize("arch,wtype,embd_type,tied", [
    ("qwen2", "Q8_0", None, True),
    ("llama", "Q5_0", "Q8_0", False),
    ("gemma3", "F16", None, True),
    ("qwen2", "Q4_1", "Q5_1", False),
])
def test_requantized_at_load_is_the_file_requantized_offline(tmp_path, arch, wtype, embd_type, tied):
    spec = TinySpec(arch=arch, n_layer=2, n_vocab=96, wtype=wtype, embd_type=embd_type, tied=tied, seed=5)
    stored = write_tiny_model(tmp_path / "stored.gguf", spec)
    offline = write_tiny_model(tmp_path / "offline.gguf", TinySpec(**{**spec.__dict__, "requantized": "Q4_0"}))
    at_load = _core.LoadedModel(str(stored), requantize="q4_0")
    want = _core.LoadedModel(str(offline))
    # every matrix a forward pass multiplies by is Q4_0; an embedding only looked up keeps its type
    types = at_load.matrix_types
    assert types.pop("token_embd.weight") == ("Q4_0" if tied else embd_type)
    assert set(types.values()) == {"Q4_0"}
    assert at_load.matrix_types == want.matrix_types
    np.testing.assert_array_equal(_core.Context(at_load, 64, 2).eval(PROMPT), _core.Context(want, 64, 2).eval(PROMPT))


def test_narrower_and_equal_types_are_kept(tmp_path):
    """Matrices already Q4_0 stay as stored; only the wider ones (here the embedding) are requantized."""
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch="qwen2", wtype="Q4_0", embd_type="Q8_0", seed=2))
    stored, requant = _core.LoadedModel(str(path)), _core.LoadedModel(str(path), requantize="Q4_0")
    assert stored.matrix_types["blk.0.attn_q.weight"] == "Q4_0"
    assert stored.matrix_types["token_embd.weight"] == "Q8_0"
    assert set(requant.matrix_types.values()) == {"Q4_0"}
    want = {k: ("Q4_0" if k == "token_embd.weight" else v) for k, v in stored.matrix_types.items()}
    assert requant.matrix_types == want


def test_unknown_requantize_type_is_refused(tmp_path):
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch="qwen2", wtype="Q8_0", seed=2))
    with pytest.raises(ValueError, match=r"cannot requantize weights to 'q3_x' \(supported: Q4_0\)"):
        _core.LoadedModel(str(path), requantize="q3_x")
    with pytest.raises(ValueError, match="'q5_0'"):
        _core.LoadedModel(str(path), requantize="q5_0")  # a real type, but one quickdraft cannot write


# -- speculation with the levers: still the target's own greedy output --------------------------

@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    target = write_tiny_model(d / "t.gguf", TinySpec(arch="qwen2", n_layer=3, n_vocab=96, wtype="Q8_0", seed=1))
    draft = write_tiny_model(d / "d.gguf", TinySpec(arch="qwen2", n_layer=3, n_vocab=96, wtype="Q8_0", seed=1))
    return str(target), str(draft)


@pytest.mark.parametrize("levers", [
    dict(draft_quant="q4_0"),
    dict(draft_skip=[1]),
    dict(draft_quant="q4_0", draft_skip=[1, 2], draft_head=8),
    dict(draft_quant="q4_0", draft_head=0),
    dict(draft_window=2),
    dict(draft_window=None),
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
@pytest.mark.parametrize("hybrid", [False, True], ids=["model", "hybrid"])
def test_speculation_with_levers_equals_plain(pair, levers, hybrid):
    target, draft = pair
    plain = Engine(target, n_ctx=128, threads=2).generate(PROMPT, max_tokens=24, temperature=0.0)
    eng = Engine(target, draft=("hybrid", draft) if hybrid else draft, n_ctx=128, threads=2, draft_max=4,
                 p_min=0.0, adaptive=False, **levers)
    out = eng.generate(PROMPT, max_tokens=24, temperature=0.0)
    assert out.tokens == plain.tokens
    assert out.stats.drafted > 0


def test_draft_that_is_the_target_accepts_everything_only_unmodified(pair):
    """The target drafting for itself accepts every token; requantized or shallower, it does not
    (so the levers reach the draft), and the output is the same."""
    target, _ = pair
    kw = dict(n_ctx=128, threads=2, draft_max=4, p_min=0.0, adaptive=False, draft_head=0)
    # draft_quant's default ("auto") leaves the target's own file as stored
    same = Engine(target, draft=target, **kw).generate(PROMPT, max_tokens=24, temperature=0.0)
    assert same.stats.accepted == same.stats.drafted > 0
    for levers in (dict(draft_quant="q4_0"), dict(draft_skip=[1])):
        out = Engine(target, draft=target, **kw, **levers).generate(PROMPT, max_tokens=24, temperature=0.0)
        assert out.tokens == same.tokens
        assert out.stats.accepted < out.stats.drafted


def test_draft_quant_default_is_q4_0_for_a_draft_model(pair):
    """The pair's draft is a copy of the target in another file: as stored it accepts every token,
    by default (draft_quant="auto") it drafts exactly as with "q4_0", so not every token."""
    target, draft = pair
    kw = dict(n_ctx=128, threads=2, draft_max=4, p_min=0.0, adaptive=False, draft_head=0)
    runs = {q: Engine(target, draft=draft, **kw, **({} if q == "default" else dict(draft_quant=q))).generate(
        PROMPT, max_tokens=24, temperature=0.0) for q in ("default", "q4_0", None, "none")}
    counts = {q: (r.stats.drafted, r.stats.accepted) for q, r in runs.items()}
    assert counts["default"] == counts["q4_0"] and counts["default"][1] < counts["default"][0]
    assert counts[None] == counts["none"] and counts[None][1] == counts[None][0] > 0
    assert len({tuple(r.tokens) for r in runs.values()}) == 1


@pytest.mark.parametrize("draft", [None, "ngram", "self"])
def test_levers_need_a_draft_model(pair, draft):
    target, _ = pair
    Engine(target, draft=draft, draft_quant="auto")  # the default: requantizes a draft model only
    with pytest.raises(ValueError, match="draft_quant requantizes a draft model"):
        Engine(target, draft=draft, draft_quant="q4_0")
    with pytest.raises(ValueError, match="draft_skip names layers of a draft model"):
        Engine(target, draft=draft, draft_skip=[1])


def test_draft_skip_out_of_range_is_refused(pair):
    target, draft = pair
    with pytest.raises(ValueError, match="layer 3 is outside"):
        Engine(target, draft=draft, draft_skip=[3])


# -- the real pair: Qwen2.5-Coder 0.5B (Q5_0 / Q8_0 / Q6_K / Q4_K) drafting for the 1.5B ----------

REAL_IDS = [750, 3974, 10231, 2890, 982, 262, 471, 2890, 421, 2890, 2651, 220, 16, 770, 3974, 10231]


@pytest.mark.real
@pytest.mark.slow
def test_qwen_draft_requantized_to_q4_0(model_path):
    """Every wider matrix of the real 0.5B becomes Q4_0 (its Q4_K ones, as wide, stay; so does its
    embedding, which has a separate output layer and is only looked up); its logits stay close to
    the stored model's: the same top-1 at most positions, a small KL divergence."""
    path = str(model_path("qwen2.5-coder-0.5b"))
    stored, requant = _core.LoadedModel(path), _core.LoadedModel(path, requantize="q4_0")
    assert "output.weight" in stored.matrix_types
    for name, t in stored.matrix_types.items():
        kept = t == "Q4_K" or name == "token_embd.weight"
        assert requant.matrix_types[name] == (t if kept else "Q4_0"), name
    ids = REAL_IDS * 2
    a, b = _core.Context(stored, 64, 2).eval(ids), _core.Context(requant, 64, 2).eval(ids)

    def log_softmax(x):
        x = x - x.max(axis=1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=1, keepdims=True))

    la, lb = log_softmax(a.astype(np.float64)), log_softmax(b.astype(np.float64))
    kl = float((np.exp(la) * (la - lb)).sum(axis=1).mean())
    agree = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
    print(f"\nq4_0 draft vs stored: top-1 agreement {agree:.3f}, KL {kl:.4f} nats")
    assert agree >= 0.85 and kl < 0.15


# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's (pytest's) peak.
MEMORY_CHECK = """
import sys
from quickdraft import _core
def status(key):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key + ":"))
base = status("VmRSS")
m = _core.LoadedModel(sys.argv[1], requantize="q4_0")
_core.Context(m, 64, 1).eval([785, 6722, 315])
print(status("VmHWM") - base, _core.current_isa())
"""


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.parametrize("isa", _core.isa_available())
def test_qwen_requantized_load_memory(model_path, isa):
    """Requantizing (then repacking) replaces the mapped pages: peak RSS stays about the file size."""
    path = model_path("qwen2.5-coder-0.5b")
    env = dict(os.environ, QD_FORCE_ISA=isa)
    r = subprocess.run([sys.executable, "-c", MEMORY_CHECK, str(path)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    peak, got_isa = r.stdout.split()
    size = path.stat().st_size
    print(f"\n{isa}: peak RSS {int(peak) / 1e6:.0f} MB for a {size / 1e6:.0f} MB file")
    assert got_isa == isa and int(peak) <= 1.1 * size


EXACT_CHECK = """
import sys
from quickdraft import Engine, _core
target, draft = sys.argv[1], sys.argv[2]
prompt = "<|im_start|>user\\nWrite a Python function that reverses a linked list.<|im_end|>\\n<|im_start|>assistant\\n"
plain = Engine(target, n_ctx=256, threads=2).generate(prompt, max_tokens=40, temperature=0.0, ignore_eos=True)
for levers in (dict(draft_quant="q4_0"), dict(draft_quant="q4_0", draft_head=8192), dict(draft_skip=[12])):
    out = Engine(target, draft=draft, n_ctx=256, threads=2, **levers).generate(
        prompt, max_tokens=40, temperature=0.0, ignore_eos=True)
    assert out.tokens == plain.tokens, (levers, out.text, plain.text)
    assert out.stats.accepted > 0, levers
print(_core.current_isa())
"""


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.parametrize("isa", [i for i in ("avx2",) if i in _core.isa_available()] or ["default"])
def test_qwen_levers_keep_greedy_output(model_path, isa):
    """1.5B target, 0.5B draft requantized / with a small head / shallower: the target's own greedy
    text, token for token, on the laptop kernels (AVX2)."""
    env = dict(os.environ)
    if isa != "default":
        env["QD_FORCE_ISA"] = isa
    args = [str(model_path("qwen2.5-coder-1.5b")), str(model_path("qwen2.5-coder-0.5b"))]
    r = subprocess.run([sys.executable, "-c", EXACT_CHECK, *args], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def test_draft_window_bounds_the_draft_models_prompt(pair):
    """The target drafting for itself from the whole prompt accepts every token; from its last 3
    tokens it reads 3 of them, and the text stays the target's own."""
    target, _ = pair
    kw = dict(n_ctx=128, threads=2, draft_max=4, p_min=0.0, adaptive=False, draft_head=0)
    whole = Engine(target, draft=target, draft_window=None, **kw).generate(PROMPT, max_tokens=24, temperature=0.0)
    assert whole.stats.accepted == whole.stats.drafted > 0
    assert whole.stats.draft_prompt_tokens == whole.stats.prompt_tokens - 1
    short = Engine(target, draft=target, draft_window=3, **kw).generate(PROMPT, max_tokens=24, temperature=0.0)
    assert short.tokens == whole.tokens
    assert short.stats.draft_prompt_tokens == 3 < whole.stats.prompt_tokens - 1
    for bad in (0, -1, 2**31):
        with pytest.raises(ValueError, match="draft_window"):
            Engine(target, draft=target, draft_window=bad, **kw)
