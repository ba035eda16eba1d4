"""The table ``tracekit capture`` prints from its summary.json."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def _ms(ns: Any) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def render_capture_summary(summary: dict[str, Any], *, width: int = 100) -> str:
    """Phases (mean/median/p95 ms and share of step time), throughput, per-rank steps."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, highlight=False)
    step = summary.get("step", {})
    phases = Table(title=f"Phases over {step.get('count', 0)} measured rank-steps (host ms)", title_justify="left")
    for col in ("phase", "mean", "median", "p95", "share"):
        phases.add_column(col, justify="left" if col == "phase" else "right")
    for row in summary.get("phases", []):
        share = row.get("share_pct")
        phases.add_row(
            Text(row["phase"]),
            _ms(row["mean_ns"]),
            _ms(row["median_ns"]),
            _ms(row["p95_ns"]),
            "-" if share is None else f"{share:.1f}%",
        )
    phases.add_row("step", _ms(step.get("mean_ns")), _ms(step.get("median_ns")), _ms(step.get("p95_ns")), "100.0%")
    console.print(phases)
    ranks = Table(title="Per rank", title_justify="left")
    for col in ("rank", "step mean ms", "before 1st collective ms", "peak memory"):
        ranks.add_column(col, justify="right")
    for row in summary.get("per_rank", []):
        mem = row.get("memory", {})
        peak = mem.get("peak_allocated_bytes", mem.get("peak_rss_bytes"))
        label = "allocated" if "peak_allocated_bytes" in mem else "RSS"
        ranks.add_row(
            str(row["rank"]),
            _ms(row.get("step_mean_ns")),
            _ms(row.get("pre_collective_mean_ns")),
            "-" if peak is None else f"{peak / 2**20:,.0f} MiB {label}",
        )
    console.print(ranks)
    t = summary.get("throughput", {})
    if t.get("steps_per_s"):
        samples = t.get("global_samples_per_s")
        console.print(
            f"throughput: {t['steps_per_s']:.2f} steps/s"
            + (f", {samples:,.0f} samples/s over {summary.get('world_size')} ranks" if samples else "")
        )
        late = t.get("slowest_rank_pre_collective_mean_ns")
        median = t.get("median_other_pre_collective_mean_ns")
        if late is not None and not t.get("is_straggler"):
            console.print(
                "no straggler: no rank reaches the step's first collective later than 5% of a step after the others"
            )
        elif late is not None:
            console.print(
                f"slowest rank: {t['slowest_rank']} (last to reach the step's first collective: "
                f"{_ms(late)} ms of data wait, copy and forward per step"
                + (f" against a median of {_ms(median)} ms on the others)" if median is not None else ")")
            )
    for note in summary.get("notes", []):
        console.print(Text(f"note: {note}"))
    return buffer.getvalue()
