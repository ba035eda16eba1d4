"""benchmarks/tree_memory.py: a command's process tree sampled, the peak's processes named."""

from __future__ import annotations

import sys

from benchmarks import tree_memory

#: A parent that holds 60 MB and starts a child holding 40 MB, both alive a while.
TREE = (
    "import subprocess, sys, time; b = bytearray(60_000_000); "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; b = bytearray(40_000_000); time.sleep(1.5)']); "
    "time.sleep(1.5); c.wait()"
)


def test_the_peak_holds_both_processes_with_their_memory() -> None:
    code, samples = tree_memory.watch([sys.executable, "-c", TREE])
    assert code == 0 and samples
    # by PSS: a child sampled between its fork and its exec maps its parent's pages, which its
    # RSS counts again (the RSS peak can be that instant on a loaded machine), its PSS does not
    held = max(samples, key=lambda s: s.pss_mb)
    assert len(held.processes) == 2
    big, small = sorted(p[0] for p in held.processes)[::-1]
    assert big > 60 and 40 < small < big  # each process's own bytes, the interpreter's besides
    assert held.pss_mb <= held.rss_mb
    peak = max(samples, key=lambda s: s.rss_mb)
    text = tree_memory.report(code, samples)
    assert text.startswith("exit 0") and f"peak RSS {peak.rss_mb:.0f} MB" in text
