"""Comparisons of two runs built by hand, with numbers worked out by hand, for the renderer tests.

- :func:`slower`: 8 GPU ranks, B's forward takes 5 ms more per step (40.50 -> 45.52 ms), a kernel
  appeared, a step count and a capture config that differ, a gate that fails;
- :func:`within_noise`: the same run twice (+0.03 ms, interval holds zero);
- :func:`sync_gone`: B no longer syncs in forward (aten::is_nonzero, 1 per step -> 0), and the bound
  moved from sync to GPU compute;
- :func:`no_steps`: a trace without steps: compared per second of trace, no step time.
"""

from __future__ import annotations

import msgspec

from tracekit.results.analysis import Finding
from tracekit.results.compare import (
    Comparison,
    CostShift,
    Distribution,
    GateResult,
    Interval,
    Measure,
    NoiseModel,
    RunDifference,
    Side,
    SyncComparison,
    VerdictComparison,
    WorkChange,
)
from tracekit.results.vocab import (
    BoundKind,
    Change,
    Confidence,
    GateOutcome,
    MeasuredOn,
    MeasureNote,
    NoiseMethod,
    PeakSource,
    SyncMeasure,
    Unit,
    WarningKind,
    WorkKind,
)

MS = 1e6


def noise(unit: str = "step") -> NoiseModel:
    return NoiseModel(
        method=NoiseMethod.STEPS,
        level=0.95,
        resamples=2000,
        threshold_pct=1.0,
        unit=unit,
        seed=0,
    )


def side(label: str, *, steps: int = 40, ranks: int = 8, measured_on: MeasuredOn = MeasuredOn.GPU) -> Side:
    return Side(
        label=label,
        sources=[f"runs/{label.lower()}/rank{r}.pt.trace.json.gz" for r in range(ranks)],
        world_size=ranks,
        ranks=list(range(ranks)),
        devices=["NVIDIA H100 80GB HBM3"],
        backend="nccl",
        measured_on=measured_on,
        steps=steps,
        step_source="ProfilerStep#N" if steps else None,
        workload="llama-1b" if steps else None,
        batch_size=8 if steps else None,
        tracekit_version="0.4.0",
    )


def time(key: str, a: float, b: float, half: float, change: Change, **kw: object) -> Measure:
    """A time per step in ms: A, B, and a symmetric interval of ± ``half`` ms around the change."""
    delta = (b - a) * MS
    fields: dict[str, object] = {
        "key": key,
        "unit": Unit.NS,
        "lower_is_better": True,
        "a": a * MS,
        "b": b * MS,
        "a_median": a * MS,
        "b_median": b * MS,
        "delta": delta,
        "delta_pct": 100 * (b - a) / a,
        "ci": Interval(low=delta - half * MS, high=delta + half * MS, level=0.95),
        "n_a": 40,
        "n_b": 40,
        "change": change,
        **kw,
    }
    return Measure(**fields)  # type: ignore[arg-type]


def distributions(a_ms: float, b_ms: float, ranks: int = 2) -> list[Distribution]:
    out = []
    for s, mean in (("a", a_ms), ("b", b_ms)):
        values = [(mean + 0.1 * ((i * 7) % 5 - 2)) * MS for i in range(40)]
        out.append(Distribution(side=s, count=40, mean_ns=mean * MS, median_ns=mean * MS, values_ns=values))
        out += [
            Distribution(side=s, rank=r, count=40, mean_ns=mean * MS, values_ns=[v + r * 0.05 * MS for v in values])
            for r in range(ranks)
        ]
    return out


def finding(bound: BoundKind, share: float) -> Finding:
    return Finding(bound=bound, share_pct=share, confidence=Confidence.HIGH, threshold_pct=50.0, margin=2.1)


def verdicts(a: Finding, b: Finding, **kw: object) -> VerdictComparison:
    return VerdictComparison(
        a=a,
        b=b,
        a_measured_on=MeasuredOn.GPU,
        b_measured_on=MeasuredOn.GPU,
        same_bound=a.bound == b.bound,
        costs=[
            CostShift(bound="gpu-compute-bound", a_pct=62.0, b_pct=65.5, delta_pct=3.5),
            CostShift(bound="comms-bound", a_pct=12.0, b_pct=10.7, delta_pct=-1.3),
        ],
    )


def no_syncs() -> SyncComparison:
    return SyncComparison(measure=SyncMeasure.SYNC_CALLS, a_per_step=0.0, b_per_step=0.0, delta=0.0)


def slower() -> Comparison:
    step = time("step", 40.50, 45.52, 0.31, Change.SLOWER, step_pct=12.4, detectable=0.21 * MS)
    step = msgspec.structs.replace(step, delta_pct=12.4)
    return Comparison(
        tracekit_version="0.4.0",
        a=side("A"),
        b=side("B"),
        noise=noise(),
        step=step,
        measures=[
            time("exposed_comm", 4.45, 4.50, 0.03, Change.SLOWER),
            Measure(
                key="throughput",
                unit=Unit.SAMPLES_PER_S,
                lower_is_better=False,
                a=24.69,
                b=21.97,
                delta=-2.72,
                delta_pct=-11.0,
                ci=Interval(low=-2.9, high=-2.55, level=0.95),
                change=Change.SLOWER,
            ),
            Measure(
                key="peak_memory",
                unit=Unit.BYTES,
                peak_of=PeakSource.COUNTERS,
                a=30.5 * 2**30,
                b=31.0 * 2**30,
                delta=0.5 * 2**30,
                delta_pct=1.64,
                change=Change.HIGHER,
                note=MeasureNote.ONCE_PER_RUN,
            ),
            Measure(
                key="compute_pct",
                unit=Unit.PCT,
                a=62.0,
                b=65.5,
                delta=3.5,
                delta_pct=5.6,
                change=Change.HIGHER,
            ),
            Measure(key="syncs", unit=Unit.COUNT, a=812.0, b=845.0, delta=33.0, change=Change.HIGHER),
        ],
        per_rank=[time(f"rank:{r}", 40.4 + 0.02 * r, 45.4 + 0.03 * r, 0.35, Change.SLOWER, rank=r) for r in range(8)],
        phases=[
            time("phase:forward", 12.0, 17.0, 0.05, Change.SLOWER, step_pct=12.35),
            time("phase:backward", 24.0, 24.01, 0.08, Change.WITHIN_NOISE, step_pct=0.02),
            time("phase:optimizer", 4.5, 4.51, 0.02, Change.WITHIN_NOISE, step_pct=0.02),
        ],
        distributions=distributions(40.50, 45.52),
        work=[
            WorkChange(
                kind=WorkKind.KERNEL,
                name="flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>",
                category="compute",
                b_count=24.0,
                b_ns=4.2 * MS,
                delta_count=24.0,
                delta_ns=4.2 * MS,
                change=Change.APPEARED,
            ),
            WorkChange(
                kind=WorkKind.KERNEL,
                name="ampere_sgemm_128x64_tn",
                category="compute",
                a_count=96.0,
                b_count=96.0,
                a_ns=8.1 * MS,
                b_ns=8.9 * MS,
                delta_ns=0.8 * MS,
                change=Change.SLOWER,
            ),
            WorkChange(
                kind=WorkKind.HOST_OP,
                name="aten::scaled_dot_product_attention",
                a_count=24.0,
                a_ns=0.4 * MS,
                delta_count=-24.0,
                delta_ns=-0.4 * MS,
                change=Change.DISAPPEARED,
            ),
        ],
        syncs=SyncComparison(
            measure=SyncMeasure.SYNC_CALLS,
            a_per_step=1.0,
            b_per_step=1.0,
            delta=0.0,
            sources=[
                WorkChange(
                    kind=WorkKind.SYNC,
                    name="aten::item",
                    phase="optimizer",
                    sync_kind="sync",
                    a_count=1.0,
                    b_count=1.0,
                    a_ns=0.05 * MS,
                    b_ns=0.05 * MS,
                    change=Change.SAME,
                )
            ],
        ),
        verdicts=verdicts(finding(BoundKind.GPU_COMPUTE, 62.0), finding(BoundKind.GPU_COMPUTE, 65.5)),
        warnings=[
            RunDifference(kind=WarningKind.STEP_COUNT, a=320, b=120),
            RunDifference(kind=WarningKind.CONFIG, keys=["workload_args.seq_len"]),
        ],
        gate=[
            GateResult(
                spec="slower:2%",
                key="step",
                unit=Unit.NS,
                limit_pct=2.0,
                limit=0.81 * MS,
                delta=5.02 * MS,
                delta_pct=12.4,
                ci=Interval(low=4.71 * MS, high=5.33 * MS, level=0.95),
                outcome=GateOutcome.REGRESSED,
                failed=True,
            ),
            GateResult(
                spec="syncs:+1",
                key="syncs",
                unit=Unit.COUNT,
                limit=1.0,
                delta=0.0,
                delta_pct=0.0,
                outcome=GateOutcome.NO_REGRESSION,
                failed=False,
            ),
        ],
    )


def within_noise() -> Comparison:
    c = slower()
    step = time("step", 40.50, 40.53, 0.11, Change.WITHIN_NOISE, detectable=0.21 * MS)
    step = msgspec.structs.replace(step, ci=Interval(low=-0.08 * MS, high=0.14 * MS, level=0.95), delta_pct=0.074)
    return msgspec.structs.replace(
        c,
        step=step,
        phases=[time("phase:forward", 12.0, 12.01, 0.05, Change.WITHIN_NOISE, step_pct=0.02)],
        distributions=distributions(40.50, 40.53),
        work=[],
        gate=[],
        verdicts=verdicts(finding(BoundKind.GPU_COMPUTE, 62.0), finding(BoundKind.GPU_COMPUTE, 62.1)),
    )


def sync_gone() -> Comparison:
    c = slower()
    step = time("step", 45.0, 41.0, 0.2, Change.FASTER)
    source = WorkChange(
        kind=WorkKind.SYNC,
        name="aten::is_nonzero",
        phase="forward",
        sync_kind="sync",
        a_count=1.0,
        a_ns=3.9 * MS,
        delta_count=-1.0,
        delta_ns=-3.9 * MS,
        change=Change.DISAPPEARED,
    )
    return msgspec.structs.replace(
        c,
        step=step,
        phases=[time("phase:forward", 16.0, 12.0, 0.1, Change.FASTER, step_pct=-8.89)],
        distributions=distributions(45.0, 41.0),
        work=[source],
        syncs=SyncComparison(
            measure=SyncMeasure.SYNC_CALLS, a_per_step=1.0, b_per_step=0.0, delta=-1.0, sources=[source]
        ),
        verdicts=verdicts(finding(BoundKind.SYNC, 31.0), finding(BoundKind.GPU_COMPUTE, 70.0)),
        gate=[],
    )


def no_steps() -> Comparison:
    """CPU-only traces without steps: work per second of trace, no step time, nothing per phase."""
    return Comparison(
        tracekit_version="0.4.0",
        a=msgspec.structs.replace(side("A", steps=0, ranks=1, measured_on=MeasuredOn.HOST), devices=[], backend=None),
        b=msgspec.structs.replace(side("B", steps=0, ranks=1, measured_on=MeasuredOn.HOST), devices=[], backend=None),
        noise=noise("second"),
        step=Measure(key="step", unit=Unit.NS, change=Change.NOT_MEASURED, note=MeasureNote.NEITHER_SIDE),
        work=[
            WorkChange(
                kind=WorkKind.HOST_OP,
                name="aten::addmm",
                a_count=120.0,
                b_count=180.0,
                a_ns=210.0 * MS,
                b_ns=320.0 * MS,
                delta_count=60.0,
                delta_ns=110.0 * MS,
                change=Change.HIGHER,
            )
        ],
        syncs=SyncComparison(measure=SyncMeasure.HOST_READS, a_per_step=2.0, b_per_step=2.0),
        verdicts=VerdictComparison(
            a=finding(BoundKind.COMPUTE, 80.0),
            b=finding(BoundKind.COMPUTE, 81.0),
            a_measured_on=MeasuredOn.HOST,
            b_measured_on=MeasuredOn.HOST,
            same_bound=True,
        ),
        warnings=[RunDifference(kind=WarningKind.NO_STEPS, a=0, b=0)],
    )


CASES = {"slower": slower, "within_noise": within_noise, "sync_gone": sync_gone, "no_steps": no_steps}
