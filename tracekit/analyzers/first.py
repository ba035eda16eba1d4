"""What to do first: the findings' fixes ordered by gain per effort.

A configuration knob (``num_workers``, ``pin_memory``, a DDP bucket size) costs a line; a code
change (CUDA graphs, removing a sync, moving CPU work off the step) costs more. Fixes are
ordered by their gain over their effort's weight (:data:`WEIGHT`: a knob 1, a code change 2), so
a knob comes first when its gain is at least half the code change's (of the same order), and a
code change first when it is worth more than twice as much. A fix whose gain no what-if could
estimate is ordered by its share. Fixes worth under :data:`NEGLIGIBLE_PCT` are left out: a
re-timing that gives nothing back is no advice to act on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.analyzers.gains_scenarios import COMPUTE
from tracekit.results.vocab import BoundKind
from tracekit.results.worth import NOTE_BOUND, Effort, Fix, GainLimit

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracekit.results.analysis import Finding
    from tracekit.results.worth import Gain

#: What fixing each waste takes.
EFFORT: Final[dict[BoundKind, Effort]] = {
    BoundKind.DATA: Effort.KNOB,  # num_workers, pin_memory, prefetch_factor, persistent_workers
    BoundKind.TRANSFER: Effort.KNOB,  # pin_memory with non_blocking copies
    BoundKind.COMMS: Effort.KNOB,  # bucket_cap_mb, gradient_as_bucket_view, comm hooks, prefetching flags
    BoundKind.SYNC: Effort.CODE,  # remove .item() / .cpu() from the step
    BoundKind.LAUNCH: Effort.CODE,  # CUDA graphs, torch.compile, fused ops
    BoundKind.HOST: Effort.CODE,  # move CPU work off the step
    BoundKind.STRAGGLER: Effort.CODE,  # the slow rank's host, device or share of the work
    BoundKind.DEPENDENCY: Effort.CODE,
    BoundKind.IDLE: Effort.CODE,
}
#: Each effort's weight: what to do first is ordered by gain / weight.
WEIGHT: Final[dict[Effort, float]] = {Effort.KNOB: 1.0, Effort.CODE: 2.0}
#: Fixes worth less than this (percent of the step, re-timed) are not listed.
NEGLIGIBLE_PCT: Final = 1.0


def first_fixes(
    findings: Iterable[Finding],
    gains: list[Gain],
    *,
    pytorch: bool = True,
    data_knob: bool = True,
    comms_knob: bool = True,
) -> list[Fix]:
    """The fixes of ``findings`` (a bound's, or the waste a note names), each once, first first.
    ``pytorch``: a program that is not PyTorch (a CUDA or MPI application) has none of
    PyTorch's knobs: every fix is a change of its code. ``data_knob``: False where most of the
    fetch is outside the DataLoader's own range (:meth:`Evidence.fetch_around`): its knobs
    shorten only its own wait, and the fix of the rest is in the loop's code. ``comms_knob``:
    False where most of the collectives' time is an all-to-all or point-to-point exchange
    (:meth:`Evidence.exchange`): the wrapper's knobs tune the gradient reduction, and overlapping
    or shrinking the exchange is a change of the model's code; and where no wrapper (DDP, FSDP,
    ZeRO) shows in the run: its collectives are called directly, and so are their fixes."""
    by_bound = {g.bound: g for g in gains}
    seen: dict[BoundKind, Fix] = {}
    for f in findings:
        bound = f.bound if f.bound is not None else NOTE_BOUND.get(f.note) if f.note is not None else None
        if bound is None or bound in COMPUTE or bound in seen or bound not in EFFORT:
            continue
        g = by_bound.get(bound)
        if g is None or (g.gain_pct is not None and g.gain_pct < NEGLIGIBLE_PCT):
            continue
        knob = (data_knob or bound is not BoundKind.DATA) and (comms_knob or bound is not BoundKind.COMMS)
        effort = EFFORT[bound] if pytorch and knob else Effort.CODE
        seen[bound] = Fix(
            bound=bound,
            effort=effort,
            share_pct=g.share_pct,
            gain_pct=g.gain_pct,
            floor=GainLimit.CORES_SHARED in g.limits,
        )

    def score(fix: Fix) -> tuple[float, float]:
        worth = fix.gain_pct if fix.gain_pct is not None else fix.share_pct
        return (-worth / WEIGHT[fix.effort], -fix.share_pct)

    return sorted(seen.values(), key=score)
