"""The tables every report shows, built once from the typed analysis.

The terminal, Markdown and HTML render the same :class:`Table` objects, so a number cannot
differ between them. Per-rank tables keep the ``limit`` ranks with the largest value of the
table's sort key when a run has more ranks (the JSON keeps them all) and say so in the caption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from tracekit.reports import input_words
from tracekit.reports.cross_rank_words import cross_rank_notes
from tracekit.reports.document import Table
from tracekit.reports.finding_times import CLOCK_NOTE, at
from tracekit.reports.input_words import analyzed_folder, rank_found, relative_note, run_warning, shown_path
from tracekit.reports.left_out_words import left_out_summary
from tracekit.reports.sentences import ONE_RANK
from tracekit.reports.terms import DATA_MEASURES, PHASE_LEVELS, phase_name
from tracekit.results.vocab import CollectiveMatch, IdleCause, WindowKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from tracekit.results.analysis import Analysis


class _Ranked(Protocol):
    @property
    def rank(self) -> int | None: ...


R = TypeVar("R", bound=_Ranked)


def ms(ns: float | None) -> str:
    """ns as ms."""
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def pct(value: float | None) -> str:
    """A percentage."""
    return "-" if value is None else f"{value:.1f}%"


def short(name: object, limit: int = 90) -> str:
    """A long name cut to ``limit`` characters."""
    text = str(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def phase_label(name: str | None) -> str:
    """A phase as reports show it: tracekit's own ranges without their ``tracekit.phase/`` prefix
    (``forward``), any other annotation as recorded, cut to 90 characters (the JSON keeps the name)."""
    return short(phase_name(name))


def limited_rows(
    rows: Sequence[R], key: Callable[[R], float | None], limit: int | None, label: str
) -> tuple[list[R], str]:
    if limit is None or len(rows) <= limit:
        return list(rows), ""
    kept = sorted(rows, key=lambda r: (key(r) is None, -(key(r) or 0)))[:limit]
    kept.sort(key=lambda r: r.rank or 0)
    return kept, f" {limit} of {len(rows)} ranks shown (largest {label}); all are in the JSON."


def make_table(
    key: str,
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    caption: str = "",
    *,
    numeric: Sequence[bool] | None = None,
    empty: str = "",
) -> Table:
    body = tuple(tuple(r) for r in rows)
    flags = tuple(numeric) if numeric is not None else tuple(i > 0 for i in range(len(columns)))
    return Table(key, title, tuple(columns), body, caption.strip(), flags, empty)


def run_facts(a: Analysis) -> Table:
    """Run facts as a two-column table."""
    run = a.run
    ranks = run.ranks
    rows = [
        ("ranks", f"{len(ranks)} ({', '.join(str(r.rank) for r in ranks[:16])}{'…' if len(ranks) > 16 else ''})"),
        ("world size", str(run.world_size or "not recorded")),
        ("backend", str(run.backend or "not recorded")),
        ("devices", ", ".join(run.devices) or "none recorded"),
        ("GPU activity", input_words.device_activity(run)),
        ("steps per rank", str(max((s.count for s in a.steps.per_rank), default=0))),
        ("steps found from", steps_found(a)),
        *((("left out of the window", gone),) if (gone := left_out_summary(a)) else ()),
        ("trace span", f"{ms(run.span_ns)} ms"),
        ("trace files", f"{len(ranks)}" + (f", {len(run.skipped)} skipped" if run.skipped else "")),
        ("tracekit", a.tracekit_version),
    ]
    if a.analysis_seconds is not None:
        rows.append(("analysis time", f"{a.analysis_seconds:.2f} s"))
    return make_table("facts", "Facts", ["fact", "value"], rows, numeric=[False, False])


def input_problems(a: Analysis) -> Table | None:
    """What was wrong with the input: files skipped and why, and the warnings; None when nothing was."""
    folder = analyzed_folder(a)
    rows = [("skipped", short(shown_path(s.path, folder), 120), short(s.reason, 300)) for s in a.run.skipped]
    rows += [("warning", "", short(run_warning(w), 400)) for w in a.run.warnings]
    if not rows:
        return None
    return make_table(
        "problems",
        "Input problems (read before the numbers)",
        ["what", "file", "detail"],
        rows,
        "Skipped files are not in any figure; warned-about events were left out of the figures they name."
        + (relative_note(folder) if a.run.skipped else ""),
        numeric=[False, False, False],
    )


def steps_found(a: Analysis) -> str:
    """How steps were found, over ranks: '8 ranks: ProfilerStep#N'; what was excluded as warm-up."""
    by_source: dict[str, int] = {}
    for f in a.steps.found:
        by_source[f.source.value] = by_source.get(f.source.value, 0) + 1
    text = "; ".join(f"{n} rank{'s' if n > 1 else ''}: {src}" for src, n in by_source.items()) or "none"
    if a.steps.selection:
        text += f" (steps {a.steps.selection} selected)"
    elif a.steps.warmup:
        text += f"; {len(a.steps.warmup)} warm-up step(s) excluded"
    elif a.steps.include_warmup:
        text += " (warm-up included)"
    return text


def warmup(a: Analysis, limit: int | None) -> Table:
    """The steps kept out of the steady state, and why."""
    rows = a.steps.warmup if limit is None else a.steps.warmup[: max(limit, 16)]
    return make_table(
        "warmup",
        "Warm-up steps (excluded from every figure and from the verdict)",
        ["rank", "step", "ms", "x median", "reason", "at"],
        (
            [
                *(str(w.rank), str(w.step), ms(w.duration_ns), "-" if w.ratio is None else f"{w.ratio:.1f}"),
                *(w.reason.value, at(w.start_ns, w.start_ns + w.duration_ns)),
            ]
            for w in rows
        ),
        "Warm-up: the first step when it holds one-time work or is far longer than the others, or any step "
        "several times the median. Choose steps with --steps (e.g. 3-) or keep them with --include-warmup. "
        + CLOCK_NOTE,
        numeric=[True, True, True, True, False, False],
        empty="No warm-up steps were excluded.",
    )


def trace_files(a: Analysis, limit: int | None = None) -> Table:
    """Which file is which rank, and how that was decided (the first ``limit`` ranks); skipped files."""
    ranks = a.run.ranks if limit is None else a.run.ranks[:limit]
    folder = analyzed_folder(a)
    rows = [
        (str(r.rank), short(shown_path(r.source, folder), 120), rank_found(r.rank_source), f"{r.events:,}")
        for r in ranks
    ]
    rows += [("skipped", short(shown_path(s.path, folder), 120), short(s.reason, 120), "") for s in a.run.skipped]
    note = (
        f"{len(ranks)} of {len(a.run.ranks)} ranks shown; all are in the JSON." if len(ranks) < len(a.run.ranks) else ""
    ) + relative_note(folder)
    return make_table(
        "files", "Trace files", ["rank", "file", "rank from", "events"], rows, note, numeric=[True, False, False, True]
    )


def step_times(a: Analysis, limit: int | None) -> Table:
    """Step time per rank."""
    rows, note = limited_rows(a.steps.per_rank, lambda r: r.mean_ns, limit, "mean_ns")
    device = "GPU operation" if a.run.has_gpu else "operator"
    return make_table(
        "steps",
        "Step time per rank (host, ms)",
        ["rank", "steps", "mean", "median", "p95", "min", "max"],
        (
            [str(r.rank), str(r.count), ms(r.mean_ns), ms(r.median_ns), ms(r.p95_ns), ms(r.min_ns), ms(r.max_ns)]
            for r in rows
        ),
        note,
        empty="No steps found (no ProfilerStep#N or step#N ranges, and no repeated DataLoader, optimizer or "
        f"annotation structure): each rank is measured as one window, from its first to its last {device}.",
    )


def phases(a: Analysis) -> Table:
    """Phase (top-level annotation) breakdown over ranks and steps."""
    ann = a.annotations
    gpu = a.run.has_gpu
    rank_steps = max(1, sum(r.count for r in a.steps.per_rank))
    columns = ["phase", "mean ms/step", "median", "p95", "share", *(["GPU ms/step"] if gpu else [])]
    rows = (
        [
            phase_label(r.name),
            ms(r.step_mean_ns),
            ms(r.step_median_ns),
            ms(r.step_p95_ns),
            pct(r.cpu_pct),
            *([ms(r.gpu_ns / rank_steps)] if gpu else []),
        ]
        for r in ann.summary
    )
    return make_table(
        "phases",
        "Phases (host time per step, over ranks and steps)",
        columns,
        rows,
        f"Level: {PHASE_LEVELS[ann.level]}. Shares are of step time and sum to 100%.",
        numeric=[False, *([True] * (len(columns) - 1))],
        empty="No user annotations (record_function / NVTX ranges) were recorded.",
    )


@dataclass(frozen=True)
class _RankPhases:
    rank: int
    means: dict[str, float | None]
    total: float


def phases_per_rank(a: Analysis, limit: int | None) -> Table:
    """Mean host ms per step of each phase, per rank (the stacked-bar data)."""
    names = [r.name for r in a.annotations.summary]
    by_rank: dict[int, dict[str, float | None]] = {}
    for r in a.annotations.per_rank:
        by_rank.setdefault(r.rank or 0, {})[r.name] = r.step_mean_ns
    data = [_RankPhases(rank, m, sum(v or 0 for k, v in m.items() if k in names)) for rank, m in by_rank.items()]
    rows, note = limited_rows(data, lambda r: r.total, limit, "total")
    return make_table(
        "phases_per_rank",
        "Phases per rank (host ms per step)",
        ["rank", *map(phase_label, names)],
        ([str(r.rank), *(ms(r.means.get(n)) for n in names)] for r in rows),
        note,
        empty="No user annotations were recorded.",
    )


def gpu_breakdown(a: Analysis, limit: int | None) -> Table:
    """GPU time breakdown and overlap per rank."""
    overlap = {r.rank: r for r in a.overlap.per_rank}
    rows, note = limited_rows(a.gpu_breakdown.per_rank, lambda r: r.idle_pct, limit, "idle_pct")
    window = "profiler steps" if a.gpu_breakdown.window is WindowKind.STEPS else "first to last GPU activity"
    return make_table(
        "gpu",
        "GPU time breakdown per rank",
        ["rank", "window ms", "compute", "comm", "memory", "idle", "collective ms", "overlap"],
        (
            [
                str(r.rank),
                ms(r.window_ns),
                pct(r.compute_pct),
                pct(r.comm_pct),
                pct(r.memory_pct),
                pct(r.idle_pct),
                ms(o.comm_ns if (o := overlap.get(r.rank)) else None),
                pct(o.overlap_pct if o else None),
            ]
            for r in rows
        ),
        f"Window: {window}. Wall-clock unions over all streams; shares sum to 100%. comm = collectives not "
        "hidden by compute; overlap = share of collective time during which compute runs." + note,
        empty="No GPU activity was recorded (a CPU-only run): nothing to break down.",
    )


def host_breakdown(a: Analysis, limit: int | None) -> Table | None:
    """The host timeline of a CPU-only run."""
    host = a.host_breakdown
    if host is None:
        return None
    rows, note = limited_rows(host.per_rank, lambda r: r.idle_pct, limit, "idle_pct")
    return make_table(
        "host",
        "Host time breakdown per rank (CPU-only run)",
        ["rank", "window ms", "operators", "collectives", "idle"],
        ([str(r.rank), ms(r.window_ns), pct(r.compute_pct), pct(r.comm_pct), pct(r.idle_pct)] for r in rows),
        "The host is the device of a CPU-only run: operators as compute, gloo/MPI work as collectives." + note,
    )


def stragglers(a: Analysis, limit: int | None) -> Table:
    """Who arrives last at collectives."""
    s = a.stragglers
    rows, note = limited_rows(s.per_rank, lambda r: r.score, limit, "score")
    named = (
        ", ".join(f"rank {x.rank} ({phase_label(x.phase) if x.phase else x.cause.value})" for x in s.stragglers)
        or "none"
    )
    return make_table(
        "stragglers",
        "Collectives: who arrives last",
        ["rank", "last / collectives", "mean lateness ms", "others waited ms", "score"],
        (
            [
                str(r.rank),
                f"{r.times_last}/{r.instances}",
                ms(r.mean_lateness_ns),
                ms(r.caused_wait_ns),
                pct(100 * (r.score or 0)),
            ]
            for r in rows
        ),
        f"Stragglers: {named}. The score is the others' wait a rank causes per step, as a share of the step."
        + cross_rank_notes(a.collectives)
        + note,
        empty=_NO_STRAGGLERS.get(a.collectives.match, "No collectives were matched across ranks.")
        + cross_rank_notes(a.collectives),
    )


#: Why there is no straggler table, by how far collectives could be matched.
_NO_STRAGGLERS: Final = {
    CollectiveMatch.NONE: "No collectives were recorded: no rank can arrive last.",
    CollectiveMatch.SINGLE_RANK: f"Who arrives last is {ONE_RANK}: no collective was recorded by two ranks, "
    "so no arrival can be compared.",
}
#: A cell whose figure needs the collective on two ranks or more.
_UNMATCHED: Final = "n/a (one rank)"


def collectives(a: Analysis, limit: int = 40) -> Table:
    """Collective instances: matched across ranks, or each recorded by one rank (whose latency
    floor, spread and last rank cannot be measured)."""
    inst = a.collectives.instances
    note = f" {limit} of {len(inst)} shown." if len(inst) > limit else ""
    if any(not r.matched for r in inst):
        note = f" {_UNMATCHED}: recorded by one rank only, its latency floor and waiting are {ONE_RANK}." + note
    one_rank = a.collectives.match is CollectiveMatch.SINGLE_RANK
    return make_table(
        "collectives",
        "Collective instances, each recorded by one rank only"
        if one_rank
        else "Collective instances matched across ranks",
        ["operation", "k", "ranks", "latency floor ms", "spread ms", "last rank", "last ranks"],
        (
            [
                short(r.op, 40),
                str(r.k),
                str(r.ranks),
                ms(r.floor_ns) if r.matched else _UNMATCHED,
                ms(r.spread_ns) if r.matched else _UNMATCHED,
                str(r.last_rank) if r.last_rank is not None else "-" if r.matched else _UNMATCHED,
                ", ".join(map(str, r.last_ranks)),
            ]
            for r in inst[:limit]
        ),
        "Latency floor = the shortest duration over ranks; the rest of each rank's duration is waiting."
        + cross_rank_notes(a.collectives)
        + note,
        numeric=[False, True, True, True, True, True, False],
        empty="No collectives were recorded.",
    )


def dataloader(a: Analysis, limit: int | None) -> Table:
    """DataLoader gaps per rank."""
    dl = a.dataloader
    rows, note = limited_rows(dl.per_rank, lambda r: r.share_pct, limit, "share_pct")
    has = any(r.fetch_ns for r in dl.per_rank)
    return make_table(
        "dataloader",
        "DataLoader gaps per rank",
        ["rank", "host fetch ms", "device idle ms", "share"],
        ([str(r.rank), ms(r.fetch_ns), ms(r.idle_ns), pct(r.share_pct)] for r in rows) if has else [],
        f"Measured as {DATA_MEASURES[dl.measure]}." + note,
        empty="No DataLoader fetch ranges (enumerate(DataLoader)#…__next__, tracekit.phase/dataload_wait) "
        "were recorded.",
    )


def syncs(a: Analysis, limit: int | None) -> Table:
    """Host syncs per rank."""
    per = a.host_syncs.per_rank
    rows, note = limited_rows(per, lambda r: r.idle_after_ns, limit, "idle_after_ns")
    has = any(r.sync_calls or r.sync_ops or r.gpu_sync_events for r in per)
    return make_table(
        "syncs",
        "Host syncs per rank",
        ["rank", "sync calls / step", ".item() / step", "GPU sync events", "GPU idle after ms"],
        (
            [
                str(r.rank),
                f"{r.per_step_calls or 0:.1f}",
                f"{r.per_step_ops or 0:.1f}",
                str(r.gpu_sync_events),
                ms(r.idle_after_ns),
            ]
            for r in rows
        )
        if has
        else [],
        note,
        empty="No host syncs were recorded.",
    )


@dataclass(frozen=True)
class _RankIdle:
    rank: int
    by_cause: dict[str, int]
    total: int


def idle_causes(a: Analysis, limit: int | None) -> Table:
    """GPU idle by cause per rank."""
    rows_in = a.idle_causes.per_rank if a.idle_causes is not None else []
    causes = list(dict.fromkeys(r.cause.value for r in rows_in))
    by_rank: dict[int, dict[str, int]] = {}
    for r in rows_in:
        by_rank.setdefault(r.rank, {})[r.cause.value] = r.idle_ns
    data = [_RankIdle(rank, c, sum(c.values())) for rank, c in by_rank.items()]
    rows, note = limited_rows(data, lambda r: r.total, limit, "total")
    return make_table(
        "idle",
        "GPU idle by cause (ms)",
        ["rank", *causes],
        ([str(r.rank), *(ms(r.by_cause.get(c, 0)) for c in causes)] for r in rows),
        "Each idle interval has one cause: what ended it and, when the host was late, what the host was doing."
        + "".join(_CAUSE_NOTES[c] for c in causes if c in _CAUSE_NOTES)
        + note,
        empty="No GPU idle to attribute (no GPU activity).",
    )


#: What a cause means where its name does not say it, beside the idle table.
_CAUSE_NOTES: Final = {
    IdleCause.CAPTURE_SYNC.value: (
        " capture_sync: after tracekit capture's own wait for the GPU at each step's end (it times the step):"
        " the measurement's, not the training's, so it bounds nothing and no finding advises removing it."
    ),
    IdleCause.DEVICE_GAP.value: (
        " device_gap: the GPU took longer than a switch to start work already queued behind other work on its"
        " stream, with no event wait and no other stream in the trace: the device's own gap (work a sampled trace"
        " dropped, another process sharing the GPU), which no change of the training removes."
    ),
    IdleCause.UNOBSERVABLE.value: (
        " unobservable: the GPU ran or waited on work launched before the profiler started (nothing of it is in"
        " the trace), so what it did then cannot be seen; profile more steps and leave the first out."
    ),
}


def kernels(a: Analysis, top: int = 15) -> Table:
    """Top GPU kernels."""
    rows = a.kernels.top[:top]
    return make_table(
        "kernels",
        f"Top {len(rows)} GPU kernels over all ranks" if rows else "Top GPU kernels over all ranks",
        ["kernel", "category", "count", "total ms", "mean us", "share"],
        (
            [short(r.name), r.category, f"{r.count:,}", ms(r.total_ns), f"{r.mean_ns / 1e3:,.1f}", pct(r.share_pct)]
            for r in rows
        ),
        "Share of summed GPU activity time.",
        numeric=[False, False, True, True, True, True],
        empty="No GPU kernels were recorded.",
    )


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def costs(a: Analysis) -> Table:
    """The share of each candidate bound that holds any of the time (a bound of none is no row)."""
    held = [r for r in a.verdict.costs if r.share_pct > 0]
    return make_table(
        "costs",
        "Share of measured time per candidate bound",
        ("bound", "mean over ranks", "worst rank's share", "worst rank"),
        ((r.bound.value, pct(r.share_pct), pct(r.max_rank_share_pct), _rank(r.worst_rank)) for r in held),
        "Each share is the sum of the ledger entries that are evidence for the bound (a bound holding none of "
        "the time has no row). The rule: a waste bounds the run when removing it, re-timed, would make the step "
        "1.18x as fast (a gain of 15%), the largest share of those first; else compute does "
        "(tracekit/analyzers/verdict.py).",
        numeric=(False, True, True, True),
        empty="No bound holds any of the measured time.",
    )


def ledger(a: Analysis, limit: int | None) -> Table | None:
    """Every ns of each rank's window under one entry: the run's shares, then each rank's."""
    led = a.ledger
    if led is None or not led.run:
        return None
    entries = [s.entry for s in led.run]
    rows, note = limited_rows(led.per_rank, lambda r: r.window_ns, limit, "window")
    pace = ", ".join(str(r) for r in led.pace_ranks[:16]) + ("…" if len(led.pace_ranks) > 16 else "")
    body = [["run", "", *(pct(s.share_pct) for s in led.run)]]
    body += [[str(r.rank), ms(r.window_ns), *(pct(r.pct.get(e, 0.0)) for e in entries)] for r in rows]
    bounds = "; ".join(f"{s.entry.value}: {s.bound.value if s.bound else 'no bound'}" for s in led.run)
    return make_table(
        "ledger",
        "Where each rank's measured time went (the ledger)",
        ["rank", "window ms", *(e.value for e in entries)],
        body,
        f"Every nanosecond of each rank's window counted once; each row sums to 100%. The run row is the "
        f"mean over the ranks that set the pace ({pace}), and every share of the verdict is read from it. "
        f"Evidence for: {bounds}." + note,
    )
