"""What the input of a run warns about, as kinds and figures: a file's fields that cannot be
right, events dropped, ranks missing from the world, no communication recognized.

The readers find these; the analysis reports them as
:class:`tracekit.results.analysis.RunWarning` and the reports write their sentences. The kinds
are the values of :class:`tracekit.results.vocab.RunWarningKind` and
:class:`tracekit.results.vocab.DropReason` (a test keeps them equal: the model cannot import the
results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: What a warning is about (the values of :class:`tracekit.results.vocab.RunWarningKind` but
#: ``text``, which only an older analysis holds; the figures each kind holds are noted there).
InputWarningKind = Literal[
    "bad_distributed_info",
    "not_events",
    "bad_args",
    "dropped_events",
    "bad_session_start",
    "bad_rank_env",
    "rank_outside_world",
    "missing_ranks",
    "no_comm_kernels",
    "memory_only",
    "cpu_only",
    "device_events_unread",
    "bad_steps",
    "uneven_ranks",
    "bad_memory",
]
#: Why an event was dropped (the values of :class:`tracekit.results.vocab.DropReason`).
DropReasonName = Literal["no_time", "no_extent", "negative", "far"]

#: The ranges of missing ranks a warning keeps (the first ones): the rest are counted.
MISSING_RANGES: Final = 12


@dataclass(frozen=True)
class DroppedEvent:
    """One dropped event, as an example: its name (shown: cut, unprintable characters as ``?``;
    None when it has none), why it was dropped, and its times in the file's ``unit``."""

    name: str | None
    reason: DropReasonName
    unit: str
    start: float | None = None
    duration: float | None = None


@dataclass(frozen=True)
class InputWarning:
    """One warning about the input: its kind and the figures it holds.

    ``value`` is a value a file holds that cannot be right, shown (Python's ``repr``, cut);
    ``key`` the field or variable that holds it (for ``bad_steps``: what was wrong with the
    ``count`` step markers, ``number``, ``zero_length``, ``nested`` or ``overlapping``; for
    ``uneven_ranks``: what ``rank`` has ``count`` of, ``steps`` or ``collectives``, the ranks'
    median in ``value``); ``reasons`` counts of dropped events by
    :data:`DropReasonName`, ``device`` how many of them were device activities (kernels, copies,
    sets: the verdict weighs what the device's timeline misses); ``ranges`` the first
    :data:`MISSING_RANGES` ranges of missing ranks and ``more`` how many ranges follow.
    """

    kind: InputWarningKind
    path: str | None = None
    rank: int | None = None
    world_size: int | None = None
    count: int | None = None
    key: str | None = None
    value: str | None = None
    reasons: tuple[tuple[DropReasonName, int], ...] = ()
    example: DroppedEvent | None = None
    ranges: tuple[tuple[int, int], ...] = ()
    more: int = 0
    device: int = 0
