"""What a benchmark records about the machine it ran on: the CPU (cpu_model) and the memory's read
bandwidth (read_bandwidth), so that every figure carries both. Shared by compare.py and
speculative.py (which imports it by path: bench/ also holds a tokenize.py that shadows the
standard library's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name, with its x86 family and model numbers, which tell cores apart where a
    VM reports only a brand ("AMD EPYC (family 25, model 17)": Zen 4)."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
            if not line.strip():
                break  # the first CPU's fields
    except OSError:
        pass
    if "model name" in fields:
        if "cpu family" in fields and "model" in fields:
            return f"{fields['model name']} (family {fields['cpu family']}, model {fields['model']})"
        return fields["model name"]
    import platform
    return platform.processor() or platform.machine()


BANDWIDTH = r"""
import sys
from quickdraft import _core
print(_core.measure_read_bandwidth(float(sys.argv[2]), int(sys.argv[1]), 5)["best_GBps"])
"""


def read_bandwidth(threads: int, mib: float = 512) -> float:
    """GB/s read by `threads` threads streaming a mib-MiB buffer on huge pages, allocated as a model's
    weights are (`_core.measure_read_bandwidth`), best of 5, in a process of its own (the buffer
    would otherwise count in the peak RSS of the process measured next). numpy's max-reduction,
    the probe before, read 35 GB/s on a Zen 4 VM where the 1.5B then decoded 55 GB/s of weights."""
    import quickdraft  # the probe runs the package measured here, wherever it was imported from

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(quickdraft.__file__).parent.parent),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", BANDWIDTH, str(threads), str(mib)], capture_output=True, text=True,
                         check=True, env=env).stdout
    return float(out.strip())
