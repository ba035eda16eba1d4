"""Where a command's memory is, process by process: its process tree sampled while it runs.

``python -m benchmarks.tree_memory -- python3 -m tracekit analyze DIR --no-cache`` runs the
command, samples every process of its tree every 50 ms with psutil (resident and proportional
memory: RSS counts a page shared by two processes in both, PSS halves it), and prints the
moment of the largest RSS sum with each process's share, then the sums over time. It is how
round 8 of ``benchmarks/README.md`` found where the peaks were (a forked child counted again,
a pool idle since the map); ``benchmarks.run`` measures only the peaks.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Final

import psutil

SAMPLE_S: Final = 0.05
MB: Final = 1e6


@dataclass
class Sample:
    """The process tree at one moment: seconds since the start, and per process (rss MB, pss MB,
    pid, its command line's start)."""

    at_s: float
    processes: list[tuple[float, float, int, str]] = field(default_factory=list)

    @property
    def rss_mb(self) -> float:
        return sum(p[0] for p in self.processes)

    @property
    def pss_mb(self) -> float:
        return sum(p[1] for p in self.processes)


def sample(root: psutil.Process, at_s: float) -> Sample:
    """Every process of ``root``'s tree now (those that end meanwhile left out)."""
    out = Sample(at_s)
    for process in [root, *root.children(recursive=True)]:
        try:
            info = process.memory_full_info()
            name = " ".join(process.cmdline())[:80]
        except (psutil.Error, OSError):
            continue
        out.processes.append((info.rss / MB, getattr(info, "pss", info.rss) / MB, process.pid, name))
    return out


def watch(command: list[str]) -> tuple[int, list[Sample]]:
    """Run ``command`` (its output discarded) and sample its tree until it ends: its exit code
    and the samples."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(child.pid)
    samples = []
    while child.poll() is None:
        samples.append(sample(root, time.perf_counter() - start))
        time.sleep(SAMPLE_S)
    return child.returncode, samples


def report(code: int, samples: list[Sample], *, lines: int = 40) -> str:
    """The peak's processes and the sums over time, as text."""
    if not samples:
        return f"exit {code}: it ended before the first sample"
    peak = max(samples, key=lambda s: s.rss_mb)
    out = [
        f"exit {code}, {samples[-1].at_s:.2f} s; peak RSS {peak.rss_mb:.0f} MB (PSS {peak.pss_mb:.0f}) "
        f"at {peak.at_s:.2f} s:"
    ]
    out += [f"  rss {r:7.0f}  pss {p:7.0f}  pid {pid:<7} {name}" for r, p, pid, name in sorted(peak.processes)[::-1]]
    step = max(1, len(samples) // lines)
    out += [
        f"{s.at_s:7.2f} s  rss {s.rss_mb:6.0f}  pss {s.pss_mb:6.0f}  processes {len(s.processes)}"
        for s in samples[::step]
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    """Command line: see ``--help``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to watch after --")
    code, samples = watch(command)
    print(report(code, samples))
    sys.exit(code)


if __name__ == "__main__":
    main()
