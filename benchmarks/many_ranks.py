"""Thousands of synthetic ranks: what reporting costs next to analyzing, and how large the JSON is.

Builds a :class:`~tracekit.model.run.Run` in memory (no files): every rank has ``steps``
profiler steps, each with a DataLoader fetch, forward and backward annotations, ``kernels``
compute kernels launched from the host, and one NCCL all-reduce whose start varies by rank
(so that collectives match across ranks and one rank arrives last). Then it times, in one
process: ``run_analysis`` (map + reduce into the typed result), the terminal report, the JSON
report and the Markdown report, and writes the figures and the targets' ratios to
``benchmarks/results/many_ranks_<n>.json``.

    python3 -m benchmarks.many_ranks --ranks 2048
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Final

import polars as pl

from tracekit.analyzers import run_analysis
from tracekit.model import SCHEMA, RankInfo, Run, classify
from tracekit.reports import TerminalRenderer, renderer

ROOT: Final = Path(__file__).resolve().parents[1]
US: Final = 1_000


def _step_events(step: int, kernels: int) -> list[dict[str, object]]:
    """The events of one step of rank 0, times relative to the step start (ns)."""
    t0 = step * 10_000 * US
    rows: list[dict[str, object]] = [
        {"kind": "step", "name": f"ProfilerStep#{step}", "start_ns": t0, "end_ns": t0 + 9_000 * US, "tid": 1},
        {
            "kind": "annotation",
            "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "start_ns": t0,
            "end_ns": t0 + 500 * US,
            "tid": 1,
        },
        {"kind": "annotation", "name": "forward", "start_ns": t0 + 600 * US, "end_ns": t0 + 3_000 * US, "tid": 1},
        {"kind": "annotation", "name": "backward", "start_ns": t0 + 3_000 * US, "end_ns": t0 + 8_000 * US, "tid": 1},
    ]
    for k in range(kernels):
        launch = t0 + 700 * US + k * 600 * US
        corr = step * 1_000 + k
        rows.append(
            {
                "kind": "runtime",
                "name": "cudaLaunchKernel",
                "start_ns": launch,
                "end_ns": launch + 5 * US,
                "tid": 1,
                "correlation": corr,
            }
        )
        rows.append(
            {
                "kind": "kernel",
                "name": f"gemm_kernel_{k % 4}",
                "start_ns": launch + 20 * US,
                "end_ns": launch + 520 * US,
                "device": 0,
                "stream": 7,
                "correlation": corr,
            }
        )
    launch = t0 + 7_000 * US
    rows.append(
        {
            "kind": "runtime",
            "name": "cudaLaunchKernel",
            "start_ns": launch,
            "end_ns": launch + 5 * US,
            "tid": 1,
            "correlation": step * 1_000 + 999,
        }
    )
    rows.append(
        {
            "kind": "kernel",
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "start_ns": launch + 50 * US,
            "end_ns": t0 + 8_500 * US,
            "device": 0,
            "stream": 20,
            "correlation": step * 1_000 + 999,
        }
    )
    return rows


def synthetic_run(ranks: int, *, steps: int = 3, kernels: int = 8) -> Run:
    """A run of ``ranks`` ranks with the same work, the all-reduce arriving later on higher ranks."""
    one = pl.DataFrame([r for s in range(steps) for r in _step_events(s, kernels)], infer_schema_length=None)
    reader_columns = {k: v for k, v in SCHEMA.items() if k != "category"}
    one = one.with_columns(pid=pl.lit(100), rank=pl.lit(0))
    for column in reader_columns:
        if column not in one.columns:
            one = one.with_columns(pl.lit(None).alias(column))
    one = one.select([pl.col(c).cast(t) for c, t in reader_columns.items()])
    rank_ids = pl.DataFrame({"r": pl.int_range(ranks, eager=True).cast(pl.Int32)})
    # the collective starts up to 400 us later on higher ranks: one rank arrives last
    skew = (
        pl.when(pl.col("name").cast(pl.String).str.starts_with("nccl"))
        .then(pl.col("r").cast(pl.Int64) * 400 * US // ranks)
        .otherwise(0)
    )
    events = (
        one.join(rank_ids, how="cross")
        .with_columns(pl.col("r").alias("rank"), (pl.col("start_ns") + skew).alias("start_ns"))
        .drop("r")
    )
    events = classify(events).select(list(SCHEMA)).sort("rank", "start_ns")
    infos = tuple(RankInfo(rank=r, source=f"rank{r}.json", world_size=ranks, backend="nccl") for r in range(ranks))
    return Run(events=events, ranks=infos)


def measure(ranks: int) -> dict[str, object]:
    """Time analyzing and reporting ``ranks`` synthetic ranks."""
    run = synthetic_run(ranks)
    started = time.perf_counter()
    outcome = run_analysis(run)
    analyze_s = time.perf_counter() - started
    started = time.perf_counter()
    terminal = TerminalRenderer().render(outcome.analysis)
    terminal_s = time.perf_counter() - started
    started = time.perf_counter()
    text = renderer("json").render(outcome.analysis)
    json_s = time.perf_counter() - started
    started = time.perf_counter()
    markdown = renderer("md").render(outcome.analysis)
    md_s = time.perf_counter() - started
    return {
        "ranks": ranks,
        "events": run.events.height,
        "analyze_s": round(analyze_s, 3),
        "terminal_s": round(terminal_s, 3),
        "json_s": round(json_s, 3),
        "markdown_s": round(md_s, 3),
        "json_mb": round(len(text.encode()) / 2**20, 2),
        "terminal_chars": len(terminal),
        "markdown_chars": len(markdown),
        "targets": {
            "terminal_over_analyze": round(terminal_s / analyze_s, 3),
            "terminal_over_analyze_max": 1.5,
            "json_mb_max": 20,
        },
    }


def main() -> None:
    """Measure and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2048)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = measure(args.ranks)
    out = args.out or ROOT / "benchmarks" / "results" / f"many_ranks_{args.ranks}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
