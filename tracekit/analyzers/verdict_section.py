"""The verdict section: from the reduce to the typed :class:`~tracekit.results.analysis.Verdict`.

Why the trace can or cannot support a verdict (GPU events missing, a sampled trace, a snippet,
warm-up with no steady part), the notes beside it, the evidence, every waste's share and
re-timed gain, the decision (:mod:`tracekit.analyzers.verdict`), why gains differ from shares
(:mod:`tracekit.analyzers.gain_why`) and what to do first (:mod:`tracekit.analyzers.first`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
import polars as pl

from tracekit.analyzers import evidence as ev
from tracekit.analyzers.caveats import Caveat, communication_caveat, lowered
from tracekit.analyzers.convert import rows
from tracekit.analyzers.first import first_fixes
from tracekit.analyzers.gain_why import explain
from tracekit.analyzers.gains import gains, what_ifs, with_gain
from tracekit.analyzers.parts import FactParts, SyncParts
from tracekit.analyzers.run_facts import parallelism_of
from tracekit.analyzers.run_traits import with_traits
from tracekit.analyzers.shared import COLLECTIVES, DATALOADER, IDLE, KERNELS, LEDGER, OVERLAP, STEPS, STRAGGLERS, SYNCS
from tracekit.analyzers.stats import num
from tracekit.analyzers.verdict import MATERIAL_SHARE, SECONDARY_SHARE, cost_table, decide, step_noise
from tracekit.results import rows as r
from tracekit.results.analysis import Finding, SyncSource, Verdict, WarmupWork
from tracekit.results.vocab import (
    BoundKind,
    Confidence,
    LedgerEntry,
    MeasuredOn,
    NoteKind,
    RunWarningKind,
    SyncKind,
)
from tracekit.results.worth import NOTE_BOUND, Gain, GainLimit

if TYPE_CHECKING:
    from tracekit.analyzers.mapreduce import Reduced


def _decisive(g: Gain) -> float | None:
    """The gain the verdict weighs: the re-timed one, except a floor under the material share
    (ranks outnumbering their cores: the time a fix frees goes to the others, which the re-timing
    does not give them; calibrated on CPU, every measured gain was at or above its re-timing),
    which cannot reject a bound: its share decides, as for a waste no what-if models."""
    floor = GainLimit.CORES_SHARED in g.limits
    if g.gain_pct is not None and floor and g.gain_pct < 100 * MATERIAL_SHARE:
        return None
    return g.gain_pct


def verdict_reduce(red: Reduced) -> Verdict:
    """The verdict from every cost and every re-timed gain, with the evidence behind it."""
    measured_on = MeasuredOn.GPU if red.has_gpu else MeasuredOn.HOST
    undetermined = _undetermined(red)
    costs = cost_table(red.result(LEDGER), measured_on)
    notes = [f for f in (ev.sync_finding(red.result(SYNCS), has_gpu=red.has_gpu), _partial_ranks(red)) if f]
    if not undetermined and _measured_steps(red) < 2:
        notes.append(Finding(note=NoteKind.ONE_STEP, confidence=Confidence.HIGH, value=float(_measured_steps(red))))
    found = (
        communication_caveat(red),
        _dropped_caveat(red, undetermined),
        _clock_caveat(red, undetermined),
        _behind_caveat(red),
    )
    caveats = [c for c in found if c is not None]
    notes += [c.finding for c in caveats]
    comms = costs.filter(pl.col("bound") == BoundKind.COMMS)["share_pct"].sum()
    if (low := ev.overlap_finding(red.result(OVERLAP), float(comms))) is not None:
        notes.append(low)
    evidence = ev.evidence(
        steps=red.result(STEPS),
        dataloader=red.result(DATALOADER),
        collectives=red.result(COLLECTIVES),
        stragglers=red.result(STRAGGLERS),
        overlap=red.result(OVERLAP) if red.has_gpu else None,
        syncs=red.result(SYNCS),
        kernels=red.result(KERNELS),
    )
    pytorch = num(red.gather(FactParts).span["torch_ops"].sum()) > 0
    evidence = msgspec.structs.replace(
        evidence, pytorch=pytorch, sync_sources=_sync_sources(red), warmup=_warmup_work(red)
    )
    evidence = with_traits(evidence, red)  # what the advice depends on (run_traits)
    if not undetermined and (warm := _warmup(red)) is not None:
        notes.append(warm)
    named = frozenset(b for f in notes if f.note is not None and (b := NOTE_BOUND.get(f.note)) is not None)
    model = None if undetermined else what_ifs(red)
    worth = gains(red, costs, retime_from=100 * SECONDARY_SHARE, also=named, model=model) if model else []
    retimed = {g.bound.value: _decisive(g) for g in worth if GainLimit.BELOW_FINDING not in g.limits}
    decision = decide(
        red.result(LEDGER),
        measured_on=measured_on,
        stragglers=red.result(STRAGGLERS),
        undetermined=undetermined,
        worth=retimed,
    )
    primary = decision.primary
    for caveat in caveats:
        primary = lowered(primary, caveat)
    findings = [primary, *decision.secondary, *notes]
    first = first_fixes(
        findings,
        worth,
        pytorch=pytorch,
        data_knob=evidence.fetch_around() is None,
        # a wrapper's knob: neither an exchange nor collectives called directly (no wrapper shows)
        comms_knob=evidence.exchange() is None
        and (parallelism_of(red) or red.options.captured_parallelism) is not None,
    )
    noise = step_noise(red.result(LEDGER))
    joint = None
    if model is not None:
        worth, joint = explain(worth, model, red, noise_pct=noise, first=tuple(f.bound for f in first[:2]))
    # a note naming a waste that has a finding of its own says its facts; the finding says its worth
    named_bounds = {f.bound for f in findings if f.bound is not None}

    def worth_of(f: Finding) -> Finding:
        said = f.note is not None and NOTE_BOUND.get(f.note) in named_bounds
        return f if said else with_gain(f, worth)

    return Verdict(
        measured_on=measured_on,
        primary=with_gain(findings[0], worth),
        secondary=[worth_of(f) for f in findings[1:]],
        costs=rows(decision.costs, r.CostRow),
        evidence=evidence,
        gains=worth,
        first=first,
        joint=joint,
        noise_pct=noise,
    )


#: When most consecutive CUDA calls jumped by :data:`~tracekit.analyzers.run_facts.SAMPLED_JUMP`
#: correlation ids or more, the trace is a sample whose device timeline misses most of its work.
SAMPLED_MIN_SHARE: Final = 0.5

#: With fewer than two measured steps nothing repeats, and a trace is a snippet, not a run, when
#: every rank's device did a handful of operations (under MIN_OPS: kernels, copies, sets) that
#: kept it busy under MIN_BUSY_NS in all: the shared snippets hold 1 to 16 operations and
#: 2 us to 0.37 ms of device work (a Triton kernel, a first ROCm step, CUDA event examples, a
#: mock capture); a one-window MPI run with 20 operations keeps its GPU busy 373 ms, and the
#: one-step real runs hold hundreds of operations. With two steps or more the steps themselves
#: say whether the pattern recurs, whatever the amount of work (a small model's 0.5 ms of
#: kernels in 12 ms steps is a verdict).
MIN_OPS: Final = 50
MIN_BUSY_NS: Final = 1_000_000


def _measured_steps(red: Reduced) -> int:
    """The most measured steps of any rank (0 without steps)."""
    if not red.result(STEPS).has_steps or red.result(STEPS).steps.height == 0:
        return 0
    return int(num(red.result(STEPS).steps.group_by("rank").len()["len"].max()))


def _undetermined(red: Reduced) -> tuple[Finding, ...]:
    """Why the trace cannot support a verdict, if it cannot."""
    facts = red.gather(FactParts).span
    ranks_listing_gpus = sum(1 for r in red.run_meta.ranks if r.devices)
    if not red.has_gpu and any(w.kind == RunWarningKind.DEVICE_EVENTS_UNREAD.value for w in red.run_meta.warnings):
        # the device's events are there, of a kind not read (the warning names it): not missing
        return (Finding(note=NoteKind.DEVICE_EVENTS_UNREAD, confidence=Confidence.HIGH),)
    if not red.has_gpu and (num(facts["gpu_signs"].sum()) > 0 or ranks_listing_gpus):
        return (Finding(note=NoteKind.GPU_EVENTS_MISSING, confidence=Confidence.HIGH),)
    calls = num(facts["calls"].sum())
    if calls and num(facts["jumps"].sum()) > SAMPLED_MIN_SHARE * calls:
        share = round(100 * num(facts["jumps"].sum()) / calls, 1)
        return (Finding(note=NoteKind.EVENTS_SAMPLED, confidence=Confidence.HIGH, value=share),)
    ops, busy = num(facts["gpu_events"].max()), num(facts["busy_ns"].max())
    if red.has_gpu and _measured_steps(red) < 2 and ops < MIN_OPS and busy < MIN_BUSY_NS:
        return (Finding(note=NoteKind.TOO_LITTLE_WORK, confidence=Confidence.HIGH, value=ops),)
    # warm-up, not a training step: no steady part to judge; the GPU waiting on what the trace does not show
    for note, entry in ((NoteKind.WARMUP, LedgerEntry.ONE_TIME), (NoteKind.UNOBSERVABLE, LedgerEntry.UNOBSERVABLE)):
        if (share := red.result(LEDGER).share(entry)) >= 100 * NO_STEADY_SHARE:
            return (Finding(note=note, confidence=Confidence.HIGH, value=round(share, 4)),)
    return ()


#: A file whose reader dropped at least this share of its device activities (kernels, copies,
#: sets) for times that cannot be right (a negative duration, a time far from the rest:
#: :mod:`tracekit.readers.plausible`, which does not read a file that lost half of them or more)
#: lost as much as a waste that bounds the run takes (:data:`MATERIAL_SHARE`): what was dropped
#: could hold one, and the verdict's confidence is one level lower.
DROPPED_LOWERS: Final = MATERIAL_SHARE


def _dropped_device(red: Reduced) -> tuple[float, int] | None:
    """The largest share of one file's device activities that its reader dropped for times that
    cannot be right (of those dropped and those its ranks kept), and its first rank; None where
    none was dropped."""
    dropped: dict[str, int] = {}
    for w in red.run_meta.warnings:
        if w.kind == RunWarningKind.DROPPED_EVENTS.value and w.device and w.path is not None:
            dropped[w.path] = dropped.get(w.path, 0) + w.device
    if not dropped:
        return None
    span = red.gather(FactParts).span
    kept = dict(zip(span.get_column("rank").to_list(), span.get_column("gpu_events").to_list(), strict=True))
    ranks: dict[str, list[int]] = {}
    for info in red.run_meta.ranks:
        ranks.setdefault(info.source, []).append(info.rank)
    shares = [
        (n / (n + sum(int(kept.get(r) or 0) for r in ranks[path])), min(ranks[path]))
        for path, n in dropped.items()
        if path in ranks
    ]
    return max(shares, key=lambda s: (s[0], -s[1]), default=None)


def _dropped_caveat(red: Reduced, undetermined: tuple[Finding, ...]) -> Caveat | None:
    """A note lowering the verdict's confidence where a file's reader dropped a material share of
    its device activities (:data:`DROPPED_LOWERS`)."""
    if undetermined or (dropped := _dropped_device(red)) is None or dropped[0] < DROPPED_LOWERS:
        return None
    share, rank = dropped
    note = Finding(
        note=NoteKind.SOME_DEVICE_EVENTS_DROPPED,
        confidence=Confidence.HIGH,
        value=round(100 * share, 1),
        values=[float(rank)],
    )
    return Caveat(note)


#: A rank at least this share of whose launched device activities start before their launch call
#: (:data:`~tracekit.analyzers.run_facts.EARLY_NS`; complete traces: none) has a device clock
#: ahead of its host's: every time measured from host to device is off (:data:`SECONDARY_SHARE`,
#: the share that makes a finding); from :data:`EARLY_MOST` of them, its whole device timeline.
EARLY_SHARE: Final = SECONDARY_SHARE
EARLY_MOST: Final = 0.5


def _clock_caveat(red: Reduced, undetermined: tuple[Finding, ...]) -> Caveat | None:
    """A note lowering the verdict's confidence where a rank's device clock is ahead of its host's:
    its device activities start before the host launched them (one level; two from
    :data:`EARLY_MOST` of them)."""
    if undetermined:
        return None
    return _clock_off(red, NoteKind.DEVICE_CLOCK_AHEAD, off="early", checked="launched", by="lead_ns")


def _behind_caveat(red: Reduced) -> Caveat | None:
    """A note lowering the verdict's confidence where a rank's device clock is behind its host's:
    device activities launched before a device synchronize end after the call returned
    (:data:`~tracekit.analyzers.run_facts.DEVICE_SYNC`), in :data:`EARLY_SHARE` of its syncs or
    more (two levels from :data:`EARLY_MOST`). Said also where there is no verdict: a clock far
    behind leaves most of the window to work the trace cannot place (``unobservable``), and the
    note says why."""
    return _clock_off(red, NoteKind.DEVICE_CLOCK_BEHIND, off="behind", checked="syncs", by="lag_ns")


def _clock_off(red: Reduced, note: NoteKind, *, off: str, checked: str, by: str) -> Caveat | None:
    """``note`` about the rank with the largest share of its ``checked`` facts that contradict its
    clocks (``off`` of them, the worst by ``by`` ns), from :data:`EARLY_SHARE` of them; None below."""
    span = red.gather(FactParts).span
    if not span.height:
        return None
    shares = span.filter(pl.col(checked) > 0).select("rank", by, share=pl.col(off) / pl.col(checked))
    worst = shares.sort(["share", "rank"], descending=[True, False]).head(1)
    if not worst.height or (share := float(worst["share"][0])) < EARLY_SHARE:
        return None
    finding = Finding(
        note=note,
        confidence=Confidence.HIGH,
        value=round(100 * share, 1),
        values=[float(worst["rank"][0]), float(worst[by][0])],
    )
    return Caveat(finding, lowers=2 if share >= EARLY_MOST else 1)


#: One-time work (warm-up) holding at least this share of the measured window leaves no steady
#: part to judge: no bound, only the warm-up said. So does GPU idle the trace cannot judge
#: (``unobservable``: the GPU waits on work whose launch it does not hold or holds long before):
#: no shared trace holds more than 5.3% of it; a device clock 50 ms behind its host's makes
#: most of the window so, and the rest then named "compute-bound" at 0.8% of the time.
NO_STEADY_SHARE: Final = 0.5
#: The host ranges of one-time work the evidence names.
WARMUP_NAMED: Final = 3


def _one_time_share(red: Reduced) -> float:
    return red.result(LEDGER).share(LedgerEntry.ONE_TIME)


def _warmup(red: Reduced) -> Finding | None:
    """A note when one-time work holds a share of the measured window that makes a finding."""
    share = _one_time_share(red)
    if share < 100 * SECONDARY_SHARE:
        return None
    return Finding(note=NoteKind.WARMUP, confidence=Confidence.HIGH, value=round(share, 4))


def _warmup_work(red: Reduced) -> list[WarmupWork]:
    """The host ranges of the longest one-time idle, summed over the pace ranks' gaps."""
    idle = red.result(IDLE)
    if idle is None or idle.one_time.height == 0:
        return []
    gaps = idle.one_time.filter(pl.col("rank").is_in(red.result(LEDGER).pace_ranks))
    if gaps.height == 0:
        return []
    named = gaps.group_by("name").agg(ns=pl.col("ns").sum())
    top = named.sort(["ns", "name"], descending=[True, False]).head(WARMUP_NAMED)
    return [WarmupWork(name=r["name"], ns=int(r["ns"])) for r in top.iter_rows(named=True)]


def _partial_ranks(red: Reduced) -> Finding | None:
    """Not every rank of the world is here: latency floors and stragglers cannot be measured."""
    c = red.result(COLLECTIVES)
    if c.world_size is None or c.world_size <= 1 or c.ranks_present >= c.world_size:
        return None
    return Finding(
        note=NoteKind.PARTIAL_RANKS,
        confidence=Confidence.HIGH,
        value=float(c.ranks_present),
        values=[float(c.world_size)],
    )


def _sync_sources(red: Reduced) -> list[SyncSource]:
    """The operators that issued the most blocking syncs and copies, over the run."""
    by_op = red.gather(SyncParts).by_op
    if by_op.height == 0:
        return []
    steps = max(
        1, int(num(red.result(STEPS).steps.group_by("rank").len()["len"].max())) if red.result(STEPS).has_steps else 1
    )
    ranks = max(1, red.options.ranks_present)
    phases = (  # each operator's phase: the one it issued most of its points in
        by_op.filter(pl.col("phase").is_not_null())
        .group_by("op", "kind", "phase")
        .agg(pl.col("points").sum())
        .sort(["points", "phase"], descending=[True, False])
        .unique(["op", "kind"], keep="first", maintain_order=True)
        .select("op", "kind", "phase")
    )
    top = (
        by_op.group_by("op", "kind")
        .agg(pl.col("points").sum())
        .join(phases, on=["op", "kind"], how="left")
        .sort(["points", "op", pl.col("kind").cast(pl.String)], descending=[True, False, False])  # ties: by name
        .head(3)
    )
    return [
        SyncSource(
            op=r["op"], kind=SyncKind(r["kind"]), per_step=round(r["points"] / steps / ranks, 4), phase=r["phase"]
        )
        for r in top.iter_rows(named=True)
    ]
