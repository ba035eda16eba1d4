"""Why a waste's gain differs from its share, read off the re-timing (one story per finding).

A waste's share says what the time is, its gain what removing it is worth
(:mod:`tracekit.analyzers.gains`). Where the two differ by more than :func:`tolerance` (the
step's noise, at least :data:`NOISE_FLOOR_PCT`), the finding says why, from the what-ifs
re-timed two at a time: for wastes A and B with gains ``g(A)``, ``g(B)`` and ``g(A+B)`` (both
removed at once),

* **gain above share**: the gain A shares with B is ``g(A) + g(B) - g(A+B)``; the B sharing
  the most, when it covers at least a quarter of the excess, is named: removing A also removes
  part of B's waste (``also_removes``: freed from dispatching, the host fetches the next batch while
  queued work runs). Otherwise A hides time the ledger counts under smaller entries
  (``hides_more``).
* **gain below share**: what removing both gains beyond the two apart, ``g(A+B) - g(A) -
  g(B)``, is A's freed time released only with B; the B releasing the most, when it covers at
  least a quarter of the shortfall, is named (``waits_on``: the collective's time waits for the
  straggler). Otherwise, by the waste: a straggler whose next-latest rank arrives soon after it
  (``next_arriver``, how much earlier per collective it was last at), exposed communication
  that is mostly waiting for ranks to arrive with no one late beyond the others
  (``peer_wait``), or the freed time taken back by other work on the same path
  (``taken_back``).

The same joint re-timings give what the first two fixes are worth together (:class:`Joint`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
import polars as pl

from tracekit.analyzers.collectives import INSTANCE
from tracekit.analyzers.gains_scenarios import COMPUTE
from tracekit.analyzers.shared import COLLECTIVES, LEDGER, STRAGGLERS
from tracekit.analyzers.stats import num
from tracekit.results.vocab import BoundKind
from tracekit.results.worth import GainDiff, GainWhy, Joint

if TYPE_CHECKING:
    from tracekit.analyzers.gains import WhatIfs
    from tracekit.analyzers.mapreduce import Reduced
    from tracekit.results.worth import Gain

#: A gain and a share closer than this (percentage points of the step) are the same story,
#: whatever the steps' noise.
NOISE_FLOOR_PCT: Final = 1.0
#: ... and closer than this share of the larger of the two (a 21% share that gives back 19%
#: is one story).
SAME_STORY: Final = 0.1
#: A named other waste must account for at least this share of the difference (the sentence
#: gives the rest apart).
EXPLAINS: Final = 0.25
#: Exposed communication is mostly waiting when its ranks wait at least this share of their
#: collectives' time for others to arrive.
MOSTLY_WAITING: Final = 0.5

Pair = tuple[BoundKind, BoundKind]


def _pair(a: BoundKind, b: BoundKind) -> Pair:
    return (a, b) if a.value <= b.value else (b, a)


def explain(
    gains: list[Gain],
    model: WhatIfs,
    red: Reduced,
    *,
    noise_pct: float | None,
    first: tuple[BoundKind, ...] = (),
) -> tuple[list[Gain], Joint | None]:
    """``gains`` with why each differs from its share (where it does beyond the noise), and the
    joint gain of ``first`` (the first two fixes) when both are re-timed."""
    retimed = {g.bound: g for g in gains if g.gain_pct is not None and g.bound not in COMPUTE}
    apart = [g for g in retimed.values() if abs(num(g.gain_pct) - g.share_pct) > tolerance(g, noise_pct)]
    wanted = {_pair(g.bound, b) for g in apart for b in retimed if b is not g.bound}
    together = _pair(*first[:2]) if len(first) >= 2 and all(b in retimed for b in first[:2]) else None
    if together is not None:
        wanted.add(together)
    joint = model.gains({p: p for p in sorted(wanted)})
    whys = {g.bound: _why(g, retimed, joint, red) for g in apart}
    out = [msgspec.structs.replace(g, why=whys[g.bound]) if g.bound in whys else g for g in gains]
    floor = red.options.cores_shared and not red.has_gpu
    both = Joint(bounds=list(first[:2]), gain_pct=joint[together], floor=floor) if together in joint else None
    return out, both


def tolerance(g: Gain, noise_pct: float | None) -> float:
    """How far a gain may differ from its share and tell the same story: the step's noise, at
    least :data:`NOISE_FLOOR_PCT`, and at least :data:`SAME_STORY` of the larger of the two."""
    return max(noise_pct or 0.0, NOISE_FLOOR_PCT, SAME_STORY * max(g.share_pct, num(g.gain_pct)))


def _why(g: Gain, retimed: dict[BoundKind, Gain], joint: dict[Pair, float], red: Reduced) -> GainWhy:
    gain = num(g.gain_pct)
    others = [
        (b, num(o.gain_pct), joint[p])
        for b, o in retimed.items()
        if b is not g.bound and (p := _pair(g.bound, b)) in joint
    ]
    if gain > g.share_pct:
        excess = gain - g.share_pct
        shared = [(gain + gb - both, b, both) for b, gb, both in others]
        best = max(shared, key=lambda x: (x[0], x[1].value), default=None)
        if best is not None and best[0] >= EXPLAINS * excess:
            return GainWhy(kind=GainDiff.ALSO_REMOVES, other=best[1], pct=round(best[0], 4), joint_pct=best[2])
        return GainWhy(kind=GainDiff.HIDES_MORE, pct=round(excess, 4))
    short = g.share_pct - gain
    released = [(both - gain - gb, b, both) for b, gb, both in others]
    best = max(released, key=lambda x: (x[0], x[1].value), default=None)
    if best is not None and best[0] >= EXPLAINS * short:
        return GainWhy(kind=GainDiff.WAITS_ON, other=best[1], pct=round(best[0], 4), joint_pct=best[2])
    if g.bound is BoundKind.STRAGGLER and (found := _next_arriver(red)) is not None:
        rank, ns = found
        return GainWhy(kind=GainDiff.NEXT_ARRIVER, rank=rank, ns=round(ns, 1), pct=round(short, 4))
    if g.bound is BoundKind.COMMS and (wait := _mean_wait(red)) is not None:
        named = red.result(STRAGGLERS).stragglers[0].rank if red.result(STRAGGLERS).stragglers else None
        return GainWhy(kind=GainDiff.PEER_WAIT, ns=round(wait, 1), pct=round(short, 4), rank=named)
    return GainWhy(kind=GainDiff.TAKEN_BACK, pct=round(short, 4))


def _next_arriver(red: Reduced) -> tuple[int, float] | None:
    """At the collectives the named straggler arrives last at: the rank that arrives last most
    often after it, and how much earlier than the straggler the next rank arrives, mean ns."""
    if not red.result(STRAGGLERS).stragglers or red.result(COLLECTIVES).per_rank.height == 0:
        return None
    rank = red.result(STRAGGLERS).stragglers[0].rank
    inst = red.result(COLLECTIVES).instances.filter(pl.col("matched") & (pl.col("last_rank") == rank))
    calls = red.result(COLLECTIVES).per_rank.join(inst.select(INSTANCE), on=INSTANCE, how="inner")
    calls = calls.filter(pl.col("arrival_ns").is_not_null())
    if calls.height == 0:
        return None
    own = calls.filter(pl.col("rank") == rank).select(INSTANCE, own="arrival_ns")
    rest = calls.filter(pl.col("rank") != rank).sort("arrival_ns", descending=True).unique(INSTANCE, keep="first")
    gaps = rest.join(own, on=INSTANCE).select("rank", gap=(pl.col("own") - pl.col("arrival_ns")).cast(pl.Float64))
    if gaps.height == 0:
        return None
    nxt = gaps.group_by("rank").len().sort(["len", "rank"], descending=[True, False])["rank"][0]
    return int(nxt), max(0.0, num(gaps["gap"].mean()))


def _mean_wait(red: Reduced) -> float | None:
    """The mean wait for other ranks' arrivals per matched collective on the pace ranks, ns, when
    that waiting is most of their collectives' time (None otherwise, or with none matched). The
    collectives a named straggler arrives last at are left out: that waiting is its finding's."""
    calls = red.result(COLLECTIVES).per_rank
    if calls.height == 0 or "explained_wait_ns" not in calls.columns:
        return None
    named = [s.rank for s in red.result(STRAGGLERS).stragglers]
    last = red.result(COLLECTIVES).instances.select(INSTANCE, "last_rank")
    pace = calls.join(last, on=INSTANCE, how="left").filter(
        pl.col("rank").is_in(red.result(LEDGER).pace_ranks),
        pl.col("explained_wait_ns").is_not_null(),
        ~pl.col("last_rank").is_in(named).fill_null(False),
    )
    total = num(pace["duration_ns"].sum()) if pace.height else 0.0
    if total <= 0 or num(pace["explained_wait_ns"].sum()) < MOSTLY_WAITING * total:
        return None
    return num(pace["explained_wait_ns"].mean())
