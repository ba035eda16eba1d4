"""The words for recorded time left out of the measured window: how long, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.results.thresholds import LEFT_OUT_MIN_NS, LEFT_OUT_MIN_SHARE
from tracekit.results.vocab import LeftOutReason

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis
    from tracekit.results.rows import LeftOut

#: Why each stretch is outside the window ({d}: its length, {device}: the device's first or last
#: operation, {steps}: the steps it holds, {sel}: the step selection).
WHY: Final[dict[LeftOutReason, str]] = {
    LeftOutReason.BEFORE_FIRST_STEP: "the host ran {d} before the first step",
    LeftOutReason.BEFORE_FIRST_DEVICE_OP: "the host ran {d} before the first {device}",
    LeftOutReason.WARMUP: "{d} in {steps}, listed under Warm-up steps",
    LeftOutReason.UNSELECTED: "{d} in {steps} outside --steps {sel}",
    LeftOutReason.AFTER_LAST_STEP: "{d} after the last step (the profiler's stop and flush, or work after the loop)",
    LeftOutReason.AFTER_LAST_DEVICE_OP: "{d} after the last {device} (the profiler's stop and flush, or host work)",
}

#: What the window is and what is shown, for a caption.
WINDOW_NOTE: Final = (
    "A rank's measured window is the windows of its steady steps, or without steps its first to last GPU "
    "operation (on a CPU-only run, operator); its recorded span runs from its first to its last host or device "
    "activity (the profiler's own start and end markers aside). Shown from "
    f"{LEFT_OUT_MIN_SHARE:.0%} of a rank's recorded span and {LEFT_OUT_MIN_NS / 1e6:g} ms."
)


def length(ns: float) -> str:
    """A length at a glance: '2.01 s' from a second up, else '12.34 ms'."""
    return f"{ns / 1e9:,.2f} s" if ns >= 1e9 else f"{ns / 1e6:,.2f} ms"


def why(row: LeftOut, a: Analysis, *, of_run: bool = False) -> str:
    """Why ``row``'s time is outside the window, with its length; ``of_run``: a run's row, with its
    share of the recorded span and, over several ranks, the ranks it is the mean of."""
    d, ranks = length(row.ns), len(a.run.ranks)
    several = of_run and ranks > 1
    if of_run:
        over = f", on {row.ranks} of {ranks} ranks" if several else ""
        d += f"{' on average' if several else ''} ({row.share_pct:.1f}% of the recorded span{over})"
    noun = "warm-up step" if row.reason is LeftOutReason.WARMUP else "step"
    steps = f"{row.steps} {noun}{'' if row.steps == 1 else 's'}{' over the ranks' if several else ''}"
    device = "GPU operation" if a.run.has_gpu else "operator"
    return WHY[row.reason].format(d=d, device=device, steps=steps, sel=a.steps.selection)


def left_out_summary(a: Analysis) -> str | None:
    """The run's time left out of the window, one phrase per reason; None when none is material."""
    return "; ".join(why(row, a, of_run=True) for row in a.steps.left_out_run) or None
