"""The words of a comparison of two runs: numbers in their units, the headline, one line per measure,
how the runs differ, the gate's lines, the noise model.

The comparison holds kinds and figures; its sentences are written once here and shown by the
terminal, Markdown and HTML renderers, so the formats agree.
Every string returned is plain text that may hold names from a trace: each renderer escapes it
(terminal :func:`~tracekit.reports.text.printable`, Markdown ``escape``, HTML autoescaping).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracekit.reports.terms import phase_name
from tracekit.results.vocab import (
    PHASE_PREFIX,
    Change,
    GateOutcome,
    MeasureNote,
    NoiseMethod,
    PeakSource,
    SyncMeasure,
    Unit,
    WarningKind,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from tracekit.results.compare import (
        Comparison,
        GateResult,
        Measure,
        OutlierRun,
        RunDifference,
        SyncComparison,
        WorkChange,
    )

#: Changes that are beyond noise (each is said as "<change> by <amount>").
MOVED: Final = (Change.SLOWER, Change.FASTER, Change.HIGHER, Change.LOWER)
#: Sync sources named in one line before "and N more".
SOURCES_IN_LINE: Final = 3


@dataclass(frozen=True)
class Scale:
    """How a measure's numbers are shown: divided by ``factor``, followed by ``suffix``."""

    factor: float
    suffix: str
    #: the suffix of a difference when it differs from a value's (percentage points)
    delta_suffix: str = ""
    space: bool = True

    def show(self, value: float | None, *, sign: bool = False, delta: bool = False) -> str:
        """``value`` in this scale with its unit ('45.52 ms', '+1.2 pp', '12.0%'); '-' when missing."""
        if value is None:
            return "-"
        suffix = self.delta_suffix if delta and self.delta_suffix else self.suffix
        return f"{num(value / self.factor, sign=sign)}{' ' if self.space else ''}{suffix}"

    def bare(self, value: float | None, *, sign: bool = False) -> str:
        """``value`` in this scale without its unit."""
        return "-" if value is None else num(value / self.factor, sign=sign)

    def unit(self, *, delta: bool = False) -> str:
        """The unit as written after a number (with its leading space, if any)."""
        suffix = self.delta_suffix if delta and self.delta_suffix else self.suffix
        return f"{' ' if self.space else ''}{suffix}"


def num(value: float, *, sign: bool = False) -> str:
    """A number with as many decimals as it needs: 1,234 / 123.4 / 12.34 / 0.12 / 0.0042; 0 as '0'."""
    if not math.isfinite(value):
        return str(value)
    size = abs(value)
    if size == 0:
        return "0"
    if round(size) >= 1000:
        decimals = 0
    elif round(size, 1) >= 100:
        decimals = 1
    elif round(size, 2) >= 0.01:
        decimals = 2
    else:
        decimals = min(9, 1 - math.floor(math.log10(size)))
    return f"{value:{'+' if sign else ''},.{decimals}f}"


def per_unit(per: str) -> str:
    """What 'per step' is on this comparison: 'step', or 's' when a side has no steps."""
    return "s" if per == "second" else per


#: Units whose scale follows the size of the numbers: (from this size, divide by, suffix), largest first.
_LADDERS: Final = {
    Unit.NS: ((1e10, 1e9, "s"), (1e6, 1e6, "ms"), (1e3, 1e3, "µs"), (0.0, 1.0, "ns")),
    Unit.BYTES: ((2.0**30, 2.0**30, "GiB"), (2.0**20, 2.0**20, "MiB"), (2.0**10, 2.0**10, "KiB"), (0.0, 1.0, "B")),
}


def scale(unit: Unit, values: Iterable[float | None], *, per: str = "step") -> Scale:
    """The scale for numbers of ``unit`` whose largest magnitude is among ``values``."""
    if unit in _LADDERS:
        top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
        factor, suffix = next((f, s) for above, f, s in _LADDERS[unit] if top >= above)
        return Scale(factor, suffix)
    if unit is Unit.PCT:
        return Scale(1.0, "%", delta_suffix=" pp", space=False)
    if unit in (Unit.PER_S, Unit.SAMPLES_PER_S):
        return Scale(1.0, "/s", space=False)
    return Scale(1.0, f"/{per_unit(per)}", space=False)


def of(m: Measure, *, per: str = "step") -> Scale:
    """The scale of one measure: from its values and its change."""
    ci = (m.ci.low, m.ci.high) if m.ci else ()
    return scale(m.unit, (m.a, m.b, m.delta, *ci), per=per)


def half_width(m: Measure) -> float | None:
    """The ± of a measure's change: half the width of its interval."""
    return None if m.ci is None else (m.ci.high - m.ci.low) / 2


def level(m: Measure) -> str:
    """'95%' for an interval at 0.95."""
    return "" if m.ci is None else f"{m.ci.level * 100:g}%"


def interval(m: Measure, *, per: str = "step") -> str:
    """'+4.71..+5.33 ms', or '-' when the change has no interval."""
    if m.ci is None:
        return "-"
    s = of(m, per=per)
    return f"{s.bare(m.ci.low, sign=True)}..{s.bare(m.ci.high, sign=True)}{s.unit(delta=True)}"


def pct(value: float | None, *, sign: bool = True) -> str:
    """A percentage change ('+12.4%'); '-' when missing."""
    return "-" if value is None else f"{value:{'+' if sign else ''}.1f}%"


#: The name of each run-level measure, by key (throughput, peak memory, ranks and phases are
#: named by :func:`measure_label`).
MEASURE_NAMES: Final = {
    "step": "step time",
    "syncs": "syncs per step",
    "compute_pct": "compute share",
    "comm_pct": "communication share",
    "memory_pct": "memory-op share",
    "idle_pct": "idle share",
    "exposed_comm": "exposed communication per step",
    "cpu": "CPU time per step (each rank's process)",
    "overlap_pct": "comm/compute overlap",
    "peak_reserved": "peak memory reserved (worst rank)",
    "peak_gap": "reserved but unallocated at the peak (worst rank)",
}
#: Peak memory, by where it was read (None: nowhere).
PEAK_NAMES: Final[dict[PeakSource | None, str]] = {
    PeakSource.COUNTERS: "peak memory allocated (worst rank, profiler counters)",
    PeakSource.CAPTURE_ALLOCATED: "peak memory allocated (worst rank, capture)",
    PeakSource.CAPTURE_RSS: "peak memory RSS (worst rank, capture)",
    None: "peak memory",
}
#: The remark beside a measure, by :class:`MeasureNote`.
MEASURE_NOTES: Final = {
    MeasureNote.ONE_SIDE: "measured on one side only",
    MeasureNote.NEITHER_SIDE: "measured on neither side",
    MeasureNote.ONCE_PER_RUN: "measured once per run: no interval",
    MeasureNote.WHOLE_TRACE: "over each rank's whole trace (no steps): no interval",
}


def measure_label(m: Measure | GateResult) -> str:
    """What a measure (or the measure a gate condition read) is called: 'step time', 'rank 3', 'forward'."""
    key = m.key
    if key.startswith("phase:"):
        return key.removeprefix("phase:").removeprefix(PHASE_PREFIX)
    if key.startswith("rank:"):
        return f"rank {key.removeprefix('rank:')}"
    if key == "throughput":
        return f"throughput ({'samples/s' if m.unit is Unit.SAMPLES_PER_S else 'steps/s'}, slowest rank per step)"
    if key == "peak_memory":
        return PEAK_NAMES[m.peak_of]
    return MEASURE_NAMES.get(key, key)


def measure_note(m: Measure) -> str:
    """The remark beside a measure ('measured once per run: no interval'); '' when none."""
    return "" if m.note is None else MEASURE_NOTES[m.note]


def change(m: Measure, *, per: str = "step", detectable: bool = True) -> str:
    """What happened to a measure, with its amount and interval.

    'slower by 5.02 ms ± 0.31 (+12.4%), 95% CI +4.71..+5.33 ms';
    'within noise: +0.03 ms (+0.1%), 95% CI -0.08..+0.14 ms; this comparison could have detected ±0.21 ms'.
    """
    s = of(m, per=per)
    rel = "" if m.delta_pct is None else f" ({pct(m.delta_pct)})"
    ci = "" if m.ci is None else f", {level(m)} CI {interval(m, per=per)}"
    note = "" if m.note is None else f" ({measure_note(m)})"
    if m.change in MOVED and m.delta is not None:
        pm = "" if (hw := half_width(m)) is None else f" ± {s.bare(hw)}"
        return f"{m.change.value} by {s.show(abs(m.delta), delta=True)}{pm}{rel}{ci}{note}"
    if m.change is Change.WITHIN_NOISE:
        amount = "" if m.delta is None else f": {s.show(m.delta, sign=True, delta=True)}{rel}{ci}"
        could = (
            f"; this comparison could have detected ±{s.show(m.detectable, delta=True)}"
            if detectable and m.detectable is not None
            else ""
        )
        return f"within noise{amount}{could}{note}"
    if m.change is Change.SAME:
        return f"same: {s.show(m.a)}{note}"
    if m.change is Change.APPEARED:
        return f"appeared: {s.show(m.b)} in B only{note}"
    if m.change is Change.DISAPPEARED:
        return f"disappeared: {s.show(m.a)} in A only{note}"
    amount = "" if m.delta is None else f": {s.show(m.delta, sign=True, delta=True)}"
    return f"{m.change.value}{amount}{note}"


def measure_line(m: Measure, *, per: str = "step") -> str:
    """One measure on one line: 'forward +0.31 ms ± 0.05 (+0.03% of the step) slower'."""
    s = of(m, per=per)
    if m.delta is None:
        return f"{measure_label(m)}: {change(m, per=per, detectable=False)}"
    pm = "" if (hw := half_width(m)) is None else f" ± {s.bare(hw)}"
    if m.step_pct is not None:
        rel = f" ({m.step_pct:+.2f}% of the step)"
    else:
        rel = "" if m.delta_pct is None else f" ({pct(m.delta_pct)})"
    note = "" if m.note is None else f" ({measure_note(m)})"
    return f"{measure_label(m)} {s.show(m.delta, sign=True, delta=True)}{pm}{rel} {m.change.value}{note}"


def step_title(c: Comparison) -> str:
    """'Step time A 40.50 ms -> B 45.52 ms', or why there is none."""
    m, per = c.step, c.noise.unit
    if m.a is None and m.b is None:
        if per == "second":
            return "No step time: a side has no steps; work is compared per second of trace"
        return "No step time: the steps of these runs could not be compared"
    s = of(m, per=per)
    return f"Step time {c.a.label} {s.show(m.a)} -> {c.b.label} {s.show(m.b)}"


#: What a change beyond noise of one run a side cannot rule out, said beside it.
ONE_RUN: Final = (
    "one run a side: its interval holds step-to-step variation only, so run-to-run drift (another tenant, "
    "a slower spell) can read as this; capture --ab A B --repeats 3 tells them apart"
)


def headline(c: Comparison) -> str:
    """What happened to the step time, in one sentence (a change of one run a side with what it
    cannot rule out: issue 46 found 'faster by 130.2%, 95% CI ...' from one run a side)."""
    said = change(c.step, per=c.noise.unit)
    if c.noise.method is NoiseMethod.STEPS and c.step.change in MOVED:
        return f"{said} ({ONE_RUN})"
    return said


def samples(c: Comparison) -> str:
    """How many samples are behind the step time, and what a sample is."""
    m = c.step
    if not (m.n_a or m.n_b):
        return ""
    runs = "" if c.a.runs == c.b.runs == 1 else f" over {c.a.runs} and {c.b.runs} runs"
    return f"{m.n_a} and {m.n_b} steps{runs}, each the mean over ranks"


#: How the intervals were made, by :class:`NoiseMethod`.
METHODS: Final = {
    NoiseMethod.STEPS: (
        "moving-block bootstrap over steps, each step the mean over ranks; one run on a side: the interval holds "
        "step-to-step variation only, not how far two launches of one program differ (capture --ab with "
        "--repeats 3 measures that)"
    ),
    NoiseMethod.RUNS_THEN_STEPS: (
        "moving-block bootstrap over steps, each step the mean over ranks; with repeats, runs resampled first, "
        "then steps within each, and the interval no narrower than Welch's t over the runs' means (run-to-run "
        "variation measured)"
    ),
}


def noise_line(c: Comparison) -> str:
    """How 'within noise' was decided, in one line."""
    n = c.noise
    return (
        f"Noise model: {METHODS[n.method]}; {n.level * 100:g}% intervals from {n.resamples:,} resamples "
        f"(seed {n.seed}); a change under {n.threshold_pct:g}% of A is within noise; counts are per {n.unit}"
    )


def _ranks(ranks: Sequence[int | str]) -> str:
    return ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "") if ranks else "none"


def _devices(devices: Sequence[int | str]) -> str:
    return ", ".join(str(d) for d in devices) or "none recorded"


def _no_steps(w: RunDifference) -> str:
    who = "neither run has steps" if w.a == w.b == 0 else f"{'A' if w.a == 0 else 'B'} has no steps"
    return f"{who}: step times cannot be compared; work is compared per second of trace"


def _config_keys(keys: Sequence[str]) -> str:
    return ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")


#: One sentence per way the runs differ, from its figures.
DIFFERENCES: Final[dict[WarningKind, Callable[[RunDifference], str]]] = {
    WarningKind.WORLD_SIZE: lambda w: f"world size differs: A {w.a}, B {w.b}",
    WarningKind.RANKS: lambda w: (
        f"ranks present differ: A {_ranks(w.a_items)}, B {_ranks(w.b_items)}; per-rank rows only for common ranks"
    ),
    WarningKind.DEVICES: lambda w: (
        f"devices differ: A {_devices(w.a_items)}; B {_devices(w.b_items)}: "
        "kernel times reflect the hardware as well as the change"
    ),
    WarningKind.BACKEND: lambda w: f"backend differs: A {w.a}, B {w.b}",
    WarningKind.MEASURED_ON: lambda w: f"A is measured on the {w.a}, B on the {w.b}: shares are not comparable",
    WarningKind.NO_STEPS: _no_steps,
    WarningKind.STEP_COUNT: lambda w: f"steps found differ: A {w.a}, B {w.b} measured (rank x step)",
    WarningKind.STEP_SOURCE: lambda w: f"steps were found differently: A by {w.a}, B by {w.b}",
    WarningKind.STEP_SELECTION: lambda _: "the steps measured were selected differently (--steps / --include-warmup)",
    WarningKind.WINDOW: lambda w: f"windows differ: A {w.a}, B {w.b}",
    WarningKind.WORKLOAD: lambda w: f"workload differs: A {w.a}, B {w.b}",
    WarningKind.BATCH_SIZE: lambda w: (
        f"batch size per rank differs: A {w.a}, B {w.b}: per-step figures measure different work"
    ),
    WarningKind.CONFIG: lambda w: f"capture configs differ in: {_config_keys(w.keys)}",
}


def warning(w: RunDifference) -> str:
    """One way the runs differ, as a sentence: 'world size differs: A 2, B 4'."""
    return DIFFERENCES[w.kind](w)


def warnings(c: Comparison) -> list[str]:
    """Every way the runs differ, then every outlier run, one sentence each."""
    return [*(warning(w) for w in c.warnings), *(outlier_line(c, o) for o in c.outliers)]


def outlier_line(c: Comparison, o: OutlierRun) -> str:
    """'B run 2 (run2) averaged 163.04 ms a step against 21.00 and 29.00 ms ...'."""
    label = c.a.label if o.side == "a" else c.b.label
    where = f" ({os.path.basename(o.source) or o.source})" if o.source else ""
    others = [f"{x / 1e6:.2f}" for x in o.others_ns]
    listed = ", ".join(others[:-1]) + f" and {others[-1]}" if len(others) > 1 else "".join(others)
    how = f"{o.score:.1f} robust standard deviations" if o.score is not None else "far"
    return (
        f"outlier: {label} run {o.run}{where} averaged {o.mean_ns / 1e6:.2f} ms a step against {listed} ms for "
        f"the other runs of {label}, {how} from their median ({o.side_median_ns / 1e6:.2f} ms): its steps are "
        f"kept, and widen {label}'s interval; check what else ran on the machine then, or capture again"
    )


def _gate_amount(value: float | None, unit: Unit) -> str:
    """An amount of a gate's line: '+5.02 ms', '512 MiB', '+1.2 points' (3 significant digits)."""
    if value is None:
        return "n/a"
    sign = "+" if value > 0 else ("-" if value < 0 else "")
    v = abs(value)
    if unit is Unit.NS:
        text = f"{v / 1e6:.3g} ms" if v >= 1e5 else f"{v / 1e3:.3g} us"
    elif unit is Unit.BYTES:
        text = f"{v / 2**30:.3g} GiB" if v >= 2**30 else f"{v / 2**20:.3g} MiB"
    elif unit is Unit.PCT:
        text = f"{v:.3g} points"
    else:
        text = f"{v:.4g}"
    return sign + text


#: What each gate outcome says before the figures, and whether the limit follows (and how).
_OUTCOMES: Final = {
    GateOutcome.REGRESSED: ("regressed", ", beyond the limit "),
    GateOutcome.WITHIN_LIMIT: ("within the limit", ", limit "),
    GateOutcome.WITHIN_NOISE: ("within noise", None),
    GateOutcome.NO_REGRESSION: ("no regression", None),
}


def gate_limit(g: GateResult) -> str:
    """The limit as the condition gave it: '1%', or an amount ('0.5 ms')."""
    return f"{g.limit_pct:g}%" if g.limit_pct is not None else _gate_amount(g.limit, g.unit).lstrip("+")


def gate_observed(g: GateResult) -> str:
    """The change the condition read: '+5.02 ms (+12.40%)'."""
    return _gate_amount(g.delta, g.unit) + (f" ({g.delta_pct:+.2f}%)" if g.delta_pct is not None else "")


def gate_message(g: GateResult) -> str:
    """'regressed: step time +5.02 ms (+12.40%), 95% CI +4.7 ms..+5.33 ms, beyond the limit 1%'."""
    ci = g.ci
    interval = (
        f", {round(100 * ci.level)}% CI {_gate_amount(ci.low, g.unit)}..{_gate_amount(ci.high, g.unit)}"
        if ci is not None
        else ""
    )
    said, limit = _OUTCOMES[g.outcome]
    return f"{said}: {measure_label(g)} {gate_observed(g)}{interval}" + ("" if limit is None else limit + gate_limit(g))


def gate_line(g: GateResult) -> str:
    """'FAIL slower:1%: regressed: ...' for one --fail-if condition."""
    return f"{'FAIL' if g.failed else 'PASS'} {g.spec}: {gate_message(g)}"


def gate_summary(c: Comparison) -> str:
    """'gate: 1 of 3 conditions failed' (empty without a gate)."""
    if not c.gate:
        return ""
    failed = sum(g.failed for g in c.gate)
    return f"Gate: {failed} of {len(c.gate)} condition{'s' if len(c.gate) != 1 else ''} failed"


def _sources(rows: Iterable[WorkChange], side: str) -> str:
    named = []
    for w in rows:
        count = w.a_count if side == "a" else w.b_count
        if count:
            named.append(w.name + (f" in {phase_name(w.phase)}" if w.phase else ""))
    if not named:
        return ""
    more = len(named) - SOURCES_IN_LINE
    listed = ", ".join(named[:SOURCES_IN_LINE])
    return f", from {listed}" + (f" and {more} more" if more > 0 else "")


#: What counts as a sync, by :class:`SyncMeasure`.
SYNC_MEASURES: Final = {
    SyncMeasure.SYNC_CALLS: "blocking sync calls and copies (points where the host waited for the GPU)",
    SyncMeasure.HOST_READS: "host reads of tensor values (.item(), bool(t): each a device-to-host sync on a GPU)",
}


def sync_measure(s: SyncComparison) -> str:
    """What the comparison counts as a sync, in words."""
    return SYNC_MEASURES[s.measure]


def sync_line(c: Comparison) -> str:
    """'B: 0 syncs per step (A: 1.00, from aten::is_nonzero in forward)'."""
    s: SyncComparison = c.syncs
    per, what = c.noise.unit, sync_measure(s)
    if s.a_per_step is None and s.b_per_step is None:
        return f"{what} per {per}: not measured on either run"
    b = "not measured" if s.b_per_step is None else num(s.b_per_step)
    a = "not measured" if s.a_per_step is None else num(s.a_per_step)
    return f"{c.b.label}: {b} {what} per {per}{_sources(s.sources, 'b')} ({c.a.label}: {a}{_sources(s.sources, 'a')})"


def cost_line(c: Comparison) -> str:
    """Whether the bound changed: 'same bound on both runs' / 'the bound changed: A ... -> B ...'."""
    v = c.verdicts
    if v.same_bound:
        return "Same bound on both runs"
    a = v.a.bound.value if v.a.bound else (v.a.note.value if v.a.note else "none")
    b = v.b.bound.value if v.b.bound else (v.b.note.value if v.b.note else "none")
    return f"The bound changed: {c.a.label} {a} -> {c.b.label} {b}"
