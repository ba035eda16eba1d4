"""The words of a report: titles, evidence and advice, written from structured findings.

Analyzers return numbers and enums; every sentence a reader sees is made here, once, and
shared by the terminal, Markdown and HTML renderers.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import TYPE_CHECKING, Final

from tracekit.reports import advice
from tracekit.reports.advice import RunTraits
from tracekit.reports.gains_words import badge, faster, first_line, floor, joint_line, why, worth
from tracekit.reports.memory_words import write_memory
from tracekit.reports.terms import DATA_MEASURES, phase_name
from tracekit.reports.wording import (
    ALONE_TITLES,
    GOOD,
    NAMES,
    NO_DEVICE_EVIDENCE,
    NO_VERDICT,
    NOTE_TITLES,
    TITLES,
    Written,
    WrittenVerdict,
    ms,
)
from tracekit.results.analysis import Evidence, Verdict
from tracekit.results.vocab import BoundKind, Confidence, MeasuredOn, NoteKind, Parallelism, StragglerCause, SyncKind
from tracekit.results.worth import NOTE_BOUND

if TYPE_CHECKING:
    from tracekit.results.analysis import (
        Analysis,
        Finding,
        MemorySection,
        OpLatency,
        StragglerEvidence,
    )
    from tracekit.results.capture import CaptureSummary


def _name(text: str, limit: int = 80) -> str:
    """A name from a trace, cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _component(bound: BoundKind, verdict: Verdict) -> str:
    """A mixed verdict's candidate by name (a straggler with its rank)."""
    name = NAMES.get(bound) or TITLES[bound].split(":")[0]
    named = verdict.evidence.stragglers
    return f"{name} (rank {named[0].rank})" if bound is BoundKind.STRAGGLER and named else name


def title(finding: Finding, verdict: Verdict) -> str:  # noqa: PLR0911  (one case per kind)
    """The headline of a finding."""
    if finding.note in NOTE_TITLES:
        return NOTE_TITLES[finding.note]
    if finding.bound is BoundKind.UNDETERMINED:
        why = [f for f in verdict.secondary if f.note in NO_VERDICT]
        if why and why[0].note in ALONE_TITLES:
            return ALONE_TITLES[why[0].note]
        return NOTE_TITLES[why[0].note] if why and why[0].note else TITLES[BoundKind.UNDETERMINED]
    if finding.bound is BoundKind.MIXED and finding.components:
        names = " and ".join(_component(c, verdict) for c in finding.components)
        if {BoundKind.GPU_COMPUTE, BoundKind.COMPUTE} & set(finding.components):  # no waste is material
            return f"Mixed: no bound dominates ({names})"
        return f"Mixed: {names}, which these steps do not tell apart"
    if finding.note is NoteKind.HOST_SYNCS:
        return f"{finding.value or 0:.1f} host reads of device values (.item()) per step outside the optimizer"
    if finding.note is NoteKind.LOW_OVERLAP:
        return f"Compute hides only {finding.value or 0:.1f}% of collective time"
    if finding.note is NoteKind.RANKS_OVER_CORES:
        cores = int(finding.values[0]) if finding.values else 0
        return f"More ranks than cores: {int(finding.value or 0)} ranks ran on {cores} CPU cores"
    if (caveat := _caveat_title(finding)) is not None:
        return caveat
    bound = finding.bound or BoundKind.UNDETERMINED
    if bound is BoundKind.STRAGGLER and finding.straggler_rank is not None:
        return f"Straggler-bound: rank {finding.straggler_rank} arrives last and the others wait for it"
    if bound is BoundKind.COMPUTE or (bound is BoundKind.GPU_COMPUTE and verdict.measured_on is MeasuredOn.HOST):
        return TITLES[BoundKind.COMPUTE]
    return TITLES[bound]


def _caveat_title(finding: Finding) -> str | None:
    """The headline of a note about the input's times (None for any other finding)."""
    rank = int(finding.values[0]) if finding.values else 0
    if finding.note is NoteKind.DEVICE_CLOCK_AHEAD:
        return (
            f"Rank {rank}'s device clock is ahead of its host's: {finding.value or 0:.1f}% of its device activities "
            "start before they were launched, and the verdict's confidence is lowered"
        )
    if finding.note is NoteKind.DEVICE_CLOCK_BEHIND:
        return (
            f"Rank {rank}'s device clock is behind its host's: at {finding.value or 0:.1f}% of its device "
            "synchronizes, work launched before the call ends after it returned"
        )
    if finding.note is NoteKind.SOME_DEVICE_EVENTS_DROPPED:
        return (
            f"{finding.value or 0:.1f}% of a file's device activities have times that cannot be right: "
            "the verdict's confidence is lowered"
        )
    return None


def is_good(finding: Finding) -> bool:
    """Whether the finding is where a run should be (compute-bound)."""
    return finding.bound in GOOD


def cause(s: StragglerEvidence, traits: RunTraits | None = None) -> str:
    """A straggler's cause as a sentence fragment (``traits``: the run, for how it marks ranges)."""
    excess = ms(s.cause_excess_ns)
    if s.cause is StragglerCause.LATE_START:
        return f"it starts its steps {excess} later than the median of the other ranks, per step"
    if s.cause is StragglerCause.NO_PHASES:
        return f"no phase annotations to compare with the other ranks: add {advice.ranges(traits or RunTraits())}"
    if s.cause is StragglerCause.NOT_IN_PHASES:
        return "no annotated phase takes longer than on the other ranks: look at host work outside the ranges"
    return f"its {phase_name(s.phase)} takes {excess} longer per step than on the median of the other ranks"


def evidence(finding: Finding, verdict: Verdict, traits: RunTraits | None = None) -> list[str]:
    """The evidence lines of a finding, from the numbers behind it, and what removing it is worth
    (``traits``: the run, for the words of its profiler)."""
    lines = _evidence(finding, verdict, traits or RunTraits.of_verdict(verdict))
    lines += _passed_over(finding, verdict)
    if finding.gain is None:
        return lines
    said = why(finding.gain)
    return [*lines, worth(finding.gain, share=finding.share_pct is None), *([said] if said else [])]


def _passed_over(finding: Finding, verdict: Verdict) -> list[str]:
    """Larger wastes the verdict did not name, and why: removing them alone is worth too little."""
    out = []
    for bound in finding.passed_over:
        g = next((x for x in verdict.gains if x.bound is bound), None)
        if g is None:
            continue
        worth_it = "not re-timed" if g.gain_pct is None else f"{faster(g.gain_pct)} ({g.gain_pct:.1f}%)"
        out.append(
            f"not the bound: {bound.value} takes {g.share_pct:.1f}% of the step, but removing it alone is worth "
            f"{worth_it}, under the 1.18x at which a waste bounds the run: a symptom (its finding says what its "
            "time waits on)"
        )
    return out


def share_line(finding: Finding, traits: RunTraits) -> str:
    """What the share is of: one rank, every rank, or the ranks that set the pace."""
    share = f"share: {finding.share_pct or 0:.1f}% of the measured time"
    if finding.gain is not None and finding.bound not in GOOD:
        step = finding.gain.step_ns
        share += f" ({(finding.share_pct or 0) / 100 * step / 1e6:.2f} ms of each {step / 1e6:.2f} ms step)"
    pace, ranks = traits.pace_ranks, traits.ranks
    if ranks is None or ranks <= 1 or not pace:
        where = "" if ranks is not None and ranks <= 1 else " (the mean over the ranks that set the pace)"
    elif len(pace) == ranks:
        where = f", the mean over the {ranks} ranks"
    elif len(pace) == 1:
        where = f" of rank {pace[0]}, whose steps set the pace (the other ranks' are over 5% shorter)"
    else:
        where = f", the mean over ranks {', '.join(map(str, pace))}, which set the pace"
    worst = (
        ""
        if finding.worst_rank is None or (ranks is not None and ranks <= 1) or len(pace) == 1
        else f" (most on rank {finding.worst_rank}: {finding.max_rank_share_pct or 0:.1f}%)"
    )
    return share + where + worst


def _evidence(finding: Finding, verdict: Verdict, traits: RunTraits) -> list[str]:  # noqa: PLR0911, PLR0912  (one case per note)
    e = verdict.evidence
    if (caveat := _caveat_lines(finding)) is not None:
        return caveat
    if finding.note is NoteKind.HOST_SYNCS:
        note = (
            "each forces the host to wait for the GPU and drains its queue"
            if finding.confidence is not Confidence.LOW
            else "free on this CPU-only run, but on GPU tensors each one stalls the host until the GPU is done"
        )
        reads = f"{finding.value or 0:.1f} per step per rank"
        return [f"aten::item / aten::_local_scalar_dense outside Optimizer.step: {reads}; {note}"]
    if finding.note is NoteKind.LOW_OVERLAP:
        return [f"overlap per rank: {', '.join(f'{v:.0f}%' for v in finding.values)}"]
    if finding.note is NoteKind.PARTIAL_RANKS:
        world = int(finding.values[0]) if finding.values else 0
        return [
            f"{int(finding.value or 0)} of {world} ranks present: a collective's duration on one rank mixes its "
            "latency with waiting for the others, and stragglers need every rank's trace"
        ]
    if finding.note in NO_DEVICE_EVIDENCE:
        return [NO_DEVICE_EVIDENCE[finding.note]]
    if finding.note is NoteKind.EVENTS_SAMPLED:
        return [
            f"{finding.value or 0:.1f}% of consecutive CUDA calls skip 20 or more correlation ids (complete "
            "traces: under 7%): most calls, and the GPU work they launched, are not in the trace"
        ]
    if finding.note is NoteKind.TOO_LITTLE_WORK:
        return [
            f"fewer than two measured steps, and {finding.value or 0:.0f} device operations on the busiest rank "
            "(under 50) that kept it busy under 1 ms: a snippet, not a training run; nothing repeats to judge it by"
        ]
    if finding.note is NoteKind.WARMUP:
        return _warmup_lines(finding, verdict)
    if finding.note is NoteKind.UNOBSERVABLE:
        return [
            f"{finding.value or 0:.1f}% of the measured time the GPU waits behind work this trace does not hold "
            "(launched before the profiler started, or recorded on a device clock behind the host's): what it "
            "waited on cannot be seen, so no bound is named (the ledger's unobservable entry)"
        ]
    if finding.note is NoteKind.ONE_STEP:
        steps = "no steps were found: the whole trace is one window" if not finding.value else "one measured step"
        return [f"{steps}, so no step-to-step variation weighs the verdict's margin: the verdict's confidence is low"]
    lines = []
    if finding.share_pct is not None:
        lines.append(share_line(finding, traits))
    lines += _bound_lines(finding.bound, e, traits)
    if finding.bound is BoundKind.MIXED and {BoundKind.GPU_COMPUTE, BoundKind.COMPUTE} & set(finding.components):
        lines.append(
            f"{finding.components[0].value} takes more of the time than compute, but under the 15% at which "
            "removing it would make the step 1.18x as fast: no bound dominates"
        )
    elif finding.bound is BoundKind.MIXED and finding.components:
        lines.append(
            f"{' and '.join(c.value for c in finding.components)} ({finding.margin or 1:.2f}x): their difference "
            "is within its step-to-step variation (its 95% lower bound over the steps is not above zero), "
            "so neither is named alone"
        )
    elif finding.threshold_pct is not None and finding.share_pct is not None:
        lines.append(_decided(finding))
    return lines


def _decided(finding: Finding) -> str:
    """What made a finding: for the primary, a gain worth fixing and the largest share of those;
    for the others, a share or gain that makes a finding."""
    threshold = finding.threshold_pct or 0.0
    bar = f"{1 / (1 - threshold / 100):.2f}x"
    g = finding.gain
    if g is not None and g.gain_pct is not None and g.gain_pct >= threshold:
        worth_it = f"removing it is worth {faster(g.gain_pct)} (gain {g.gain_pct:.1f}%), over the {bar}"
    elif g is not None and g.gain_pct is None and threshold >= 10:
        worth_it = (
            f"no what-if re-times removing it, so its share stands for its gain (confidence one level lower): "
            f"{finding.share_pct or 0:.1f}% of the time, over the {threshold:.0f}% ({bar})"
        )
    elif g is not None and g.gain_pct is not None and floor(g) and threshold >= 10:
        worth_it = (
            f"its re-timed gain ({g.gain_pct:.1f}%) is a floor, the ranks outnumbering their machine's cores (the "
            "time a fix frees goes to the other ranks, which the re-timing does not give them), so its share "
            f"stands for its gain (confidence one level lower): {finding.share_pct or 0:.1f}% of the time, over the "
            f"{threshold:.0f}% ({bar})"
        )
    else:
        worth_it = f"{finding.share_pct or 0:.1f}% of the time, over the {threshold:.0f}% ({bar})"
    if threshold < 10:  # a secondary finding
        if g is not None and g.gain_pct is not None and g.gain_pct >= 15:
            return f"worth fixing too ({faster(g.gain_pct)}), but it holds less of the time than the verdict's bound"
        return f"a finding: {finding.share_pct or 0:.1f}% of the time, over the {threshold:.0f}% that makes one"
    if finding.margin is None:
        return f"decided by: {worth_it}"
    return (
        f"decided by: {worth_it} at which a waste bounds the run, and the largest share of the wastes that are: "
        f"{finding.margin:.1f}x the next"
    )


def _warmup_lines(finding: Finding, verdict: Verdict) -> list[str]:
    """What the warm-up note says: how much of the window is one-time work, and in what."""
    share = finding.value or 0.0
    steady = (
        "the rest is too little to judge: no bound is named"
        if verdict.primary.bound is BoundKind.UNDETERMINED
        else "the verdict is read off the rest, the steady state"
    )
    lines = [
        f"{share:.1f}% of the measured time the GPU waits on one-time work (CUDA context and allocator set-up, "
        f"lazy module loading at first launches, compilation, CUDA graph recording, the profiler's start and "
        f"flush): {steady}"
    ]
    work = verdict.evidence.warmup
    if work:
        lines.append("longest: " + ", ".join(f"{_name(w.name)} ({ms(w.ns)})" for w in work))
    return lines


#: What a figure that needs several ranks of a group reads as when only one rank recorded it.
ONE_RANK: Final = "not measurable from one rank"


def _caveat_lines(finding: Finding) -> list[str] | None:
    """The evidence of a note that limits the verdict (None for any other finding)."""
    if finding.note is NoteKind.NO_COMMUNICATION:
        world = "not recorded" if finding.value is None else str(int(finding.value))
        host = int(finding.values[0]) if finding.values else 0
        return [
            f"world size {world}, {host} host-side collective ops, yet no GPU kernel was recognized as "
            "communication: its collectives read as compute or idle, so every share above may be off by "
            "the communication time"
        ]
    if finding.note in (NoteKind.DEVICE_CLOCK_AHEAD, NoteKind.DEVICE_CLOCK_BEHIND):
        return [_clock_line(finding)]
    if finding.note is NoteKind.SOME_DEVICE_EVENTS_DROPPED:
        rank = int(finding.values[0]) if finding.values else 0
        return [
            f"the file of rank {rank}: {finding.value or 0:.1f}% of its device activities (kernels, copies, sets) were "
            "dropped for times that cannot be right (the warnings name the file and why): its device timeline "
            "misses that work, and every share measured on it may be off by as much"
        ]
    if finding.note is NoteKind.RANKS_OVER_CORES:
        cores = int(finding.values[0]) if finding.values else 0
        return [
            f"{int(finding.value or 0)} ranks on {cores} CPU cores (the capture's environment): ranks, their "
            "DataLoader workers and gloo's threads compete for cores, which slows host work, data loading and "
            "host collectives"
        ]
    return None


def _clock_line(finding: Finding) -> str:
    """The evidence of a device clock ahead of its host's, or behind it."""
    rank, by = (int(finding.values[0]), finding.values[1]) if len(finding.values) > 1 else (0, 0.0)
    share = f"{finding.value or 0:.1f}%"
    if finding.note is NoteKind.DEVICE_CLOCK_AHEAD:
        seen = (
            f"{share} of its kernels, copies and sets whose launch was recorded start before their launch call "
            f"began, the earliest {ms(by)} before it: a device cannot start work before it is launched, so its "
            f"clock is at least {ms(by)} ahead of"
        )
    else:
        seen = (
            f"at {share} of its cudaDeviceSynchronize calls, a kernel, copy or set launched before the call ends "
            f"after the call returned, the latest {ms(by)} after: the call returns only once all such work has "
            f"ended, so the device's clock is at least {ms(by)} behind"
        )
    return (
        f"rank {rank}: {seen} the host's, and every time measured from the host to the device (launch gaps, idle "
        "causes, the re-timed gains) is off by as much"
    )


def _op_latency(o: OpLatency) -> str:
    """One collective operation: its count, and per matched instance its latency and wait."""
    if o.floor_ns is None:
        return f"{_name(o.op)} x{o.count} (latency and wait {ONE_RANK})"
    n = o.matched or o.count
    wait = None if o.mean_wait_ns is None else o.mean_wait_ns / n
    return f"{_name(o.op)} x{o.count} (per instance: latency {ms(o.floor_ns / n)}, mean wait {ms(wait)})"


def _comms_lines(e: Evidence) -> list[str]:
    if all(o.floor_ns is None for o in e.ops):
        ops = ", ".join(f"{_name(o.op)} x{o.count}" for o in e.ops)
        lines = [
            f"collectives recorded by one rank only (none matched across ranks): {ops}; latency and wait are {ONE_RANK}"
        ]
    else:
        lines = [f"collectives matched across ranks: {', '.join(map(_op_latency, e.ops))}"]
    if e.mean_overlap_pct is not None:
        lines.append(f"compute hides {e.mean_overlap_pct:.1f}% of collective time on average")
    return lines


def _bound_lines(  # noqa: PLR0911  (one case per bound)
    bound: BoundKind | None, e: Evidence, traits: RunTraits | None = None
) -> list[str]:
    if bound is BoundKind.DATA and e.data_measure is not None:
        around = e.fetch_around()
        own = "" if around is None else f", of which {ms(around[1])} in the DataLoader's own __next__"
        return [
            f"measured as {DATA_MEASURES[e.data_measure]}; host fetch time {ms(e.fetch_per_step_ns)} per step per rank"
            + own,
            f"worst step: rank {e.worst_data_rank} step {e.worst_data_step}: {e.worst_data_share_pct or 0:.1f}% "
            "of the step",
        ]
    if bound is BoundKind.COMMS and e.ops:
        return _comms_lines(e)
    if bound is BoundKind.STRAGGLER:
        if e.stragglers:
            return [
                f"rank {s.rank} arrived last at {s.times_last} of {s.instances} collectives; the others waited "
                f"{ms(s.caused_wait_per_step_ns)} per step for it ({100 * s.score:.1f}% of a step); "
                f"cause: {cause(s, traits)}"
                for s in e.stragglers
            ]
        if e.ops and all(o.floor_ns is None for o in e.ops):
            return [f"who arrives last is {ONE_RANK}: no collective was recorded by two ranks"]
        if e.has_collectives:
            return ["no rank arrives last systematically: the waiting is spread over ranks"]
        return []
    if bound is BoundKind.SYNC and e.sync_calls_per_step is not None:
        lines = [
            f"{e.sync_calls_per_step:.1f} blocking syncs and {e.sync_ops_per_step or 0:.1f} "
            f".item()-style reads per step per rank; GPU idle after syncs {ms(e.idle_after_sync_per_step_ns)} per step"
        ]
        kinds = {SyncKind.SYNC: "blocking syncs", SyncKind.BLOCKING_COPY: "copies to or from pageable memory"}
        lines += [f"{s.per_step:.1f} {kinds.get(s.kind, s.kind)} per step from {s.op}" for s in e.sync_sources]
        return lines
    if bound is BoundKind.GPU_COMPUTE:
        return [f"top kernel: {k.name[:80]} ({k.share_pct or 0:.1f}% of GPU time)" for k in e.top_kernels]
    if bound is BoundKind.LAUNCH:
        return ["GPU idle while the host was busy in operators and runtime calls (launch-bound idle)"]
    if bound is BoundKind.IDLE:
        return ["GPU idle with no DataLoader fetch, host sync, collective or busy host in the trace around it"]
    return []


def recommendations(
    finding: Finding, verdict: Verdict, capture: CaptureSummary | None = None, traits: RunTraits | None = None
) -> list[str]:
    """What to change, most specific first, for the run ``traits`` describe (by default what the
    verdict tells of it; whether it is PyTorch, the verdict's evidence says); with the capture's
    summary, the primary finding also gets the tracekit command that decides its question
    (:func:`tool_advice`)."""
    traits = dataclasses.replace(traits or RunTraits.of_verdict(verdict), pytorch=verdict.evidence.pytorch)
    recs = _recommendations(finding, verdict, traits)
    if capture is not None and finding == verdict.primary:
        recs = [*tool_advice(finding.bound, capture, traits.parallelism), *recs]
    return recs


#: DDP in accelerate's words (FSDP and DeepSpeed have no find_unused_parameters).
_DDP: Final = ("MULTI_GPU", "MULTI_CPU", "MULTI_XPU", "MULTI_NPU", "MULTI_MLU", "MULTI_MUSA")
#: tracekit's accelerate configs that are not DDP, whatever accelerate's distributed type says
#: (on CPU tracekit applies FSDP itself and accelerate reports MULTI_CPU).
_NOT_DDP_CONFIGS: Final = ("fsdp", "deepspeed")


def tool_advice(bound: BoundKind | None, capture: CaptureSummary, parallelism: Parallelism | None = None) -> list[str]:
    """The tracekit commands that decide this run's open question, from the capture's config:

    - data-bound: ``tracekit dataloader`` measures the input pipeline's ceiling (more workers
      help only if the loader alone could deliver more);
    - DDP with ``find_unused_parameters=True`` whose backward is the step's largest phase:
      ``tracekit audit-params`` says whether that setting (a graph walk every step) is needed.
      DDP as ``parallelism`` says (the run's ops, else its capture: :class:`RunTraits`), else as
      the capture's config and accelerate's distributed type do.
    """
    config, environment = capture.config or {}, capture.environment or {}
    folder = config.get("out_dir")
    if not isinstance(folder, str):
        return []
    # quoted: out_dir is text recorded in the capture, pasted here into a shell command
    config_path = f"{folder.rstrip('/') or '.'}/capture_config.json"
    command = f"--config_path {shlex.quote(config_path)}"
    advice = []
    if bound is BoundKind.DATA:
        advice.append(
            f"Measure the input pipeline's ceiling without the model: tracekit dataloader {command} times this "
            f"DataLoader alone on the same {capture.world_size} rank(s) and says whether training is input-bound "
            "(more workers help only if the loader alone delivers more than training consumes)."
        )
    largest = max(capture.phases, key=lambda p: p.share_pct or 0.0, default=None)
    if parallelism is not None:
        ddp = parallelism is Parallelism.DDP
    else:
        named = str(config.get("accelerate_config") or "")
        ddp = environment.get("distributed_type") in _DDP and not named.startswith(_NOT_DDP_CONFIGS)
    if ddp and config.get("find_unused_parameters") is True and largest is not None and largest.phase == "backward":
        advice.append(
            f"DDP runs with find_unused_parameters=True and backward is the step's largest phase "
            f"({largest.share_pct or 0:.1f}%): tracekit audit-params {command} lists the parameters that get no "
            "gradient; with none, set it to False (no graph walk after every forward)."
        )
    return advice


def _advice(bound: BoundKind, verdict: Verdict, traits: RunTraits) -> tuple[str, ...]:
    """The advice for ``bound`` in this run (:func:`tracekit.reports.advice.for_bound`)."""
    stragglers = verdict.evidence.stragglers
    return advice.for_bound(bound, traits, verdict.evidence, stragglers[0].cause if stragglers else None)


def _recommendations(finding: Finding, verdict: Verdict, traits: RunTraits) -> list[str]:
    if finding.note is not None:
        return list(advice.for_note(finding.note, traits))
    bound = finding.bound or BoundKind.UNDETERMINED
    if bound is BoundKind.GPU_COMPUTE and verdict.measured_on is MeasuredOn.HOST:
        bound = BoundKind.COMPUTE
    if bound is BoundKind.UNDETERMINED:
        return [r for f in verdict.secondary if f.note in NO_VERDICT for r in advice.for_note(f.note, traits)]
    # a kernel run on one thread comes first in the primary finding, whatever bounds the run
    first = list(advice.one_thread(verdict.evidence)) if finding == verdict.primary else []
    if bound is BoundKind.MIXED:
        return [*first, *(r for c in finding.components for r in _advice(c, verdict, traits)[:2])]
    recs = [*first, *_advice(bound, verdict, traits)]
    if bound is BoundKind.STRAGGLER and verdict.evidence.stragglers:
        s = verdict.evidence.stragglers[0]
        recs.insert(len(first), f"Rank {s.rank}: {cause(s, traits)}.")
    return recs


#: The longest sentence a report shows: names from a trace can be any length, a report cannot.
MAX_SENTENCE: Final = 600


def _clip(line: str) -> str:
    return line if len(line) <= MAX_SENTENCE else line[: MAX_SENTENCE - 1] + "…"


def write(
    finding: Finding, verdict: Verdict, capture: CaptureSummary | None = None, traits: RunTraits | None = None
) -> Written:
    """One finding in words (``capture``: the run's summary.json, for the tools' commands;
    ``traits``: what of the run its advice depends on)."""
    return Written(
        title=_clip(title(finding, verdict)),
        share_pct=finding.share_pct,
        confidence=finding.confidence.value,
        evidence=tuple(map(_clip, evidence(finding, verdict, traits))),
        recommendations=tuple(map(_clip, recommendations(finding, verdict, capture, traits))),
        good=is_good(finding),
        badge=_badge(finding),
    )


def _badge(finding: Finding) -> str:
    """A finding's numbers in its heading: its share and gain, and how sure it is (a note, a
    fact, has no confidence of its own: its words say what it does to the verdict's)."""
    numbers = badge(finding.gain) if finding.gain is not None and finding.bound not in GOOD else ""
    if not numbers and finding.share_pct is not None:
        numbers = f"{finding.share_pct:.1f}% of the time"
    if finding.note is not None:
        return numbers
    return f"{numbers}, confidence {finding.confidence.value}" if numbers else f"confidence {finding.confidence.value}"


def write_verdict(
    verdict: Verdict,
    *,
    memory: MemorySection | None = None,
    capture: CaptureSummary | None = None,
    traits: RunTraits | None = None,
) -> WrittenVerdict:
    """The whole verdict in words, with the memory findings beside it (``capture``: the run's
    summary.json, for the tools' commands; ``traits``: what of the run its advice depends on)."""
    primary = _advised(write(verdict.primary, verdict, capture, traits), PRIMARY_ADVICE)
    secondary = tuple(_advised(write(f, verdict, capture, traits), OTHER_ADVICE) for f in verdict.secondary)
    run = traits or RunTraits()
    return WrittenVerdict(
        measured_on=verdict.measured_on.value,
        primary=primary,
        secondary=secondary,
        memory=tuple(
            _advised(write_memory(f, run.parallelism, expandable=run.expandable_segments), OTHER_ADVICE)
            for f in memory.findings
        )
        if memory is not None
        else (),
        first=tuple(first_line(fix, _first_advice(fix.bound, verdict, traits)) for fix in verdict.first),
        joint=joint_line(verdict.joint, verdict.first) if verdict.joint is not None else None,
    )


#: The advice items of the verdict's finding, and of each other finding: what every format shows.
PRIMARY_ADVICE: Final = 5
OTHER_ADVICE: Final = 2


def _advised(w: Written, most: int) -> Written:
    """``w`` with its ``most`` most specific advice items: the ones every report format carries."""
    return dataclasses.replace(w, recommendations=w.recommendations[:most])


def _first_advice(bound: BoundKind, verdict: Verdict, traits: RunTraits | None) -> str | None:
    """The first thing to change for ``bound``: its finding's most specific advice."""
    finding = next((f for f in (verdict.primary, *verdict.secondary) if f.bound is bound), None)
    if finding is None:
        note = next((n for n, b in NOTE_BOUND.items() if b is bound), None)
        finding = next((f for f in verdict.secondary if f.note is note), None) if note is not None else None
    if finding is None:
        return None
    recs = _recommendations(finding, verdict, traits or RunTraits.of_verdict(verdict))
    return recs[0] if recs else None


def write_analysis(analysis: Analysis) -> WrittenVerdict:
    """An analysis's verdict in words, its advice fitted to the run (:class:`RunTraits`)."""
    return write_verdict(
        analysis.verdict, memory=analysis.memory, capture=analysis.capture, traits=RunTraits.of(analysis)
    )


def write_alone(finding: Finding, measured_on: MeasuredOn) -> Written:
    """A finding in words without the rest of its verdict (a comparison keeps each run's primary finding).

    The title, share, confidence and advice are those of the analysis report; the evidence is what the
    finding itself holds (its share and what decided it), not the figures of the whole verdict.
    """
    alone = Verdict(
        measured_on=measured_on, primary=finding, secondary=[], costs=[], evidence=Evidence(steps_per_rank=0)
    )
    return write(finding, alone)
