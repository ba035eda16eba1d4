"""The CI gate of a comparison: ``--fail-if METRIC:LIMIT`` read into a :class:`GateSpec`, and each
condition decided on a :class:`Comparison` into a typed :class:`GateResult` (its outcome and
figures; the lines a user reads are written by :mod:`tracekit.reports.compare_text`).

Parsing lives here, beside the evaluation, not in the CLI: which measure a metric reads and in
which unit its limit is written are the comparison's vocabulary, the CLI holds no logic, and
:func:`tracekit.pipeline.compare_paths` checks every condition before it reads a trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.analyzers.compare.noise import rounded
from tracekit.errors import InputError
from tracekit.results.compare import Comparison, GateResult, Measure
from tracekit.results.vocab import PHASE_PREFIX, Change, GateOutcome, Unit

if TYPE_CHECKING:
    from collections.abc import Sequence

#: ``--fail-if`` metrics: the measure each reads.
GATE_METRICS: Final = {
    "slower": "step",
    "step": "step",
    "throughput": "throughput",
    "memory": "peak_memory",
    "reserved": "peak_reserved",
    "gap": "peak_gap",
    "syncs": "syncs",
    "exposed_comm": "exposed_comm",
    "cpu": "cpu",
}
_TIME_UNITS: Final = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_BYTE_UNITS: Final = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30}
#: Measures whose limit is a plain number (no unit).
_PLAIN: Final = ("syncs", "throughput")
_BYTES: Final = ("peak_memory", "peak_reserved", "peak_gap")
GATE_HELP: Final = (
    "METRIC:LIMIT, METRIC one of slower (step time), cpu (CPU time per step), throughput, memory (peak), "
    "reserved, gap (fragmentation), syncs (per step), "
    "exposed_comm, phase:NAME; LIMIT a share of A (1%) or an amount (+0, 0.5ms, 512MiB)"
)


#: Runs each side needs for a condition on a time (step, phase, throughput, exposed comm): with
#: fewer, the interval holds step-to-step variation only and cannot see run-to-run variation
#: (another tenant, a slower spell): on a loaded 2-core machine single A/A pairs failed a
#: ``slower:2%`` gate 2 times in 3. Three a side is the least the runs' own spread (Welch's t over
#: the runs' means, 2 degrees of freedom at least) can be measured with.
MIN_GATE_RUNS: Final = 3
#: Measures that are times (noisy from run to run), by key; a phase's key starts with ``phase:``.
_TIMES: Final = ("step", "throughput", "exposed_comm", "cpu")


@dataclass(frozen=True)
class GateSpec:
    """One parsed ``--fail-if``: the measure key, and the limit as a share or an amount."""

    text: str
    metric: str
    key: str
    pct: float | None
    amount: float | None


def parse_gate(text: str) -> GateSpec:
    """``slower:1%``, ``syncs:+0``, ``memory:+512MiB``, ``phase:forward:0.5ms`` -> a :class:`GateSpec`."""
    metric, sep, limit = text.strip().rpartition(":")
    metric = metric.strip()
    limit = limit.strip().lstrip("+")
    if not sep or not metric or not limit:
        raise InputError(f"--fail-if {text!r}: expected {GATE_HELP}")
    if metric.startswith("phase:"):
        name = metric.removeprefix("phase:").strip()
        if not name:
            raise InputError(f"--fail-if {text!r}: name the phase, e.g. phase:forward:1%")
        key = f"phase:{name}"
    elif metric in GATE_METRICS:
        key = GATE_METRICS[metric]
    else:
        raise InputError(f"--fail-if {text!r}: unknown metric {metric!r}; expected {GATE_HELP}")
    try:
        if limit.endswith("%"):
            pct = float(limit[:-1])
            if not math.isfinite(pct) or pct < 0:
                raise ValueError(limit)
            return GateSpec(text=text, metric=metric, key=key, pct=pct, amount=None)
        return GateSpec(text=text, metric=metric, key=key, pct=None, amount=_amount(limit, key))
    except ValueError:
        raise InputError(f"--fail-if {text!r}: cannot read the limit {limit!r}; expected {GATE_HELP}") from None


def check_runs(specs: Sequence[str], runs_a: int, runs_b: int) -> None:
    """Refuse a condition on a time when a side has fewer than :data:`MIN_GATE_RUNS` runs."""
    times = [t for t in specs if (k := parse_gate(t).key) in _TIMES or k.startswith("phase:")]
    if times and min(runs_a, runs_b) < MIN_GATE_RUNS:
        raise InputError(
            f"--fail-if {times[0]!r} needs run-to-run variation: A has {runs_a} run(s), B {runs_b}, and "
            f"one run a side cannot tell a slower machine from slower code; capture each side {MIN_GATE_RUNS} "
            f"times, interleaved (capture --ab A B --repeats {MIN_GATE_RUNS}, or folders of repeated captures "
            "run1/ run2/ run3/), or gate on counts and peaks only (syncs, memory)"
        )


def _amount(limit: str, key: str) -> float:
    lowered = limit.lower()
    units: dict[str, float] = {} if key in _PLAIN else (_BYTE_UNITS if key in _BYTES else _TIME_UNITS)
    for suffix in sorted(units, key=len, reverse=True):
        if lowered.endswith(suffix):
            value = float(lowered[: -len(suffix)]) * units[suffix]
            break
    else:
        value = float(lowered) * (1e6 if units is _TIME_UNITS else 1.0)  # a bare time is in ms
    if not math.isfinite(value) or value < 0:
        raise ValueError(limit)
    return value


def _phase_name(m: Measure) -> str:
    """A phase measure's phase, tracekit's own by its short name (``forward``)."""
    return m.key.removeprefix("phase:").removeprefix(PHASE_PREFIX)


def _find(comparison: Comparison, key: str) -> Measure | None:
    for m in (comparison.step, *comparison.measures, *comparison.phases):
        if m.key == key:
            return m
    if key.startswith("phase:"):  # tracekit's own phases by their short name
        for m in comparison.phases:
            if _phase_name(m) == key.removeprefix("phase:"):
                return m
    return None


def _decide(spec: GateSpec, m: Measure, *, a: float, delta: float) -> GateResult:
    """One condition on a measure measured on both sides (A's value ``a``, B - A ``delta``)."""
    worse = -delta if m.lower_is_better is False else delta
    limit = spec.amount if spec.pct is None else abs(a) * spec.pct / 100.0
    assert limit is not None
    noisy = m.ci is not None and m.unit is not Unit.COUNT  # counts are compared as they are
    beyond = m.change is Change.SLOWER if noisy else worse > 0
    failed = beyond and worse > limit
    if failed:
        outcome = GateOutcome.REGRESSED
    elif beyond:
        outcome = GateOutcome.WITHIN_LIMIT
    elif noisy and m.change is Change.WITHIN_NOISE:
        outcome = GateOutcome.WITHIN_NOISE
    else:
        outcome = GateOutcome.NO_REGRESSION
    return GateResult(
        spec=spec.text,
        key=spec.key,
        unit=m.unit,
        peak_of=m.peak_of,
        limit_pct=spec.pct,
        limit=rounded(limit) or 0.0,
        delta=delta,
        delta_pct=m.delta_pct,
        ci=m.ci,
        outcome=outcome,
        failed=failed,
    )


def evaluate_gate(comparison: Comparison, specs: Sequence[str]) -> Comparison:
    """``comparison`` with the result of each ``--fail-if`` condition (B against the baseline A).

    A time (step, phase, exposed comm, throughput) fails only when its change is beyond noise
    (*slower*) and larger than the limit; a count or a peak fails when B exceeds A by more than
    the limit. A condition on something not measured on both sides is bad input.
    """
    results = []
    for text in specs:
        spec = parse_gate(text)
        m = _find(comparison, spec.key)
        if m is None or m.a is None or m.b is None or m.delta is None:
            what = spec.key.removeprefix("phase:") if spec.key.startswith("phase:") else spec.metric
            phases = ", ".join(_phase_name(p) for p in comparison.phases) or "none"
            extra = f" (phases: {phases})" if spec.key.startswith("phase:") else ""
            raise InputError(f"--fail-if {text!r}: {what} is not measured on both runs{extra}")
        results.append(_decide(spec, m, a=m.a, delta=m.delta))
    return msgspec.structs.replace(comparison, gate=results)
