"""Caveats: a distributed GPU run with no recognized communication, ranks over cores."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from tests.factories import ev, make_run, training_loop
from tracekit.analyzers import analyze
from tracekit.analyzers.caveats import (
    Caveat,
    is_host_backend,
    lower,
    lowered,
    no_communication,
    ranks_over_cores,
    with_capture,
)
from tracekit.model import Run
from tracekit.results.analysis import Finding
from tracekit.results.capture import CaptureSummary, StepStats, Throughput
from tracekit.results.vocab import BoundKind, Confidence, NoteKind, Parallelism


def facts(**overrides: Any) -> Caveat | None:
    """:func:`no_communication` of a 2-rank NCCL GPU run without collective kernels, with ``overrides``."""
    args: dict[str, Any] = {
        "world_size": 2,
        "backend": "nccl",
        "has_gpu": True,
        "comm_kernels": 0,
        "host_comm": 3,
    } | overrides
    return no_communication(**args)


def test_a_distributed_gpu_run_without_communication_kernels_is_a_caveat() -> None:
    caveat = facts()
    assert caveat is not None and caveat.lowers == 1
    assert caveat.finding == Finding(
        note=NoteKind.NO_COMMUNICATION, confidence=Confidence.HIGH, value=2.0, values=[3.0]
    )


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"comm_kernels": 1}, "a kernel was recognized"),
        ({"has_gpu": False}, "no device to miss kernels on"),
        ({"backend": "gloo"}, "gloo runs collectives on the host"),
        ({"backend": "mpi"}, "so does MPI"),
        ({"world_size": 1}, "a group of one: NCCL copies locally"),
        ({"world_size": None, "host_comm": 0}, "nothing says the run is distributed"),
    ],
)
def test_no_caveat(overrides: dict[str, Any], why: str) -> None:
    assert facts(**overrides) is None, why


def test_unknown_world_size_with_host_collectives_is_distributed() -> None:
    caveat = facts(world_size=None, host_comm=5)
    assert caveat is not None
    assert (caveat.finding.value, caveat.finding.values) == (None, [5.0])


def test_a_gpu_backend_beside_gloo_still_expects_kernels() -> None:
    assert (is_host_backend("gloo"), is_host_backend("gloo,mpi"), is_host_backend("gloo,nccl")) == (True, True, False)
    assert (is_host_backend(None), is_host_backend("")) == (False, False)
    assert facts(backend="gloo,nccl") is not None


def test_confidence_drops_one_level_never_below_low() -> None:
    assert [lower(c) for c in Confidence] == [Confidence.MEDIUM, Confidence.LOW, Confidence.LOW]
    assert lower(Confidence.HIGH, 2) is Confidence.LOW
    primary = Finding(bound=BoundKind.LAUNCH, confidence=Confidence.HIGH, share_pct=40.0)
    caveat = facts()
    assert lowered(primary, caveat) == msgspec.structs.replace(primary, confidence=Confidence.MEDIUM)
    assert lowered(primary, None) is primary


def with_backend(run: Run, backend: str) -> Run:
    return dataclasses.replace(run, ranks=tuple(dataclasses.replace(r, backend=backend) for r in run.ranks))


def compute_bound() -> list[dict[str, Any]]:
    """5 steps of 2 ms, each a 2 ms kernel but for 11 ns: compute-bound beyond doubt."""
    return training_loop([2_000_000] * 5, markers="ProfilerStep#{}")


def test_the_verdict_of_a_distributed_run_without_communication_is_less_sure_and_says_why() -> None:
    baseline = analyze(make_run(compute_bound(), world_size=1)).verdict
    verdict = analyze(with_backend(make_run(compute_bound(), world_size=2), "nccl")).verdict
    assert baseline.primary.bound == verdict.primary.bound
    assert baseline.primary.confidence is not Confidence.LOW, "the fixture must leave a level to drop"
    assert verdict.primary.confidence is lower(baseline.primary.confidence)
    (note,) = [f for f in verdict.secondary if f.note is NoteKind.NO_COMMUNICATION]
    assert (note.value, note.values) == (2.0, [0.0])
    assert not any(f.note is NoteKind.NO_COMMUNICATION for f in baseline.secondary)


def test_recognized_communication_or_a_host_backend_keeps_the_verdict() -> None:
    nccl = ev("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 200, stream=20)
    with_nccl = analyze(with_backend(make_run([*compute_bound(), nccl], world_size=2), "nccl")).verdict
    on_gloo = analyze(with_backend(make_run(compute_bound(), world_size=2), "gloo")).verdict
    for verdict in (with_nccl, on_gloo):
        assert not any(f.note is NoteKind.NO_COMMUNICATION for f in verdict.secondary)


def summary(config: dict[str, Any] | None, environment: dict[str, Any] | None) -> CaptureSummary:
    return CaptureSummary(
        config=config,
        environment=environment,
        world_size=8,
        ranks=list(range(8)),
        measured_steps=3,
        step=StepStats(),
        phases=[],
        per_rank=[],
        throughput=Throughput(),
    )


def test_ranks_over_cores() -> None:
    over = ranks_over_cores(summary({"nproc": 8}, {"world_size": 8, "cpu_count": 2}))
    assert over == Finding(note=NoteKind.RANKS_OVER_CORES, confidence=Confidence.HIGH, value=8.0, values=[2.0])
    # the world size stands in for nproc (a summary written by the user's own loop has no config)
    assert ranks_over_cores(summary(None, {"world_size": 4, "cpu_count": 2})) is not None
    assert ranks_over_cores(summary({"nproc": 2}, {"cpu_count": 2})) is None  # one core each
    assert ranks_over_cores(summary({"nproc": 8}, {"world_size": 8})) is None  # cores not recorded (before 1.4)
    assert ranks_over_cores(None) is None


def test_with_capture_adds_the_note_once_and_the_run_kind() -> None:
    analysis = analyze(make_run([ev("step", "ProfilerStep#1", 0, 10), ev("cpu_op", "aten::mm", 1, 5)]))
    assert analysis.run.parallelism is None
    capture = summary({"nproc": 8, "accelerate_config": "fsdp2"}, {"distributed_type": "MULTI_CPU", "cpu_count": 2})
    done = with_capture(msgspec.structs.replace(analysis, capture=capture))
    assert done.run.parallelism is Parallelism.FSDP
    assert [f.note for f in done.verdict.secondary].count(NoteKind.RANKS_OVER_CORES) == 1
    assert with_capture(done) == done
    assert with_capture(analysis) == analysis  # no capture: nothing to add


def test_with_capture_gives_the_world_size_the_traces_do_not_record() -> None:
    # a rank alone records no process group: its capture says how many ranks the run had
    analysis = analyze(make_run([ev("step", "ProfilerStep#1", 0, 10), ev("cpu_op", "aten::mm", 1, 5)]))
    unknown = msgspec.structs.replace(analysis, run=msgspec.structs.replace(analysis.run, world_size=None))
    capture = summary({"nproc": 8}, {"world_size": 8})
    assert with_capture(msgspec.structs.replace(unknown, capture=capture)).run.world_size == 8
    recorded = msgspec.structs.replace(analysis, run=msgspec.structs.replace(analysis.run, world_size=16))
    assert with_capture(msgspec.structs.replace(recorded, capture=capture)).run.world_size == 16  # the traces' own
