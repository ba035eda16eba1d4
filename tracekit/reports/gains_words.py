"""What a fix is worth, in words: a finding's gain line, and what an estimate assumes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.results.vocab import BoundKind, GainLimit

if TYPE_CHECKING:
    from tracekit.results.analysis import Gain

#: What an estimate cannot see, as a clause.
GAIN_LIMITS: Final[dict[GainLimit, str]] = {
    GainLimit.BELOW_FINDING: "under the 5% that makes a finding: not re-timed, only the ledger's bound",
    GainLimit.NOT_MODELED: (
        "not re-timed (no what-if for this cause, or none this trace can build): only the ledger's bound"
    ),
    GainLimit.EVENT_WAITS_KEPT: "waits on other streams' events kept as measured",
    GainLimit.ONE_CLOCK: "ranks' arrivals compared on one clock",
    GainLimit.UNMATCHED_COLLECTIVES: "collectives not matched across ranks keep their waits",
    GainLimit.CPU_SHARED: "CPU-only: freed host time is not given to the other ranks",
    GainLimit.VALUE_NOT_NEEDED: "the synced value not needed on the host that step",
    GainLimit.FULLY_OVERLAPPED: "all of the communication hidden (a partial overlap gains less)",
    GainLimit.EXCESS_SPREAD: "the straggler's excess taken evenly from its slow phase",
    GainLimit.HOST_THREADS_AS_ONE: "a rank's host threads re-timed as one",
}
COMPUTE: Final = (BoundKind.COMPUTE, BoundKind.GPU_COMPUTE)


def step_after(g: Gain, pct_gone: float) -> float:
    return g.step_ns * (1 - pct_gone / 100)


def faster(pct_gone: float) -> str:
    return "-" if pct_gone >= 100 else f"{1 / (1 - pct_gone / 100):.2f}x"


def worth(g: Gain) -> str:
    """The gain line of a finding."""
    now = g.step_ns / 1e6
    what = "every waste removed at once" if g.bound in COMPUTE else "without it"
    bound = f"at most {step_after(g, g.up_to_pct) / 1e6:.2f} ms ({g.up_to_pct:.1f}% of the ledger)"
    if g.expected_pct is None:
        why = GAIN_LIMITS[g.limits[0] if g.limits else GainLimit.NOT_MODELED]
        return f"worth: {what}, a step of {now:.2f} ms would take {bound}; {why}"
    expected = step_after(g, g.expected_pct) / 1e6
    return (
        f"worth: {what}, a step of {now:.2f} ms would take about {expected:.2f} ms "
        f"({faster(g.expected_pct)} as fast, re-timed along the trace's dependencies), {bound}"
    )
