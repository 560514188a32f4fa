"""Issue 12 F2: the thread count. threads is None or >= 1; more than the CPUs warns and is capped
to them; a pool that cannot start its threads raises (no deadlock in pthread_cond_destroy, no
started worker left behind). The limit tests run in a subprocess with RLIMIT_AS and a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import quickdraft
from quickdraft import _core
from fixtures.tiny_models import TinySpec, write_tiny_model

CPUS = len(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("threads") / "tiny.gguf", TinySpec(arch="llama", n_layer=2))


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("bad", [-1, 0, -600])
def test_threads_below_one_is_an_error(tiny, bad):
    with pytest.raises(ValueError, match="threads must be None"):
        quickdraft.Model(tiny, n_ctx=32, threads=bad)
    with pytest.raises(ValueError, match="threads must be None"):
        quickdraft.Engine(tiny, threads=bad, n_ctx=32)


def test_more_threads_than_cpus_warns_and_is_capped(tiny):
    with pytest.warns(RuntimeWarning, match=f"more than the {CPUS} CPUs"):
        m = quickdraft.Model(tiny, n_ctx=32, threads=CPUS + 14)
    assert m.threads == CPUS
    with pytest.warns(RuntimeWarning, match=f"using {CPUS}"):
        ctx = m.new_context(threads=10_000)
    assert ctx.threads == CPUS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert quickdraft.Model(tiny, n_ctx=32, threads=CPUS).threads == CPUS  # no warning at the CPU count
        assert quickdraft.Model(tiny, n_ctx=32).threads == CPUS  # None: one per CPU


def test_the_native_pool_refuses_absurd_counts(tiny):
    w = _core.LoadedModel(str(tiny))
    for n in (-1, 10_000):
        with pytest.raises(ValueError, match=r"threads must be 0 \(one per CPU\) or in \[1, 1024\]"):
            _core.Context(w, 32, n)


def test_a_pool_that_cannot_start_its_threads_raises_and_leaves_none_behind(tiny):
    # RLIMIT_AS a little above what the process maps: the pool runs out of room for thread stacks
    # after a few dozen workers. Before the fix the constructor hung in pthread_cond_destroy.
    r = run_python(f"""
        import os, resource
        from quickdraft import _core
        w = _core.LoadedModel({str(tiny)!r})
        vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))
        resource.setrlimit(resource.RLIMIT_AS, (vm + 256 * 2**20, resource.RLIM_INFINITY))
        before = len(os.listdir('/proc/self/task'))
        for _ in range(3):
            try:
                _core.Context(w, 32, 600)
                print("created")
            except (RuntimeError, MemoryError) as e:
                print(type(e).__name__, "|", e)
        after = len(os.listdir('/proc/self/task'))
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print("tasks", before, after)
        print("logits", _core.Context(w, 32, 2).eval([1, 2, 3]).shape)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(line.startswith("QuickdraftError | cannot start worker thread") for line in lines[:3]), r.stdout
    assert "use fewer threads" in lines[0]
    tasks = lines[3].split()
    assert tasks[1] == tasks[2], f"started workers were left running: {r.stdout}"
    assert lines[4].startswith("logits (3,"), r.stdout


@pytest.mark.real
def test_issue_reproducer_threads_600_under_rlimit_as(model_path):
    path = model_path("smollm2-135m")
    r = run_python(f"""
        import resource, warnings
        import quickdraft
        from quickdraft import _core
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
        opt = _core.EngineOptions()
        opt.threads = 600
        try:
            _core.Engine({str(path)!r}, opt)
            print("native: created")
        except (RuntimeError, MemoryError) as e:
            print("native:", type(e).__name__)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            e = quickdraft.Engine({str(path)!r}, draft="ngram", threads=600)
        print("capped:", len(w), repr(e.generate("The capital of France is", max_tokens=8, temperature=0).text))
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    native, capped = r.stdout.splitlines()
    assert native in ("native: QuickdraftError", "native: created")  # created: the limit left room for 599 stacks
    assert capped.startswith("capped: 1 ") and "Paris" in capped
