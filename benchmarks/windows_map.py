"""One rank's map, held whole against in windows from its spilled events: live peaks and CPU.

``python3 -m benchmarks.windows_map RANK [--events N] [--how whole|spilled|both]``: reads the
rank (through the events cache), then maps it, in this process, as ``--how`` says: ``whole`` (the
run held, every analysis on the whole rank, as the pipeline does today) and ``spilled`` (its
events written to a Parquet file as the cache writes them, the held run let go, and the rank
analysed in windows of about ``--events`` events read from that file as asked:
:class:`~tracekit.readers.spilled.Spilled`, :mod:`tracekit.analyzers.windows`), each in a
process of its own. The live peak is the resident size sampled every 2 ms, with polars' allocator
returning freed pages at once (``_RJEM_MALLOC_CONF``) and the C heap trimmed where tracekit
trims it: what is live, not what an allocator keeps. Prints one JSON line per way.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: polars' allocator returns freed pages at once: the peaks are of live memory
LIVE: dict[str, str] = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"}


class _Peak:
    """The process's resident size, its peak since :meth:`reset` sampled every 2 ms."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._lock = threading.Lock()
        threading.Thread(target=self._sample, daemon=True).start()

    @staticmethod
    def now() -> float:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6

    def _sample(self) -> None:
        while True:
            size = self.now()
            with self._lock:
                self.peak = max(self.peak, size)
            time.sleep(0.002)

    def reset(self) -> None:
        with self._lock:
            self.peak = self.now()


def _one(rank: str, how: str, events: int) -> dict[str, object]:
    """Map ``rank`` one way, in this process."""
    peak = _Peak()
    from tracekit.analyzers import windows  # noqa: PLC0415 (after the sampler: imports measured apart)
    from tracekit.analyzers.context import Options, RankContext  # noqa: PLC0415
    from tracekit.analyzers.mapreduce import map_ranks  # noqa: PLC0415
    from tracekit.analyzers.registry import ANALYSES  # noqa: PLC0415
    from tracekit.heap import trim_heap  # noqa: PLC0415
    from tracekit.model.run import Run  # noqa: PLC0415
    from tracekit.readers import load_run  # noqa: PLC0415
    from tracekit.readers.spilled import Spilled  # noqa: PLC0415

    run = load_run([rank])
    out: dict[str, object] = {"how": how, "events": run.height, "read_peak_mb": round(peak.peak)}
    with tempfile.TemporaryDirectory(prefix="tracekit-windows-map-") as folder:
        if how == "spilled":
            began = time.process_time()
            held = Spilled.written(run.by_kind, Path(folder) / "events.parquet")
            out["spill_cpu_s"] = round(time.process_time() - began, 2)
            run = Run(by_kind=held, ranks=run.ranks, counters=run.counters, memory_categories=run.memory_categories)
        gc.collect()
        trim_heap()
        peak.reset()
        out["settled_mb"] = round(peak.peak)
        began = time.process_time()
        options = Options(has_gpu=run.has_gpu)
        if how == "whole":
            map_ranks(RankContext(run, options), ANALYSES)
        else:
            plan = windows.plan(RankContext(run, options), events=events)
            out["windows"] = len(plan)
            windows.map_windows(RankContext(run, options), ANALYSES, plan)
        out["map_cpu_s"] = round(time.process_time() - began, 2)
        out["map_peak_mb"] = round(peak.peak)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rank", help="one rank's trace file")
    parser.add_argument("--events", type=int, default=1 << 19, help="about this many events a window [2^19]")
    parser.add_argument("--how", choices=["whole", "spilled", "both"], default="both")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: this process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.rank, args.how, args.events)))
        return
    for how in ("whole", "spilled") if args.how == "both" else (args.how,):
        command = [
            sys.executable,
            "-m",
            "benchmarks.windows_map",
            args.rank,
            "--how",
            how,
            "--events",
            str(args.events),
        ]
        done = subprocess.run([*command, "--one"], env=os.environ | LIVE, capture_output=True, text=True, check=False)
        print(done.stdout.strip() or json.dumps({"how": how, "error": done.stderr.strip()[-500:]}), flush=True)


if __name__ == "__main__":
    main()
