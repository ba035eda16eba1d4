"""benchmarks.run.measure: what a process tree's peak of memory was made of."""

from __future__ import annotations

import sys
import textwrap

from benchmarks.run import measure

#: A parent holding 40 MB that starts a child holding 80 MB, both held until the child ends.
TWO: str = textwrap.dedent(
    f"""
    import subprocess, time
    held = b"x" * 40_000_000
    child = subprocess.Popen([{sys.executable!r}, "-c", "import time; held = b'y' * 80_000_000; time.sleep(1.5)"])
    child.wait()
    """
)


def test_the_peak_names_each_process_and_its_share() -> None:
    m = measure([sys.executable, "-c", TWO])
    assert m.returncode == 0
    assert len(m.at_peak) == 2
    (child, child_mb), (parent, parent_mb) = m.at_peak  # largest first, each named by its command line
    assert child.startswith(f"{sys.executable} -c import time") and parent.startswith(f"{sys.executable} -c \nimport")
    assert child_mb >= 80 and 40 <= parent_mb < child_mb
    assert abs(sum(mb for _, mb in m.at_peak) - m.peak_rss_mb) < 1
