"""The thread pool while another process competes for its CPUs (common/contention.h).

A parallel region waits for its slowest thread, and a thread the scheduler preempts for another
process's timeslice holds it for milliseconds. Before the pool learned to leave threads out, the
1.5B decoded at 12 tok/s on two threads beside one busy process on a 2-core machine, against 28 on
one thread. The governor's policy is tested on synthetic machines (a free-CPU count that decides
how much time the workers lose); the pool itself beside a real busy process, in a subprocess
pinned to the CPUs the busy process shares."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from quickdraft import _core
from fixtures.tiny_models import TinySpec, write_tiny_model

WINDOW = 0.1  # ContentionGovernor::kWindow
STREAK = 2  # ContentionGovernor::kStreak: contended windows in a row that take a thread out
STEP = 0.02  # seconds between the synthetic samples (the pool samples at every region)


def drive(n_threads, free_cpus, seconds, t0=0.0, lost_share=0.3, quiet_share=0.02, governor=None):
    """Samples for a machine where `free_cpus(t)` CPUs are free: the workers taking part lose
    lost_share of their time while more threads take part than there are free CPUs, quiet_share
    otherwise. Returns [(t, active)] after each sample, fed one at a time (the active count
    decides the next sample's loss, as in the pool)."""
    trace, active = [], n_threads
    samples = []
    t = t0
    while t < t0 + seconds:
        t += STEP
        awake = (active - 1) * STEP
        share = lost_share if active > free_cpus(t) else quiet_share
        samples.append((t, awake, share * awake))
        active = _core._testing.contention_governor(n_threads, samples)[-1]
        trace.append((t, active))
    return trace


def test_a_quiet_machine_keeps_every_thread():
    trace = drive(8, lambda t: 8, 60.0, quiet_share=0.1)
    assert {a for _, a in trace} == {8}


@pytest.mark.parametrize("n_threads, free", [(2, 1), (8, 7), (8, 4), (8, 1), (16, 12)])
def test_threads_settle_at_the_free_cpus_and_probes_stay_rare(n_threads, free):
    trace = drive(n_threads, lambda t: free, 120.0)
    settled = (n_threads - free) * STREAK * WINDOW + 3 * STEP + 0.05
    after = [(t, a) for t, a in trace if t > settled]
    assert after[0][1] == free, trace[:40]
    # Only probes take a thread more than the free CPUs, one window at a time, ever more rarely.
    probing = [t for t, a in after if a > free]
    assert all(a <= free + 1 for _, a in after)
    assert len(probing) * STEP < 0.03 * 120.0, len(probing)
    starts = [t for i, (t, a) in enumerate(after) if a > free and after[i - 1][1] == free]
    gaps = np.diff(starts)
    assert len(starts) >= 5 and np.all(gaps[1:] >= gaps[:-1] - 2 * WINDOW), starts  # the waits grow...
    assert gaps[1] > 1.8 * gaps[0] and gaps.max() <= 16.0 + 3 * WINDOW  # ... doubling, up to kMaxProbe


def test_threads_come_back_when_the_other_process_ends():
    busy_until = 30.0
    trace = drive(8, lambda t: 1 if t < busy_until else 8, 70.0)
    assert min(a for t, a in trace if 1.0 < t < busy_until) == 1
    back = next(t for t, a in trace if t > busy_until and a == 8)
    # The wait before the next probe is at most kMaxProbe, then one more thread a second.
    assert back - busy_until < 16.0 + 7 * (1.0 + 2 * WINDOW), back
    assert all(a == 8 for t, a in trace if t > back)


def test_one_contended_window_alone_takes_no_thread_out():
    # A burst: the workers lose half their time for one window, then none.
    samples = [(0.0, 0.0, 0.0), (0.1, 0.1, 0.05), (0.2, 0.1, 0.0), (0.3, 0.1, 0.05), (0.4, 0.1, 0.0)]
    assert _core._testing.contention_governor(2, samples) == [2, 2, 2, 2, 2]
    samples = [(0.0, 0.0, 0.0), (0.1, 0.1, 0.05), (0.2, 0.1, 0.05)]  # two in a row
    assert _core._testing.contention_governor(2, samples) == [2, 2, 1]


def test_a_window_without_work_decides_nothing():
    samples = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (2.0, 0.0, 0.0)]  # asleep: no awake time, no loss
    assert _core._testing.contention_governor(4, samples) == [4, 4, 4]
    assert _core._testing.contention_governor(1, [(0.0, 0.0, 0.0), (1.0, 5.0, 5.0)]) == [1, 1]


def busy_cpus():
    """Two CPUs of this process's affinity (the same one twice on a single-CPU machine)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[min(1, len(cpus) - 1)]


def run_pinned(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs code in a subprocess pinned to busy_cpus(), beside a busy loop pinned to the second."""
    a, b = busy_cpus()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    prelude = f"""
        import os, subprocess
        os.sched_setaffinity(0, {{{a}, {b}}})
        def busy():
            p = subprocess.Popen(["sh", "-c", "while :; do :; done"])
            os.sched_setaffinity(p.pid, {{{b}}})
            return p
    """
    return subprocess.run([sys.executable, "-c", textwrap.dedent(prelude) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_the_pool_leaves_a_thread_out_beside_a_busy_process_and_runs_every_task_once():
    r = run_pinned("""
        from quickdraft import _core
        p = busy()
        try:
            regions, wrong, changes = _core._testing.pool_regions(2, 2.0, 8, 3000)
        finally:
            p.kill()
        print(repr((regions, wrong, changes)))
        regions, wrong, _ = _core._testing.pool_regions(2, 0.5, 8, 3000)
        print(regions, wrong)
    """)
    assert r.returncode == 0, r.stderr
    busy, quiet = r.stdout.splitlines()
    regions, wrong, changes = eval(busy)
    assert regions > 0 and wrong == 0
    assert changes[0] == (0.0, 2)
    first_out = next(t for t, n in changes if n == 1)
    assert first_out < 0.5, changes  # the first windows saw the lost time
    assert sum(1 for _, n in changes if n == 2) <= 4, changes  # probes: 1 s, then 2 s apart
    regions, wrong = map(int, quiet.split())
    assert regions > 0 and wrong == 0


def test_a_generation_beside_a_busy_process_is_the_one_thread_generation(tmp_path):
    tiny = write_tiny_model(tmp_path / "tiny.gguf", TinySpec(arch="llama", n_layer=2, n_embd=256, n_ff=512,
                                                               n_vocab=512, wtype="Q4_0"))
    r = run_pinned(f"""
        import time
        import quickdraft
        prompt = list(range(1, 40))
        one = quickdraft.Engine({str(tiny)!r}, draft="none", threads=1, n_ctx=512)
        two = quickdraft.Engine({str(tiny)!r}, draft="none", threads=2, n_ctx=512)
        want = one.generate(prompt, max_tokens=400, temperature=0).tokens
        p = busy()
        try:
            t0, runs, same = time.time(), 0, 0
            while time.time() - t0 < 3.0:
                same += two.generate(prompt, max_tokens=400, temperature=0).tokens == want
                runs += 1
        finally:
            p.kill()
        print(runs, same, len(want))
    """)
    assert r.returncode == 0, r.stderr
    runs, same, n = map(int, r.stdout.split())
    assert n == 400 and runs >= 2 and same == runs
