"""Advice follows the cause it is given for and the run it is given to."""

from __future__ import annotations

import msgspec
import pytest

from tests.analyzers.test_caveats import summary
from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.reports.advice import RunTraits
from tracekit.reports.sentences import recommendations, title, write_analysis, write_verdict
from tracekit.results.analysis import Evidence, Finding, OpLatency, StragglerEvidence, Verdict
from tracekit.results.vocab import BoundKind, Confidence, MeasuredOn, NoteKind, Parallelism, StragglerCause

GPU_NCCL = RunTraits(gpu=True, gpu_collectives=True)
CPU_GLOO = RunTraits(gpu=False, gpu_collectives=False)
GPU_GLOO = RunTraits(gpu=True, gpu_collectives=False)


def verdict(bound: BoundKind, *, stragglers: tuple[StragglerEvidence, ...] = (), gpu: bool = True) -> Verdict:
    primary = Finding(bound=bound, share_pct=55.0, confidence=Confidence.MEDIUM, straggler_rank=3)
    evidence = Evidence(steps_per_rank=3, stragglers=list(stragglers), has_collectives=True)
    measured_on = MeasuredOn.GPU if gpu else MeasuredOn.HOST
    return Verdict(measured_on=measured_on, primary=primary, secondary=[], costs=[], evidence=evidence)


def advice(v: Verdict, traits: RunTraits | None = None, finding: Finding | None = None) -> str:
    """Every recommendation for ``finding`` (the primary by default), as one text."""
    return "\n".join(recommendations(finding or v.primary, v, traits=traits))


def straggler(cause: StragglerCause, phase: str | None) -> StragglerEvidence:
    return StragglerEvidence(
        rank=3,
        times_last=4,
        instances=4,
        caused_wait_per_step_ns=4e6,
        score=0.3,
        cause=cause,
        phase=phase,
        cause_excess_ns=4e6 if phase or cause is StragglerCause.LATE_START else 0.0,
    )


DATA_ADVICE = "DataLoader more workers"


@pytest.mark.parametrize(
    ("phase", "shown"),
    [
        ("tracekit.phase/forward", "forward"),  # tracekit's own range, named as in the phase table
        ("DistributedDataParallel.forward", "DistributedDataParallel.forward"),
        ("backward", "backward"),
    ],
)
def test_a_straggler_late_in_a_compute_phase_gets_compute_advice(phase: str, shown: str) -> None:
    v = verdict(BoundKind.STRAGGLER, stragglers=(straggler(StragglerCause.PHASE, phase),))
    text = advice(v, GPU_NCCL)
    assert text.startswith(f"Rank 3: its {shown} takes 4.00 ms longer per step")
    assert "throttling" in text and "nvidia-smi" in text and "per-rank batch" in text
    assert DATA_ADVICE not in text and "num_workers" not in text


def test_a_straggler_late_in_its_data_phase_gets_data_advice() -> None:
    phase = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    text = advice(verdict(BoundKind.STRAGGLER, stragglers=(straggler(StragglerCause.DATA_PHASE, phase),)), GPU_NCCL)
    assert DATA_ADVICE in text and "storage" in text
    assert "throttling" not in text and "nvidia-smi" not in text


def test_a_late_step_start_gets_advice_about_what_runs_before_the_step() -> None:
    text = advice(verdict(BoundKind.STRAGGLER, stragglers=(straggler(StragglerCause.LATE_START, None),)), GPU_NCCL)
    assert "starts its steps 4.00 ms later" in text
    assert "before the step" in text and "checkpointing" in text
    assert DATA_ADVICE not in text and "throttling" not in text


def test_a_cpu_straggler_gets_no_nvidia_smi() -> None:
    v = verdict(BoundKind.STRAGGLER, stragglers=(straggler(StragglerCause.PHASE, "forward"),), gpu=False)
    for traits in (CPU_GLOO, None):  # None: what the verdict tells (measured on the host)
        text = advice(v, traits)
        assert "nvidia-smi" not in text and "GPU" not in text
        assert "other processes on its cores" in text


@pytest.mark.parametrize("traits", [CPU_GLOO, GPU_GLOO])
def test_collectives_on_the_host_get_no_nccl_advice(traits: RunTraits) -> None:
    text = advice(verdict(BoundKind.COMMS, gpu=traits.gpu), traits)
    assert "NCCL" not in text and "NVLink" not in text and "nvidia-smi" not in text
    assert "GLOO_SOCKET_IFNAME" in text


def _cores_shared(v: Verdict, ranks: int = 8, cores: int = 2) -> Verdict:
    note = Finding(
        note=NoteKind.RANKS_OVER_CORES, confidence=Confidence.HIGH, value=float(ranks), values=[float(cores)]
    )
    return msgspec.structs.replace(v, secondary=[note])


def test_host_collectives_of_ranks_that_shared_the_cores_get_a_core_each_first() -> None:
    """8 gloo ranks on 2 cores: a collective waits at each hop for a rank not scheduled, which no
    DDP setting removes; one rank per core comes first, the wrapper's knobs after it."""
    v = _cores_shared(verdict(BoundKind.COMMS, gpu=False))
    traits = RunTraits.of_verdict(v)
    assert traits.cores_shared == (8, 2)
    recs = recommendations(v.primary, v, traits=traits)
    assert recs[0].startswith("Run at most one rank per core and measure again: 8 ranks shared 2 CPU cores")
    assert any("bucket_cap_mb" in r for r in recs[1:]) and "GLOO_SOCKET_IFNAME" in recs[-1]
    assert sum("one rank per core" in r or "cores of its own" in r for r in recs) == 1  # said once
    # the same run with its cores to itself: the wrapper's knobs first, the host's last
    alone = recommendations(v.primary, v, traits=CPU_GLOO)
    assert "bucket_cap_mb" in alone[0] and "cores of its own" in alone[-1]


def test_nccl_collectives_of_ranks_that_shared_the_cores_keep_their_advice() -> None:
    """Collectives on the GPU do not wait for the host's scheduler at each hop: the cores shared
    change nothing of the communication advice (the ranks-over-cores note says the rest)."""
    v = _cores_shared(verdict(BoundKind.COMMS))
    shared = recommendations(v.primary, v, traits=RunTraits(gpu=True, gpu_collectives=True, cores_shared=(8, 2)))
    assert shared == recommendations(v.primary, v, traits=GPU_NCCL)


def _with_ops(v: Verdict, *ops: tuple[str, int | None]) -> Verdict:
    listed = [OpLatency(op=op, count=4, floor_ns=None, mean_wait_ns=None, time_ns=t) for op, t in ops]
    return msgspec.structs.replace(v, evidence=msgspec.structs.replace(v.evidence, ops=listed))


@pytest.mark.parametrize(
    ("ops", "first"),
    [
        # an all-to-all (NCCL's SendRecv kernels) over half the collectives' time: it leads
        ((("SendRecv", 4_000_000), ("AllReduce", 1_800_000)), "69% of the collectives' time is SendRecv"),
        ((("all_to_all", 3_000_000), ("send", 1_000_000), ("all_reduce", 1_000_000)), "is all_to_all and send"),
        # the gradient all-reduce is most of it, or nothing says how long each takes: the wrapper's knobs
        ((("SendRecv", 1_000_000), ("AllReduce", 1_800_000)), None),
        ((("SendRecv", None), ("AllReduce", None)), None),
    ],
)
def test_an_exchange_that_takes_most_of_the_collectives_time_leads_their_advice(
    ops: tuple[tuple[str, int | None], ...], first: str | None
) -> None:
    v = _with_ops(verdict(BoundKind.COMMS), *ops)
    recs = recommendations(v.primary, v, traits=GPU_NCCL)
    if first is None:
        assert v.evidence.exchange() is None and "bucket_cap_mb" in recs[0]
        return
    assert recs[0].startswith("Overlap the exchange with compute and send less: ") and first in recs[0]
    assert "bucket_cap_mb" in recs[1] and "NCCL_DEBUG=INFO" in recs[-1]  # the reduction's knobs still follow


def test_nccl_collectives_get_interconnect_advice() -> None:
    assert "NCCL_DEBUG=INFO" in advice(verdict(BoundKind.COMMS), GPU_NCCL)


def test_a_mixed_verdict_gives_each_component_this_run_s_advice() -> None:
    v = verdict(BoundKind.MIXED)
    v = msgspec.structs.replace(
        v, primary=msgspec.structs.replace(v.primary, components=[BoundKind.COMMS, BoundKind.DATA])
    )
    fsdp = advice(v, RunTraits(gpu=True, gpu_collectives=True, parallelism=Parallelism.FSDP))
    assert "all-gather" in fsdp and "bucket_cap_mb" not in fsdp


@pytest.mark.parametrize(
    ("kind", "own", "foreign"),
    [
        (Parallelism.FSDP, ("forward_prefetch", "reshard_after_forward", "limit_all_gathers", "HYBRID_SHARD"), ()),
        (Parallelism.ZERO, ("overlap_comm", "contiguous_gradients", "reduce_bucket_size", "ZeRO-2"), ()),
        (Parallelism.DDP, ("bucket_cap_mb", "find_unused_parameters", "no_sync()"), ("reshard", "overlap_comm")),
        # no wrapper shows: the collectives are called directly; what DDP would do is an example
        (None, ("async_op=True", "coalesce", "bucket_cap_mb"), ("reshard", "overlap_comm", "Tune DDP")),
    ],
)
def test_communication_advice_follows_how_the_run_is_data_parallel(
    kind: Parallelism | None, own: tuple[str, ...], foreign: tuple[str, ...]
) -> None:
    text = advice(verdict(BoundKind.COMMS), RunTraits(gpu=True, gpu_collectives=True, parallelism=kind))
    for knob in own:
        assert knob in text, knob
    for knob in foreign:
        assert knob not in text, knob
    assert "FSDP/ZeRO sharding" not in text  # sharding sends more, not less
    if kind in (Parallelism.FSDP, Parallelism.ZERO):
        assert "bucket_cap_mb" not in text and "DDP" not in text


@pytest.mark.parametrize(
    ("kind", "expected"),
    [(Parallelism.FSDP, "set_modules_to_forward_prefetch"), (Parallelism.ZERO, "overlap_comm=True")],
)
def test_low_overlap_advice_follows_how_the_run_is_data_parallel(kind: Parallelism, expected: str) -> None:
    v = verdict(BoundKind.GPU_COMPUTE)
    note = Finding(note=NoteKind.LOW_OVERLAP, confidence=Confidence.MEDIUM, value=20.0, values=[20.0])
    text = advice(v, RunTraits(parallelism=kind), note)
    assert expected in text and "DDP" not in text


def test_the_traits_of_an_analysed_run() -> None:
    # kernels alone, and no operator of PyTorch's: not a PyTorch program
    gpu_nccl = analyze(make_run([ev("kernel", "ncclDevKernel_AllReduce_Sum_f32", 0, 10, stream=20)]))
    one = {"ranks": 1, "pace_ranks": (0,)}
    expected = RunTraits(gpu=True, gpu_collectives=True, pytorch=False, **one)  # type: ignore[arg-type]
    assert RunTraits.of(gpu_nccl) == expected
    gpu_only = analyze(make_run([ev("kernel", "gemm", 0, 10), ev("cpu_op", "aten::mm", 0, 5)]))
    assert RunTraits.of(gpu_only) == RunTraits(gpu=True, gpu_collectives=False, **one)  # type: ignore[arg-type]
    cpu = analyze(make_run([ev("cpu_op", "gloo:all_reduce", 0, 10), ev("annotation", "FSDP::pre_forward (m)", 0, 5)]))
    expected = RunTraits(gpu=False, gpu_collectives=False, parallelism=Parallelism.FSDP, pytorch=False, **one)  # type: ignore[arg-type]
    assert RunTraits.of(cpu) == expected


def test_the_notes_of_a_run_without_communication_and_of_ranks_over_cores() -> None:
    no_comm = Finding(note=NoteKind.NO_COMMUNICATION, confidence=Confidence.HIGH, value=16.0, values=[80.0])
    cores = Finding(note=NoteKind.RANKS_OVER_CORES, confidence=Confidence.HIGH, value=8.0, values=[2.0])
    v = msgspec.structs.replace(verdict(BoundKind.GPU_COMPUTE), secondary=[no_comm, cores])
    written = write_verdict(v)
    comm, over = written.secondary
    assert comm.title == "Distributed, yet no communication was recognized: the verdict's confidence is lowered"
    assert comm.evidence == (
        "world size 16, 80 host-side collective ops, yet no GPU kernel was recognized as communication: its "
        "collectives read as compute or idle, so every share above may be off by the communication time",
    )
    assert "--comm-kernel REGEX" in comm.recommendations[0]
    assert over.title == title(cores, v) == "More ranks than cores: 8 ranks ran on 2 CPU cores"
    assert over.evidence[0].startswith("8 ranks on 2 CPU cores (the capture's environment)")
    assert "one rank per core" in over.recommendations[0]


def test_a_capture_with_more_ranks_than_cores_says_so_in_every_report() -> None:
    from tracekit.analyzers.caveats import with_capture
    from tracekit.reports import renderer

    analysis = analyze(make_run([ev("step", "ProfilerStep#1", 0, 10_000_000), ev("cpu_op", "aten::mm", 1, 9_000_000)]))
    capture = summary({"nproc": 8}, {"world_size": 8, "cpu_count": 2, "distributed_type": "MULTI_CPU"})
    done = with_capture(msgspec.structs.replace(analysis, capture=capture))
    assert any(w.title.startswith("More ranks than cores") for w in write_analysis(done).secondary)
    for fmt in ("terminal", "md", "html"):
        assert "More ranks than cores: 8 ranks ran on 2 CPU cores" in renderer(fmt).render(done), fmt
    assert '"ranks-over-cores"' in renderer("json").render(done)


def test_copies_from_pageable_memory_get_pinning_first() -> None:
    # a run whose top device activity is a pageable host-to-device copy: each blocks the host,
    # so pinning the batches comes before "copy less"
    pageable = analyze(
        make_run([ev("memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 50), ev("kernel", "gemm", 50, 60)])
    )
    assert RunTraits.of(pageable).pageable_copies
    pinned = analyze(make_run([ev("memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 50), ev("kernel", "gemm", 50, 60)]))
    assert not RunTraits.of(pinned).pageable_copies
    v = verdict(BoundKind.TRANSFER)
    first = recommendations(v.primary, v, traits=RunTraits(pageable_copies=True))[0]
    assert first.startswith("Pin the batches") and "pin_memory=True" in first and "non_blocking=True" in first
    assert "pin_memory=True" not in recommendations(v.primary, v, traits=RunTraits())[0]
    # a program that is not PyTorch: pinned host buffers, in CUDA's words
    plain = msgspec.structs.replace(v, evidence=msgspec.structs.replace(v.evidence, pytorch=False))
    cuda = recommendations(plain.primary, plain, traits=RunTraits(pageable_copies=True))[0]
    assert "cudaMallocHost" in cuda and "DataLoader" not in cuda
