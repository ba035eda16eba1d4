"""What a fix is worth, in words: a finding's share and gain, why they differ, what an estimate
assumes, and what to do first.

Two numbers, two questions (:mod:`tracekit.results.worth`): the **share** is what the time is
(the waste's part of the ledger), the **gain** what removing it is worth (re-timed). Neither is
called a ceiling: a gain can be above its share (the fix removes other waste too) or below it
(other work takes the freed time back), and when they differ the sentence says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.results.vocab import BoundKind
from tracekit.results.worth import Effort, GainDiff, GainLimit

if TYPE_CHECKING:
    from tracekit.results.worth import Fix, Gain, GainWhy, Joint

#: What an estimate cannot see, as a clause.
GAIN_LIMITS: Final[dict[GainLimit, str]] = {
    GainLimit.BELOW_FINDING: "under the 5% that makes a finding: not re-timed",
    GainLimit.NOT_MODELED: "no what-if models removing it (or none this trace can build)",
    GainLimit.PARTIAL_RANKS: (
        "not every rank of the world is in these traces: waiting for the absent ones cannot be re-timed"
    ),
    GainLimit.EVENT_WAITS_KEPT: "waits on other streams' events kept as measured",
    GainLimit.ONE_CLOCK: "ranks' arrivals compared on one clock",
    GainLimit.UNMATCHED_COLLECTIVES: "collectives not matched across ranks keep their waits",
    GainLimit.CPU_SHARED: "CPU-only: freed host time is not given to the other ranks",
    GainLimit.CORES_SHARED: (
        "a floor: the ranks outnumbered their machine's cores, and the time a fix frees goes to the other ranks, "
        "which the re-timing does not give them"
    ),
    GainLimit.VALUE_NOT_NEEDED: "the synced value not needed on the host that step",
    GainLimit.FULLY_OVERLAPPED: "all of the communication hidden (a partial overlap gains less)",
    GainLimit.EXCESS_SPREAD: "the straggler's excess taken evenly from its slow phase",
    GainLimit.HOST_THREADS_AS_ONE: "a rank's host threads re-timed as one",
}
COMPUTE: Final = (BoundKind.COMPUTE, BoundKind.GPU_COMPUTE)
#: Each waste as the thing a fix removes, for the sentences that name another finding's waste.
WASTE: Final[dict[BoundKind, str]] = {
    BoundKind.DATA: "the wait for data",
    BoundKind.COMMS: "the exposed communication",
    BoundKind.STRAGGLER: "the straggler's lateness",
    BoundKind.SYNC: "the syncs' waits",
    BoundKind.LAUNCH: "the launch gaps",
    BoundKind.HOST: "the host's CPU work",
    BoundKind.TRANSFER: "the host-device copies",
    BoundKind.DEPENDENCY: "the waits on events and other streams",
    BoundKind.IDLE: "the unexplained idle",
}
#: Why removing one waste also removes another, where the pair has a known mechanism.
_MECHANISM: Final[dict[tuple[BoundKind, BoundKind], str]] = {
    (BoundKind.LAUNCH, BoundKind.DATA): "freed from dispatching, the host fetches the next batch meanwhile",
    (BoundKind.HOST, BoundKind.DATA): "freed from its CPU work, the host fetches the next batch meanwhile",
    (BoundKind.DATA, BoundKind.LAUNCH): "without the fetch, the host dispatches ahead of the GPU",
    (BoundKind.DATA, BoundKind.HOST): "without the fetch, the host's CPU work runs while the GPU computes",
    (BoundKind.SYNC, BoundKind.HOST): "no longer waiting at the sync, the host does its CPU work while the GPU runs",
    (BoundKind.SYNC, BoundKind.LAUNCH): "no longer waiting at the sync, the host dispatches ahead of the GPU",
    (BoundKind.LAUNCH, BoundKind.HOST): "the host's time is one chain: with less of one, the other runs ahead",
    (BoundKind.HOST, BoundKind.LAUNCH): "the host's time is one chain: with less of one, the other runs ahead",
}
#: How each effort reads in what to do first.
EFFORTS: Final = {Effort.KNOB: "a configuration knob", Effort.CODE: "a code change"}


def floor(g: Gain) -> bool:
    """Whether ``g``'s gain is a floor (:attr:`GainLimit.CORES_SHARED`): the fix is worth at least it."""
    return GainLimit.CORES_SHARED in g.limits and g.gain_pct is not None


def step_after(g: Gain, pct_gone: float) -> float:
    return g.step_ns * (1 - pct_gone / 100)


def faster(pct_gone: float) -> str:
    return "-" if pct_gone >= 100 else f"{1 / (1 - pct_gone / 100):.2f}x"


def badge(g: Gain | None) -> str:
    """A finding's two numbers, short: 'share 20.0%, gain 19.9% (1.25x)'."""
    if g is None:
        return ""
    if g.gain_pct is None:
        return f"share {g.share_pct:.1f}%, gain not re-timed"
    least = "at least " if floor(g) else ""
    return f"share {g.share_pct:.1f}%, gain {least}{g.gain_pct:.1f}% ({faster(g.gain_pct)})"


def worth(g: Gain, *, share: bool = True) -> str:
    """The gain line of a finding: what removing it is worth (with its share first, where no
    other line of the finding gives it)."""
    now = g.step_ns / 1e6
    what = "every waste removed at once" if g.bound in COMPUTE else "without it"
    head = (
        f"share: {g.share_pct:.1f}% of the step ({g.share_pct / 100 * now:.2f} ms of {now:.2f} ms); " if share else ""
    )
    if g.gain_pct is None:
        why = GAIN_LIMITS[g.limits[0] if g.limits else GainLimit.NOT_MODELED]
        return f"{head}gain not re-timed: {why}"
    after = step_after(g, g.gain_pct) / 1e6
    if floor(g):
        return (
            f"{head}gain: {what}, a step of {now:.2f} ms would take {after:.2f} ms or less (at least "
            f"{g.gain_pct:.1f}% less, {faster(g.gain_pct)} as fast, re-timed along the trace's dependencies; "
            f"{GAIN_LIMITS[GainLimit.CORES_SHARED]})"
        )
    return (
        f"{head}gain: {what}, a step of {now:.2f} ms would take about {after:.2f} ms ({g.gain_pct:.1f}% less, "
        f"{faster(g.gain_pct)} as fast, re-timed along the trace's dependencies)"
    )


def _waste(bound: BoundKind | None) -> str:
    return WASTE.get(bound, "another waste") if bound is not None else "another waste"


def why(g: Gain) -> str | None:
    """Why the gain differs from the share, in one sentence (None where they tell one story)."""
    w = g.why
    if w is None or g.gain_pct is None:
        return None
    return _why(g, w)


def _why(g: Gain, w: GainWhy) -> str:
    pct = w.pct or 0.0
    gain = g.gain_pct or 0.0
    if w.kind is GainDiff.ALSO_REMOVES:
        how = _MECHANISM.get((g.bound, w.other)) if w.other is not None else None
        both = f"; both removed: {w.joint_pct:.1f}% ({faster(w.joint_pct)}), not the sum" if w.joint_pct else ""
        rest = gain - g.share_pct - pct
        more = f", and {rest:.1f} more that the ledger counts under other entries" if rest >= 1.0 else ""
        return (
            f"why the gain is above the share: {pct:.1f} points of it are {_waste(w.other)}, which removing it "
            f"also removes{f' ({how})' if how else ''}{more}{both}"
        )
    if w.kind is GainDiff.HIDES_MORE:
        return (
            f"why the gain is above the share: removing it also hides {pct:.1f}% of the step that the ledger counts "
            "under smaller entries (the host gets ahead of the device)"
        )
    if w.kind is GainDiff.WAITS_ON:
        both = f" is worth {w.joint_pct:.1f}% ({faster(w.joint_pct)})" if w.joint_pct is not None else " is worth more"
        rest = g.share_pct - gain - pct
        more = f"; other work takes {rest:.1f}% of the step back" if rest >= 1.0 else ""
        return (
            f"why the gain is below the share: its freed time waits on {_waste(w.other)}; removing both{both}, "
            f"{pct:.1f} points more than the two apart{more}"
        )
    if w.kind is GainDiff.NEXT_ARRIVER:
        who = f" (most often rank {w.rank})" if w.rank is not None else ""
        return (
            "why the gain is below the share: without its lateness the others wait for the next-latest rank"
            f"{who}, which arrives {(w.ns or 0) / 1e6:.2f} ms before it at the collectives it is last at"
        )
    if w.kind is GainDiff.PEER_WAIT:
        beyond = (
            "no rank late systematically"
            if w.rank is None
            else f"no rank but the straggler (rank {w.rank}, whose collectives are its finding's) late systematically"
        )
        return (
            "why the gain is below the share: most of the collectives' time is waiting for other ranks to arrive "
            f"({(w.ns or 0) / 1e6:.2f} ms per collective on average), {beyond}; hiding the collectives' own time "
            "does not remove that waiting"
        )
    return f"why the gain is below the share: other work on the same path takes {pct:.1f}% of the step back"


def why_short(g: Gain) -> str | None:
    """:func:`why` for a table cell."""
    w = g.why
    if w is None or g.gain_pct is None:
        return None
    pct = w.pct or 0.0
    both = f"; both: {w.joint_pct:.1f}%" if w.joint_pct is not None else ""
    short = {
        GainDiff.ALSO_REMOVES: f"{pct:.1f} pts are {_waste(w.other)}, removed too{both}",
        GainDiff.HIDES_MORE: f"also hides {pct:.1f}% under smaller entries",
        GainDiff.WAITS_ON: f"its freed time waits on {_waste(w.other)}{both}",
        GainDiff.NEXT_ARRIVER: f"the next rank arrives {(w.ns or 0) / 1e6:.2f} ms before it",
        GainDiff.PEER_WAIT: "mostly waiting for ranks to arrive",
        GainDiff.TAKEN_BACK: f"{pct:.1f}% taken back by other work",
    }
    return short[w.kind]


def first_line(fix: Fix, advice: str | None) -> str:
    """One item of what to do first: the fix, its effort, what it is worth."""
    least = "at least " if fix.floor else ""
    gain = "gain not re-timed" if fix.gain_pct is None else f"gain {least}{fix.gain_pct:.1f}% ({faster(fix.gain_pct)})"
    what = advice or fix.bound.value
    return f"{what} [{fix.bound.value}: {EFFORTS[fix.effort]}; {gain}, share {fix.share_pct:.1f}%]"


def joint_line(joint: Joint, fixes: list[Fix]) -> str:
    """What the first two fixes are worth together (never their gains added)."""
    gains = [f.gain_pct for f in fixes[:2] if f.gain_pct is not None]
    total = sum(gains)
    if len(gains) < 2 or abs(total - joint.gain_pct) <= 1.0:
        how = ""
    elif total > joint.gain_pct:
        how = f": less than their gains' sum ({total:.1f}%), since they remove some of the same time"
    else:
        how = f": more than their gains' sum ({total:.1f}%), since each frees time the other waits on"
    return (
        f"the first two together: {'at least ' if joint.floor else ''}{joint.gain_pct:.1f}% of the step "
        f"({faster(joint.gain_pct)}), re-timed at once{how}"
    )
