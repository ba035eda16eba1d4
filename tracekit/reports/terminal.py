"""The terminal summary: rich tables of the run, steps, GPU time, overlap, kernels, phases."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from collections.abc import Iterable

    import polars as pl

    from tracekit.analyzers.analysis import Analysis

#: Above this many ranks, per-rank tables show the slowest ranks only.
MAX_RANK_ROWS = 16


def ms(ns: Any) -> str:
    """Nanoseconds as milliseconds, for display."""
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def pct(value: Any) -> str:
    """A percentage for display."""
    return "-" if value is None else f"{value:.1f}%"


def _table(title: str, columns: Iterable[str], rows: Iterable[Iterable[str]], caption: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for i, col in enumerate(columns):
        table.add_column(
            col, justify="left" if i == 0 or col in ("kernel", "phase", "category") else "right", overflow="fold"
        )
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: names are never read as markup
    return table


def _limit_ranks(df: pl.DataFrame, sort_col: str) -> tuple[pl.DataFrame, str | None]:
    if df.height <= MAX_RANK_ROWS:
        return df, None
    shown = df.sort(sort_col, descending=True, nulls_last=True).head(MAX_RANK_ROWS).sort("rank")
    return shown, f"{MAX_RANK_ROWS} of {df.height} ranks shown (largest {sort_col}); all are in --json"


class TerminalRenderer:
    """Renders an :class:`Analysis` as text for a terminal."""

    def __init__(self, *, top: int = 10, width: int = 120, color: bool = False) -> None:
        self.top = top
        self.width = width
        self.color = color

    def render(self, analysis: Analysis) -> str:
        """The summary as text (ANSI colored when ``color``)."""
        buffer = io.StringIO()
        console = Console(
            file=buffer, width=self.width, force_terminal=self.color, no_color=not self.color, highlight=False
        )
        console.print(Group(*self.sections(analysis)))
        return buffer.getvalue()

    def sections(self, analysis: Analysis) -> list[RenderableType]:
        """Each section, in order."""
        return [
            self._facts(analysis),
            self._steps(analysis),
            self._breakdown(analysis),
            self._kernels(analysis),
            self._phases(analysis),
        ]

    def _facts(self, a: Analysis) -> RenderableType:
        f = a.facts
        lines = Text()
        lines.append("tracekit analysis\n", style="bold")
        lines.append(
            f"ranks: {len(f.ranks)} ({_rank_list([r.rank for r in f.ranks])})"
            f"   world size: {f.world_size or 'not recorded'}"
            f"   backend: {f.backend or 'not recorded'}\n"
        )
        lines.append(
            f"devices: {', '.join(f.devices) or 'none recorded'}"
            f"   GPU activity: {'yes' if f.has_gpu else 'none (CPU-only run)'}"
            f"   trace span: {ms(f.span_ns)} ms\n"
        )
        guessed = [r for r in f.ranks if r.rank_source not in ("distributedInfo",)]
        for r in guessed:
            lines.append(f"rank {r.rank} of {r.source}: from {r.rank_source}\n")
        for path, reason in f.skipped:
            lines.append(f"skipped {path}: {reason}\n", style="yellow")
        for warning in f.warnings:
            lines.append(f"warning: {warning}\n", style="yellow")
        return lines

    def _steps(self, a: Analysis) -> RenderableType:
        if not a.steps.has_steps:
            return Text(
                "steps: no ProfilerStep#N ranges in these traces (call prof.step() each "
                "iteration); per-step figures are not available\n"
            )
        stats, note = _limit_ranks(a.steps.stats, "mean_ns")
        rows = [
            [
                str(r["rank"]),
                str(r["count"]),
                ms(r["mean_ns"]),
                ms(r["median_ns"]),
                ms(r["p95_ns"]),
                ms(r["min_ns"]),
                ms(r["max_ns"]),
            ]
            for r in stats.iter_rows(named=True)
        ]
        slowest = a.steps.stats.sort("mean_ns", descending=True).row(0, named=True)
        caption = f"slowest rank: {slowest['rank']} (mean {ms(slowest['mean_ns'])} ms per step)"
        return _table(
            "Step time per rank (host, ms)",
            ["rank", "steps", "mean", "median", "p95", "min", "max"],
            rows,
            caption + (f"; {note}" if note else ""),
        )

    def _breakdown(self, a: Analysis) -> RenderableType:
        if not a.facts.has_gpu:
            return Text("GPU time: no GPU activity recorded; nothing to break down\n")
        df = a.breakdown.per_rank.join(
            a.overlap.per_rank.select("rank", "overlap_pct", "comm_ns"), on="rank", how="left", suffix="_total"
        )
        df, note = _limit_ranks(df, "idle_pct")
        rows = [
            [
                str(r["rank"]),
                ms(r["window_ns"]),
                pct(r["compute_pct"]),
                pct(r["comm_pct"]),
                pct(r["memory_pct"]),
                pct(r["idle_pct"]),
                ms(r["comm_ns_total"]),
                pct(r["overlap_pct"]),
            ]
            for r in df.iter_rows(named=True)
        ]
        window = "profiler steps" if a.breakdown.window == "steps" else "first to last GPU activity"
        caption = (
            f"window: {window}; shares of wall-clock time over all streams sum to 100%; "
            "comm = collectives not hidden by compute; overlap = share of collective time "
            "during which compute runs"
        )
        return _table(
            "GPU time breakdown per rank",
            ["rank", "window ms", "compute", "comm", "memory", "idle", "collective ms", "overlap"],
            rows,
            caption + (f"; {note}" if note else ""),
        )

    def _kernels(self, a: Analysis) -> RenderableType:
        if a.kernels.top.height == 0:
            return Text("kernels: none recorded\n")
        rows = [
            [
                _short(r["name"]),
                str(r["category"]),
                f"{r['count']:,}",
                ms(r["total_ns"]),
                f"{r['mean_ns'] / 1e3:,.1f}",
                pct(r["share_pct"]),
            ]
            for r in a.kernels.top.head(self.top).iter_rows(named=True)
        ]
        return _table(
            f"Top {min(self.top, a.kernels.top.height)} GPU kernels over all ranks",
            ["kernel", "category", "count", "total ms", "mean us", "share"],
            rows,
            "share: of summed GPU activity time",
        )

    def _phases(self, a: Analysis) -> RenderableType:
        s = a.annotations.summary
        if s.height == 0:
            return Text("phases: no user annotations (record_function / NVTX ranges) recorded\n")
        per_step = a.steps.has_steps
        gpu = a.facts.has_gpu
        rows = [
            [
                _short(r["name"]),
                ms(r["step_mean_ns"]),
                ms(r["step_median_ns"]),
                ms(r["step_p95_ns"]),
                pct(r["cpu_pct"]),
                *([ms(r["gpu_ns"] / max(1, _steps_count(a)) if per_step else r["gpu_ns"])] if gpu else []),
            ]
            for r in s.iter_rows(named=True)
        ]
        title = "Phases (host ms per step, over ranks and steps)" if per_step else "Annotations (host ms)"
        gpu_col = ["GPU ms/step" if per_step else "GPU ms"] if gpu else []
        return _table(
            title, ["phase", "mean", "median", "p95", "share", *gpu_col], rows, f"level: {a.annotations.level}"
        )


def _steps_count(a: Analysis) -> int:
    return a.steps.steps.height


def _short(name: str, limit: int = 70) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _rank_list(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    parts, start, prev = [], ranks[0], ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)
