"""The terminal summary: rich tables of the run, steps, GPU time, overlap, kernels, phases."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from collections.abc import Iterable

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
        """Each section, in order: the verdict first, then the evidence."""
        return [
            self._verdict(analysis),
            self._facts(analysis),
            self._steps(analysis),
            self._breakdown(analysis),
            self._host_breakdown(analysis),
            self._stragglers(analysis),
            self._dataloader(analysis),
            self._syncs(analysis),
            self._idle(analysis),
            self._kernels(analysis),
            self._phases(analysis),
        ]

    def _verdict(self, a: Analysis) -> RenderableType:
        v = a.verdict
        text = Text()
        text.append("tracekit verdict", style="bold")
        text.append(f" (measured on {v.measured_on})\n")
        good = v.primary.kind in ("gpu-compute-bound", "compute-bound")
        text.append(v.primary.title, style="bold green" if good else "bold red")
        share = "" if v.primary.share_pct is None else f"{v.primary.share_pct:.1f}% of the time, "
        text.append(f"  [{share}confidence {v.primary.confidence}]\n")
        for line in v.primary.evidence:
            text.append(f"  - {line}\n")
        for rec in v.primary.recommendations[:4]:
            text.append(f"  > {rec}\n", style="cyan")
        for f in v.secondary:
            share = "" if f.share_pct is None else f" ({f.share_pct:.1f}%)"
            text.append(f"also: {f.title}{share}, confidence {f.confidence}\n", style="yellow")
            for line in f.evidence[1:] if f.share_pct is not None else f.evidence:
                text.append(f"  - {line}\n")
            if f.recommendations:
                text.append(f"  > {f.recommendations[0]}\n", style="cyan")
        return text

    def _host_breakdown(self, a: Analysis) -> RenderableType:
        if a.host_breakdown is None or not a.host_breakdown.per_rank.height:
            return Text("")
        df, note = _limit_ranks(a.host_breakdown.per_rank, "idle_pct")
        rows = [
            [str(r["rank"]), ms(r["window_ns"]), pct(r["compute_pct"]), pct(r["comm_pct"]), pct(r["idle_pct"])]
            for r in df.iter_rows(named=True)
        ]
        caption = (
            "operators = any host operator running; collectives = gloo/MPI work not overlapped by an operator, "
            "waits included" + (f"; {note}" if note else "")
        )
        return _table(
            "Host time breakdown per rank (CPU-only run: the host is the device)",
            ["rank", "window ms", "operators", "collectives", "idle"],
            rows,
            caption,
        )

    def _stragglers(self, a: Analysis) -> RenderableType:
        if not a.collectives.has_collectives:
            return Text("stragglers: no collectives matched across ranks (a single rank, or no communication)\n")
        worst = a.stragglers.matrix.group_by("rank").agg(pl.col("lateness_ns").max().alias("worst_step_ns"))
        df, note = _limit_ranks(a.stragglers.per_rank.join(worst, on="rank", how="left"), "score")
        rows = [
            [
                str(r["rank"]),
                f"{r['times_last']}/{r['instances']}",
                ms(r["mean_lateness_ns"]),
                ms(r["caused_wait_ns"]),
                pct(100 * r["score"]),
                ms(r["worst_step_ns"]),
            ]
            for r in df.iter_rows(named=True)
        ]
        named = ", ".join(f"rank {s.rank} ({s.cause})" for s in a.stragglers.stragglers) or "none"
        caption = (
            f"stragglers: {named}; last = arrived last at that many collectives; lateness = how much later than "
            "the first rank; others waited = their wait while it was last; score = that wait per step / step time"
            + (f"; {note}" if note else "")
        )
        columns = ["rank", "last", "mean lateness ms", "others waited ms", "score", "worst step ms"]
        return _table("Collectives: who arrives last", columns, rows, caption)

    def _dataloader(self, a: Analysis) -> RenderableType:
        dl = a.dataloader.per_rank
        if not dl.height or not int(dl["fetch_ns"].sum()):
            return Text("DataLoader: no DataLoader fetch ranges recorded\n")
        dl, note = _limit_ranks(dl, "share_pct")
        rows = [
            [str(r["rank"]), ms(r["fetch_ns"]), ms(r["idle_ns"]), pct(r["share_pct"])] for r in dl.iter_rows(named=True)
        ]
        caption = f"measured as {a.dataloader.measure}" + (f"; {note}" if note else "")
        return _table("DataLoader gaps per rank", ["rank", "host fetch ms", "device idle ms", "share"], rows, caption)

    def _syncs(self, a: Analysis) -> RenderableType:
        s = a.syncs.per_rank
        if (
            not s.height
            or not s.select(pl.sum_horizontal(pl.col("sync_calls", "sync_ops", "gpu_sync_events").sum())).item()
        ):
            return Text("host syncs: none recorded\n")
        s, note = _limit_ranks(s, "idle_after_ns")
        rows = [
            [
                str(r["rank"]),
                f"{r['per_step_calls']:.1f}",
                f"{r['per_step_ops']:.1f}",
                str(r["gpu_sync_events"]),
                ms(r["idle_after_ns"]),
            ]
            for r in s.iter_rows(named=True)
        ]
        columns = ["rank", "sync calls/step", ".item()/step", "GPU sync events", "GPU idle after ms"]
        return _table("Host syncs per rank", columns, rows, note)

    def _idle(self, a: Analysis) -> RenderableType:
        if a.idle is None or not a.idle.per_rank.height:
            return Text("")
        wide = a.idle.per_rank.pivot(on="cause", index="rank", values="idle_ns").fill_null(0).sort("rank")
        causes = [c for c in ("data", "host_sync", "peer", "launch", "unexplained") if c in wide.columns]
        wide, note = _limit_ranks(wide.with_columns(total=pl.sum_horizontal(causes)), "total")
        rows = [[str(r["rank"]), *[ms(r[c]) for c in causes]] for r in wide.iter_rows(named=True)]
        return _table("GPU idle by cause (ms)", ["rank", *causes], rows, note)

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
        caption = (
            f"longest mean step: rank {slowest['rank']} ({ms(slowest['mean_ns'])} ms); collectives make ranks wait "
            "for each other, so see who arrives last for the straggler"
        )
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
