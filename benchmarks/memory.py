"""Benchmark: what the memory analysis adds to the analysis of 8 x 125 MB traces with memory events.

``python -m benchmarks.memory`` generates (or reuses) 8 ranks of about 125 MB of JSON each with
the ``[memory]`` events of ``profile_memory=True`` (``benchmarks.generate``, ``Spec(memory=True)``:
an allocation and a free around every CPU operator, about a fifth of the events), reads them
once (``load_run``), then times in this one process, in turns, ``--repeat`` times:

* ``full``: ``run_analysis`` with every registered analysis;
* ``without_memory``: the same registry without the memory entry.

Two shares, fastest against fastest: of the analysis as ``tracekit analyze`` runs it (reading
the files, which ``load_s`` measures, plus every analysis), the target of under 10%; and of the
analysis stage alone, after reading (stricter; recorded beside it). Writes
``benchmarks/results/memory_8x125mb.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Final

from benchmarks.generate import DATA_DIR, Spec, describe, generate
from benchmarks.run import _machine
from tracekit.analyzers import analysis as a
from tracekit.analyzers.mapreduce import map_ranks
from tracekit.analyzers.registry import ANALYSES
from tracekit.readers import load_run

TARGET: Final = 0.10


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb-per-rank", type=float, default=125.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "memory_8x125mb.json")
    args = parser.parse_args(argv)
    spec = Spec(ranks=args.ranks, mb_per_rank=args.mb_per_rank, memory=True)
    folder = generate(spec, args.data_dir, log=True)
    began = time.perf_counter()
    run = load_run([folder], use_cache=False)
    load_s = time.perf_counter() - began
    print(f"read {run.events.height:,} events and {run.counters.height:,} memory samples in {load_s:.1f} s", flush=True)
    registries = {"full": ANALYSES, "without_memory": tuple(e for e in ANALYSES if e.name != "memory")}
    walls: dict[str, list[float]] = {k: [] for k in registries}
    memory_rows = 0
    for _ in range(args.repeat):
        for name, entries in registries.items():
            options = a.options_for(run)
            started = time.perf_counter()
            mapped = [map_ranks(run, options, entries)]
            reduced = a.reduce_ranks(mapped, options, entries, run)
            walls[name].append(time.perf_counter() - started)
            if name == "full":
                memory_rows = len(reduced.results["memory"].per_device)
            print(f"  {name}: {walls[name][-1]:.2f} s", flush=True)
    full, without = min(walls["full"]), min(walls["without_memory"])
    share = (full - without) / (load_s + full)
    stage_share = (full - without) / full
    doc: dict[str, Any] = {
        "machine": _machine(),
        "spec": {k: v for k, v in describe(spec, args.data_dir).items() if k != "spec"} | {"memory": True},
        "events": run.events.height,
        "memory_samples": run.counters.height,
        "memory_rows": memory_rows,
        "load_s": round(load_s, 2),
        "walls_s": {k: [round(w, 3) for w in v] for k, v in walls.items()},
        "memory_share": round(share, 4),
        "memory_share_of_the_analysis_stage": round(stage_share, 4),
        "target": {"what": "(full - without_memory) / (load_s + full)", "bound": TARGET, "met": share < TARGET},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"memory analysis: {100 * share:.1f}% of reading and analyzing ({load_s + full:.2f} s)")
    print(f"  {100 * stage_share:.1f}% of the analysis stage alone ({full:.2f} s with, {without:.2f} s without)")
    print(f"target under {100 * TARGET:.0f}%: {'met' if share < TARGET else 'NOT met'}; wrote {args.out}")


if __name__ == "__main__":
    main()
