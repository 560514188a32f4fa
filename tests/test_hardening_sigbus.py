"""Issue 12 F3: a model file truncated or rewritten while in use. mmap=False reads it into memory
(immune, same output); with the mapping, start() raises GGUFError when the file changed, and a
truncation in the middle of a generation ends the process with one line naming the file instead
of a bare "Bus error". Every case runs in a subprocess with a timeout."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import quickdraft
from quickdraft import GGUFError, _core
from fixtures.tiny_models import TinySpec, write_tiny_model


def run_python(code: str, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env)
    full_env.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_model(tmp_path / "tiny.gguf", TinySpec(arch="llama", n_layer=2))


def test_start_raises_when_the_mapped_file_was_truncated(tiny):
    ids = [1, 2, 3]
    with pytest.warns(RuntimeWarning, match="trained with"):
        m = quickdraft.Model(tiny, n_ctx=4096, threads=1)
    before = m.eval(ids)
    os.truncate(tiny, os.path.getsize(tiny) // 2)
    m.reset()
    with pytest.raises(GGUFError, match=r"tiny.gguf: the model file changed on disk.*mmap=False"):
        m.eval(ids)
    assert before.shape == (3, m.n_vocab)


def test_start_raises_when_the_mapped_file_was_rewritten_in_place(tiny):
    m = quickdraft.Model(tiny, n_ctx=64, threads=1)
    m.eval([1, 2])
    data = bytearray(tiny.read_bytes())
    data[-1] ^= 0xFF
    st = os.stat(tiny)
    tiny.write_bytes(bytes(data))
    os.utime(tiny, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(GGUFError, match="it was modified"):
        m.eval([3])


def test_mmap_false_keeps_working_after_truncation(tiny):
    mapped = quickdraft.Model(tiny, n_ctx=64, threads=1)
    want = mapped.eval([1, 2, 3, 4])
    m = quickdraft.Model(tiny, n_ctx=64, threads=1, mmap=False)
    assert not m._weights.mapped and mapped._weights.mapped
    os.truncate(tiny, 100)
    assert (m.eval([1, 2, 3, 4]) == want).all()


@pytest.mark.parametrize("isa", _core.isa_available())
def test_mmap_false_gives_the_same_logits_on_every_isa(tmp_path, isa):
    # AVX2 repacks Q4_0 weights at load and hands the source pages back: in read-in memory they
    # then read as zeros, so nothing may read them again.
    path = write_tiny_model(tmp_path / "q4.gguf", TinySpec(arch="llama", wtype="Q4_0", n_layer=2))
    r = run_python(f"""
        import numpy as np, quickdraft
        a = quickdraft.Model({str(path)!r}, n_ctx=64, threads=2).eval([1, 2, 3, 4, 5])
        b = quickdraft.Model({str(path)!r}, n_ctx=64, threads=2, mmap=False).eval([1, 2, 3, 4, 5])
        print(quickdraft.current_isa(), bool((a == b).all()))
    """, QD_FORCE_ISA=isa)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [isa, "True"]


def test_sigbus_in_the_middle_of_a_generation_names_the_file(tiny):
    # A thread truncates the file while a generation runs (start() found it intact): the next read
    # of a page past the new end faults. The process still ends (the bytes are gone) but says why,
    # in one line.
    r = run_python(f"""
        import os, threading, quickdraft
        e = quickdraft.Engine({str(tiny)!r}, n_ctx=20000, threads=1)
        e.generate([1, 2], max_tokens=4, temperature=0)
        threading.Timer(0.3, os.truncate, ({str(tiny)!r}, 64)).start()
        e.generate([1, 2], max_tokens=19000, temperature=0, ignore_eos=True)  # about 10 s
        print("survived")
    """, timeout=60)
    assert r.returncode == -signal.SIGBUS, (r.returncode, r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.startswith("quickdraft:")]
    assert lines == [f"quickdraft: bus error reading the model file {tiny}: it was truncated or replaced while in "
                     "use; load it again, or load it with mmap=False to read it into memory"], r.stderr
    assert "survived" not in r.stdout


def test_a_sigbus_elsewhere_still_gets_the_previous_handler(tiny):
    # quickdraft's handler chains: a SIGBUS that is not a fault in a model file reaches the handler
    # installed before it (here Python's signal module), as if quickdraft were not there.
    r = run_python(f"""
        import os, signal, quickdraft
        got = []
        signal.signal(signal.SIGBUS, lambda s, f: got.append(s))
        quickdraft.Model({str(tiny)!r}, n_ctx=64, threads=1).eval([1])
        os.kill(os.getpid(), signal.SIGBUS)
        print("handled", got == [signal.SIGBUS])
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "handled True"


@pytest.mark.real
def test_issue_reproducer_truncated_between_generations(model_path, tmp_path):
    c = tmp_path / "c.gguf"
    shutil.copy(model_path("smollm2-135m"), c)
    r = run_python(f"""
        import os, quickdraft
        from quickdraft import Engine
        for mmap in (True, False):
            e = Engine({str(c)!r}, draft="ngram", threads=1, mmap=mmap)
            first = e.generate("hi", max_tokens=16, temperature=0).text
            os.truncate({str(c)!r}, os.path.getsize({str(c)!r}) // 2)
            try:
                again = e.generate("hi", max_tokens=16, temperature=0).text
                print(mmap, "same" if again == first else "different")
            except quickdraft.GGUFError as err:
                print(mmap, "GGUFError", "mmap=False" in str(err) and "truncated" in str(err))
            e.close()
            import shutil; shutil.copy({str(model_path("smollm2-135m"))!r}, {str(c)!r})
    """)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.splitlines() == ["True GGUFError True", "False same"]


@pytest.mark.real
@pytest.mark.parametrize("isa", _core.isa_available())
def test_mmap_false_on_smollm2_same_greedy_text_and_memory(model_path, isa):
    path = model_path("smollm2-135m")
    r = run_python(f"""
        import quickdraft
        def status(key):
            return next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith(key + ':'))
        base = status('VmRSS')
        e = quickdraft.Engine({str(path)!r}, draft="ngram", threads=2, n_ctx=256, mmap=False)
        text = e.generate("The capital of France is", max_tokens=16, temperature=0).text
        peak = status('VmHWM') - base
        e.close()
        mapped = quickdraft.Engine({str(path)!r}, draft="ngram", threads=2, n_ctx=256)
        print(text == mapped.generate("The capital of France is", max_tokens=16, temperature=0).text, peak)
    """, QD_FORCE_ISA=isa)
    assert r.returncode == 0, r.stderr
    same, peak = r.stdout.split()
    assert same == "True"
    size = path.stat().st_size
    assert int(peak) <= 1.1 * size + 32e6, f"{isa}: peak RSS {int(peak) / 1e6:.0f} MB for a {size / 1e6:.0f} MB file"


@pytest.mark.real
def test_issue_reproducer_truncated_during_a_generation(model_path, tmp_path):
    c = tmp_path / "c.gguf"
    shutil.copy(model_path("smollm2-135m"), c)
    r = run_python(f"""
        import os, threading
        from quickdraft import Engine
        e = Engine({str(c)!r}, draft="ngram", threads=1)
        e.generate("hi", max_tokens=4, temperature=0)
        threading.Timer(0.3, lambda: os.truncate({str(c)!r}, os.path.getsize({str(c)!r}) // 2)).start()
        e.generate("hi", max_tokens=100000, temperature=0, ignore_eos=True)
    """, timeout=120, QD_FORCE_ISA="scalar")
    # The scalar ISA's kernels read every weight in place. ISAs that repack at load hold the
    # matrices and the norms in memory, and only the embedding rows of the tokens seen are read
    # from the mapping: there a truncation may well pass unnoticed until the next start().
    assert r.returncode == -signal.SIGBUS, (r.returncode, r.stderr)
    assert f"quickdraft: bus error reading the model file {c}:" in r.stderr and "mmap=False" in r.stderr
