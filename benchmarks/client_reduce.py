"""Benchmark: the client's reduce of 1,024 ranks of a GB, measured, not extrapolated.

On a running cluster the map leaves each rank's gains' tables of events and its communication
time on the worker that mapped it (:data:`tracekit.pipeline.shards.KEPT`: the ledger fetches
the latter for a named straggler's waits only), and the client gets the rest
(:func:`tracekit.pipeline.shards._light_alone`): per-step, per-instance and per-name tables.
Whether the client's reduce grows with the MB of a rank, or only with its steps and collective
instances, is then a question of what those tables hold, and the cost model's points (ranks of 3
to 12 MB, two runs of one point differing by more than a rank-MB costs) cannot tell it apart.

``python -m benchmarks.client_reduce`` answers it with the sizes themselves. For each source
(:data:`SOURCES`: the ``dense`` shape at 4 MB, which holds the steps and collective instances of
an A100 rank of a GB, and the A100 shape itself tiled to 1 GB), one rank is generated (its
``distributedInfo`` saying a world of ``--ranks``), read and mapped in this process (no cache),
and its result taken as the client gets it. That result is copied to every rank of the world
(each table's ``rank`` set to the copy's), and the cross-rank reduce of the copies
(:func:`tracekit.analyzers.analysis.reduce_outcome`) timed here, ``--repeat`` times, the least
CPU kept, without the what-ifs (the verdict is given none): on a running cluster their tables
are on the workers, which build and re-time them there; the client's part of that, its rounds
over the collective instances, is in ``benchmarks.scale_ranks``' points apart (its ``dense``
ranks hold the instances of a rank of a GB: that point's client CPU less this one's ``dense``
row is it).

Writes, per source: the rank's events, steps and collective instances; the CPU and wall seconds
of mapping that rank once more as a worker does, with an empty cache (:func:`timed_map`: the
map of a rank measured at its own size, which the cost model's fit extrapolates from ranks of a
few MB); each table the client gets, its rows and bytes; the reduce's CPU seconds (user and
system of every thread of this process), wall seconds and peak RSS.
``benchmarks/results/client_reduce.json``.

    python -m benchmarks.client_reduce             # 1,024 ranks: about 3 minutes
    python -m benchmarks.client_reduce --quick     # 16 ranks of small sources: a check that it runs
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from unittest import mock

import polars as pl

from benchmarks.generate import DATA_DIR, SOURCES, Spec, describe, generate
from benchmarks.run import _machine, write_results
from tracekit.analyzers import verdict_section
from tracekit.analyzers.analysis import reduce_outcome, run_options
from tracekit.analyzers.mapreduce import RankSummary
from tracekit.model.run import RunMeta
from tracekit.pipeline.mapped import Settings, Shard
from tracekit.pipeline.shards import _light_alone, _map_files, map_shard
from tracekit.readers.claims import resolve

if TYPE_CHECKING:
    from tracekit.analyzers.parts import Parts
    from tracekit.pipeline.mapped import Mapped

HERE: Final = Path(__file__).resolve().parent
RANKS: Final = 1024
#: (shape, MB of JSON of the rank): the dense shape's rank of 4 MB holds the steps (224) and
#: collective instances (2,231) of an A100 rank of a GB (216 and 2,150): the two differ in
#: their events per step alone
SOURCES_MB: Final = (("dense", 4.0), ("a100", 1000.0))
QUICK: Final = (("dense", 1.0), ("a100", 12.0))
QUICK_RANKS: Final = 16
REPEAT: Final = 2


def mapped_rank(shape: str, mb: float, world: int, data_dir: Path) -> tuple[Mapped, dict[str, Any]]:
    """One rank of ``shape`` of ``mb`` MB of JSON in a world of ``world`` ranks, mapped here with no
    cache, as the client of a running cluster gets it; what the generator says of the file, and
    :func:`timed_map` of it."""
    spec = Spec(ranks=1, mb_per_rank=mb, source=str(SOURCES[shape]), world_size=world)
    folder = generate(spec, data_dir, log=True)
    settings = Settings(use_cache=False)
    mapped = _map_files(Shard(paths=(str(folder / "rank0.json.gz"),), settings=settings))
    if mapped.summary is None:
        raise SystemExit(f"{folder}: the rank was not analyzed")
    return _light_alone(mapped), describe(spec, data_dir) | timed_map(folder)


def timed_map(folder: Path) -> dict[str, float]:
    """The CPU (every thread of this process) and wall seconds of mapping the rank of ``folder`` as a
    worker of the cost model does: read on one core (``jobs`` 1) with an empty cache, which it
    fills (the event cache and the map's), every per-rank analysis run. What the model's map
    term stands for at a rank's own size, where its fit extrapolates from ranks of 3 to 64 MB
    (:func:`benchmarks.targets.measured_map`). Run after :func:`mapped_rank`'s own map of the
    same file: the imports done, the file in the page cache, as on a worker past its first rank."""
    with tempfile.TemporaryDirectory(prefix="tracekit-client-map-") as cache:
        shard = Shard(paths=(str(folder / "rank0.json.gz"),), settings=Settings(cache_dir=cache))
        gc.collect()
        cpu, wall = _cpu(), time.perf_counter()
        if map_shard(shard).summary is None:
            raise SystemExit(f"{folder}: the rank was not analyzed")
        return {"map_cpu_s": round(_cpu() - cpu, 3), "map_s": round(time.perf_counter() - wall, 3)}


def tables(summary: RankSummary) -> dict[str, dict[str, int]]:
    """Each table the client gets of one rank: its rows and bytes, by ``part.table``."""
    out = {}
    for name, part in sorted(summary.parts.items()):
        for t in part.names():
            frame: pl.DataFrame = getattr(part, t)
            if frame.width:
                out[f"{name}.{t}"] = {"rows": frame.height, "bytes": int(frame.estimated_size())}
    return out


def _as_rank(part: Parts, rank: int) -> Parts:
    """``part`` (one rank's) with every table's ``rank`` set to ``rank``."""
    changed = {}
    for t in part.names():
        frame: pl.DataFrame = getattr(part, t)
        if "rank" in frame.columns:
            changed[t] = frame.with_columns(pl.lit(rank, dtype=frame.schema["rank"]).alias("rank"))
    return replace(part, **changed)  # type: ignore[type-var]


def copies(mapped: Mapped, world: int) -> tuple[list[RankSummary], RunMeta]:
    """The mapped rank copied to every rank of ``world``: each copy's summary, and the run's
    metadata (the copies fill the world: no warning of ranks missing from it)."""
    assert mapped.summary is not None
    resolved = resolve(list(mapped.files), [], rank=None, ranks=None)
    (info,) = resolved.infos
    summaries = [
        RankSummary(ranks=(r,), parts={n: _as_rank(p, r) for n, p in mapped.summary.parts.items()})
        for r in range(world)
    ]
    return summaries, RunMeta(ranks=tuple(replace(info, rank=r) for r in range(world)))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_reduce(mapped: Mapped, world: int) -> dict[str, Any]:
    """The reduce of ``world`` copies of ``mapped``'s rank, timed; what it found, to check it."""
    summaries, meta = copies(mapped, world)
    options = run_options(meta, Settings(use_cache=False), has_gpu=mapped.has_gpu, jobs=1)
    gc.collect()
    with mock.patch.object(verdict_section, "what_ifs", return_value=None):  # re-timed on the workers
        cpu, wall = _cpu(), time.perf_counter()
        outcome = reduce_outcome(summaries, options, meta)
        cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    analysis = outcome.analysis
    primary = analysis.verdict.primary
    return {
        "reduce_cpu_s": round(cpu, 3),
        "reduce_s": round(wall, 3),
        "ranks": len(analysis.run.ranks),
        "collective_instances": analysis.collectives.count,
        "collectives_complete": sum(1 for i in analysis.collectives.instances if i.complete),
        "verdict": getattr(primary.bound or primary.note, "value", None),
    }


def run_all(*, quick: bool, data_dir: Path, repeat: int, log: Any) -> dict[str, Any]:
    """Every source, mapped once and reduced ``repeat`` times; the results document."""
    world = QUICK_RANKS if quick else RANKS
    rows = []
    for shape, mb in QUICK if quick else SOURCES_MB:
        log(f"mapping one {shape} rank of {mb:g} MB (a world of {world}) ...")
        mapped, made = mapped_rank(shape, mb, world, data_dir)
        assert mapped.summary is not None
        got = tables(mapped.summary)
        runs = []
        for i in range(repeat):
            log(f"  reduce of {world} copies, run {i + 1} of {repeat} ...")
            runs.append(timed_reduce(mapped, world))
            log(f"    {runs[-1]['reduce_cpu_s']} s of CPU, {runs[-1]['reduce_s']} s wall")
        best = min(runs, key=lambda r: r["reduce_cpu_s"])
        rows.append(
            {
                "shape": shape,
                "mb_per_rank": mb,
                "events_per_rank": made["events_per_rank"],
                "map_cpu_s": made["map_cpu_s"],
                "map_s": made["map_s"],
                "client_tables": got,
                "client_rows": sum(t["rows"] for t in got.values()),
                "client_bytes": sum(t["bytes"] for t in got.values()),
                **best,
                "reduce_cpu_s_runs": [r["reduce_cpu_s"] for r in runs],
            }
        )
        del mapped
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return {"quick": quick, "world": world, "machine": _machine(), "peak_rss_mb": peak, "points": rows}


def table(doc: dict[str, Any]) -> str:
    """The results as Markdown: a row per source, then the tables whose rows differ."""
    points = doc["points"]
    head = "| shape, MB a rank | events a rank | its map, CPU s | instances | the client's rows a rank (MB)"
    lines = [
        f"{head} | reduce of {doc['world']}, CPU s | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        mb = p["client_bytes"] / 2**20
        lines.append(
            f"| {p['shape']}, {p['mb_per_rank']:g} | {p['events_per_rank']:,} | {p.get('map_cpu_s', 'n/a')} "
            f"| {p['collective_instances']:,} | {p['client_rows']:,} ({mb:.2f}) "
            f"| {p['reduce_cpu_s']} | {p['reduce_s']} |"
        )
    names = sorted({n for p in points for n in p["client_tables"]})
    differ = [n for n in names if len({p["client_tables"].get(n, {}).get("rows", 0) for p in points}) > 1]
    if differ:
        lines += ["", "| table | " + " | ".join(f"{p['shape']} {p['mb_per_rank']:g} MB" for p in points) + " |"]
        lines.append("|---|" + "---:|" * len(points))
        for n in differ:
            rows = " | ".join(f"{p['client_tables'].get(n, {}).get('rows', 0):,}" for p in points)
            lines.append(f"| {n} | {rows} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.client_reduce``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 ranks of small sources: a check that it runs")
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where generated traces are kept")
    parser.add_argument("--out", type=Path, help="results JSON [benchmarks/results/client_reduce.json]")
    args = parser.parse_args(argv)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    doc = run_all(quick=args.quick, data_dir=args.data_dir, repeat=args.repeat, log=log)
    write_results(doc, args.out or HERE / "results" / "client_reduce.json", table(doc))


if __name__ == "__main__":
    main()
