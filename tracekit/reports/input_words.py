"""The words of the run's input: its warnings (:class:`~tracekit.results.analysis.RunWarning`),
one sentence per kind from its figures, prefixed by the file it is about (shown by every format
in the input problems table and the notes before the tables), and how each trace's rank was
decided (:class:`~tracekit.results.analysis.RankFound`, the trace files table), and each file's
name relative to the folder analyzed (a report never shows the local absolute path)."""

from __future__ import annotations

import os.path
from typing import TYPE_CHECKING, Final

from tracekit.results.vocab import DropReason, RankSource, RunWarningKind

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.results.analysis import Analysis, DroppedEvent, RankFound, RunFacts, RunWarning

__all__ = [
    "DROP_REASONS",
    "RANK_SOURCES",
    "RUN_WARNINGS",
    "analyzed_folder",
    "device_activity",
    "device_kind",
    "rank_found",
    "relative_note",
    "run_warning",
    "shown_path",
]

#: Why an event was dropped, as a warning says it ("3 with a negative duration").
DROP_REASONS: Final = {
    DropReason.NO_TIME: "no numeric time",
    DropReason.NO_EXTENT: "no duration",
    DropReason.NEGATIVE: "a negative duration",
    DropReason.FAR: "a time far outside the rest of the rank",
}


def _num(value: float | None) -> str:
    value = value or 0.0
    return f"{value:.0f}" if abs(value) < 1e18 else f"{value:.3g}"


def _example(e: DroppedEvent | None) -> str:
    """'ProfilerStep#9' at 1694128202545700 us lasting 1000000000000000 us."""
    if e is None:
        return ""
    label = "an unnamed event" if e.name is None else repr(e.name)
    if e.reason is DropReason.NO_TIME:
        return f"{label} with no usable start time"
    if e.duration is None:
        return f"{label} at {_num(e.start)} {e.unit} without a duration"
    return f"{label} at {_num(e.start)} {e.unit} lasting {_num(e.duration)} {e.unit}"


def _dropped(w: RunWarning) -> str:
    by_reason = ", ".join(f"{n} with {DROP_REASONS[reason]}" for reason, n in w.reasons.items())
    return (
        f"dropped {w.count} event(s) whose times cannot be right ({by_reason}), e.g. {_example(w.example)}; "
        "the analysis does not use them"
    )


#: What was wrong with step markers, and what was done (``bad_steps``: its key).
_BAD_STEPS: Final = {
    "number": "whose step number is missing or beyond 64 bits; they were left out",
    "zero_length": "of zero length; they were left out (the steps come from the rest, or are inferred)",
    "nested": "inside another step marker (a step marked twice); they were left out",
    "overlapping": "running past the next step's start; each was cut where the next step begins",
}


def _bad_steps(w: RunWarning) -> str:
    said = _BAD_STEPS.get(w.key or "", "that cannot be a loop's steps; they were left out")
    return f"{w.count} step marker(s) {said}"


def _missing(w: RunWarning) -> str:
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in w.ranges)
    shown += f" and {w.more} more ranges" if w.more else ""
    return (
        f"{w.count} of the {w.world_size} ranks of this world have no trace here "
        f"({'rank' if w.count == 1 else 'ranks'} {shown}): cross-rank figures cover only the ranks present"
    )


#: One sentence per kind of warning, from its figures (the file it is about is put before it).
RUN_WARNINGS: Final[dict[RunWarningKind, Callable[[RunWarning], str]]] = {
    RunWarningKind.BAD_DISTRIBUTED_INFO: lambda w: (
        f"distributedInfo.{w.key} is {w.value}, which is not a {(w.key or '').replace('_', ' ')}; it was ignored"
    ),
    RunWarningKind.NOT_EVENTS: lambda w: (
        f"{w.count} entries of traceEvents are not events (not JSON objects); they were left out"
    ),
    RunWarningKind.BAD_ARGS: lambda w: (
        f"{w.count} event(s) have args that are not a JSON object; they were read without their args"
    ),
    RunWarningKind.DROPPED_EVENTS: _dropped,
    RunWarningKind.BAD_SESSION_START: lambda w: (
        f"the session start time (utcEpochNs) is {w.value}, not a time: it was ignored, "
        "so this file's clock is not aligned with other files"
    ),
    RunWarningKind.BAD_RANK_ENV: lambda w: f"the recorded {w.key}={w.value} is not a rank number; it was ignored",
    RunWarningKind.RANK_OUTSIDE_WORLD: lambda w: (
        f"rank {w.rank} is outside the world of {w.world_size} ranks its file records"
    ),
    RunWarningKind.MISSING_RANKS: _missing,
    RunWarningKind.NO_COMM_KERNELS: lambda w: (
        f"rank {w.rank}: distributed run (world size {w.world_size}, {w.count} host-side collective ops) but no GPU "
        "kernel was recognized as communication; communication time will read as zero (name its kernels with "
        "--comm-kernel REGEX)"
    ),
    RunWarningKind.MEMORY_ONLY: lambda _: (
        "memory timelines only: no trace events, so no time breakdown or verdict; memory is reported"
    ),
    RunWarningKind.CPU_ONLY: lambda _: (
        "no GPU activity in these traces: a CPU-only run; the GPU sections (breakdown, idle, kernels) are left "
        "out, the host's steps, phases and time breakdown are reported"
    ),
    RunWarningKind.DEVICE_EVENTS_UNREAD: lambda w: (
        f"{w.count} {device_kind(w.key)} device event(s) ({w.value}) are in this trace, but tracekit does not read "
        f"them as device work: the {device_kind(w.key)}'s time is not analyzed, only the host's"
    ),
    RunWarningKind.BAD_STEPS: _bad_steps,
    RunWarningKind.BAD_MEMORY: lambda w: (
        f"in {w.count} memory categories, more was freed than the timeline saw allocated before; the difference "
        "is counted as memory that existed before profiling"
        if w.key == "frees"
        else f"{w.count} memory row(s) hold totals no allocator reports (negative, beyond 64 bits, or less "
        "reserved than allocated); they were left out of the memory figures"
    ),
    RunWarningKind.UNEVEN_RANKS: lambda w: (
        f"rank {w.rank} recorded {w.count} {(w.key or '')[:-1] if w.count == 1 else w.key} where the ranks recorded "
        f"{w.value} (their median): its trace was "
        "cut short, or it ran other work; collectives are matched across ranks only where every rank recorded "
        "them, so waits and stragglers cover that part"
    ),
    RunWarningKind.TEXT: lambda w: w.text or "",
}

#: Device kinds as libkineto names their categories -> their names in a sentence.
DEVICE_KINDS: Final = {"mtia": "MTIA", "xpu": "XPU", "hpu": "HPU", "privateuse1": "PrivateUse1"}


def device_kind(key: str | None) -> str:
    """A device kind of a warning (``mtia``) in words (``MTIA``)."""
    return DEVICE_KINDS.get(key or "", (key or "unknown").upper())


def device_activity(run: RunFacts) -> str:
    """The facts' word for the device work read: yes, none (a CPU-only run), or none read where
    the trace holds device events of a kind tracekit does not read."""
    if run.has_gpu:
        return "yes"
    unread = [device_kind(w.key) for w in run.warnings if w.kind is RunWarningKind.DEVICE_EVENTS_UNREAD]
    return f"none read ({', '.join(dict.fromkeys(unread))} events not read)" if unread else "none (CPU-only run)"


def run_warning(w: RunWarning) -> str:
    """One warning about the input, in words: 'runs/rank3.json: dropped 2 event(s) whose times ...'."""
    said = RUN_WARNINGS[w.kind](w)
    return f"{w.path}: {said}" if w.path is not None and w.kind is not RunWarningKind.TEXT else said


#: How a trace's rank was decided, in the words of the trace files table ("rank from").
RANK_SOURCES: Final[dict[RankSource, Callable[[RankFound], str]]] = {
    RankSource.DISTRIBUTED_INFO: lambda _: "distributedInfo",
    RankSource.ENV: lambda r: f"{r.key} env",
    RankSource.ARGUMENT: lambda r: f"{r.key} argument",
    RankSource.PROCESS_ORDER: lambda r: f"process order by GPU (one file, {r.processes} processes; pid {r.pid})",
    RankSource.FILE_NAME: lambda _: "file name",
    RankSource.OVERRIDE: lambda _: "--rank",
    RankSource.ASSUMED_ZERO: lambda _: "assumed 0 (a single file without a rank; set it with --rank)",
    RankSource.NONE: lambda _: "none recorded",
    RankSource.TEXT: lambda r: r.text or "",
}


def rank_found(r: RankFound) -> str:
    """How a trace's rank was decided: 'distributedInfo', 'RANK env', 'file name', ..."""
    return RANK_SOURCES[r.kind](r)


def analyzed_folder(a: Analysis) -> str | None:
    """The folder the trace files are in (the deepest one holding them all; None when the files
    are not named by absolute paths): the report names each file relative to it."""
    paths = [r.source for r in a.run.ranks] + [s.path for s in a.run.skipped]
    if not paths or not all(os.path.isabs(p) for p in paths):
        return None
    try:
        folder = os.path.commonpath([os.path.dirname(p) for p in paths])
    except ValueError:  # on different drives
        return None
    # files with nothing in common but the root (a pipe's /dev/fd/63 beside a folder's traces)
    return None if os.path.dirname(folder) == folder else folder


def shown_path(path: str, folder: str | None) -> str:
    """``path`` as a report shows it: relative to the ``folder`` analyzed, never the local absolute path."""
    if folder is None or not os.path.isabs(path):
        return path
    relative = os.path.relpath(path, folder)
    return path if relative.startswith(os.pardir) else relative


def relative_note(folder: str | None) -> str:
    """What the caption of a table of files says of their names (nothing when shown as recorded)."""
    return "" if folder is None else f" Files are named relative to the folder analyzed ({os.path.basename(folder)})."
