"""Issue 12 F2: the thread count. threads is None or >= 1; more than the CPUs warns and is capped
to them; a pool that cannot start its threads raises (no deadlock in pthread_cond_destroy, no
started worker left behind). The limit tests run in a subprocess with RLIMIT_AS and a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

from pathlib import Path

import pytest

import quickdraft
from quickdraft import _core
from fixtures.tiny_models import TinySpec, write_tiny_model

CPUS = len(os.sched_getaffinity(0))


def cores_by_core_id(cpus, sysfs="/sys/devices/system/cpu"):
    """Distinct (package, core) pairs of these CPUs, from each one's core_id and physical_package_id:
    a different sysfs source than the native side's thread_siblings_list. None where unreadable."""
    pairs = set()
    for c in cpus:
        try:
            topo = Path(sysfs) / f"cpu{c}" / "topology"
            pairs.add(((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip()))
        except OSError:
            return None
    return len(pairs)


CORES = cores_by_core_id(sorted(os.sched_getaffinity(0))) or CPUS


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
        assert quickdraft.Model(tiny, n_ctx=32).threads == CORES  # None: one per core


def test_the_native_pool_refuses_absurd_counts(tiny):
    w = _core.LoadedModel(str(tiny))
    for n in (-1, 10_000):
        with pytest.raises(ValueError, match=r"threads must be 0 \(one per core\) or in \[1, 1024\]"):
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


def fake_sysfs(root: Path, cores: dict) -> str:
    """/sys/devices/system/cpu under root: cores maps (package, core) to its CPUs, each CPU's
    thread_siblings_list written as the kernel writes it (a range when the ids are consecutive)."""
    for (package, core), cpus in cores.items():
        ids = sorted(cpus)
        siblings = f"{ids[0]}-{ids[-1]}" if len(ids) > 1 and ids[-1] - ids[0] == len(ids) - 1 else ",".join(map(str, ids))
        for c in ids:
            topo = root / f"cpu{c}" / "topology"
            topo.mkdir(parents=True)
            (topo / "thread_siblings_list").write_text(siblings + "\n")
            (topo / "physical_package_id").write_text(f"{package}\n")
            (topo / "core_id").write_text(f"{core}\n")
    return str(root)


@pytest.mark.parametrize("layout, cpus", [
    ({(0, c): [c, c + 8] for c in range(8)}, list(range(16))),            # 8 cores, 2 threads each (0,8 1,9 ...)
    ({(0, c): [2 * c, 2 * c + 1] for c in range(4)}, list(range(8))),    # siblings adjacent ("0-1")
    ({(0, c): [c, c + 4] for c in range(4)}, [0, 4, 1]),                 # affinity: both threads of core 0, one of core 1
    ({(0, c): [2 * c, 2 * c + 1] for c in range(4)} | {(0, 10 + c): [8 + c] for c in range(8)}, list(range(16))),  # hybrid: 4 with SMT, 8 without
    ({(p, 0): [p] for p in range(3)}, [0, 1, 2]),                         # one core per package, same core_id
    ({(0, c): [c] for c in range(6)}, list(range(6))),                   # no SMT
])
def test_default_threads_count_each_core_once(tmp_path, layout, cpus):
    sysfs = fake_sysfs(tmp_path / "cpu", layout)
    want = cores_by_core_id(cpus, sysfs)
    assert _core._testing.physical_cores(cpus, sysfs) == want
    assert want < len(cpus) or all(len(v) == 1 for v in layout.values())  # the cases with SMT do count fewer


def test_default_threads_without_topology_count_every_cpu(tmp_path):
    assert _core._testing.physical_cores([0, 1, 2], str(tmp_path / "missing")) == 3
    sysfs = fake_sysfs(tmp_path / "cpu", {(0, 0): [0, 1]})
    assert _core._testing.physical_cores([0, 1, 2], sysfs) == 3  # cpu2's topology is not there: no guess


def test_default_threads_on_this_machine():
    assert _core._testing.default_threads() == CORES
    assert 1 <= CORES <= CPUS
