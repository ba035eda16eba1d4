"""What the doctor tries, from what the baseline found: knobs, code changes, budget, agreement."""

from __future__ import annotations

import msgspec
import pytest

from tracekit.capture.config import load_config
from tracekit.capture.doctor_plan import agreement, candidates, code_changes, findings, parse_budget
from tracekit.errors import InputError
from tracekit.results.analysis import (
    Evidence,
    Finding,
    MeasuredOn,
    OpLatency,
    StragglerEvidence,
    SyncSource,
    Verdict,
)
from tracekit.results.doctor import Agreement, Baseline, Knob, TrialMeasure
from tracekit.results.param_audit import ModuleParams, ParamAudit
from tracekit.results.vocab import BoundKind, Change, Confidence, MemoryNote, NoteKind, StragglerCause, SyncKind
from tracekit.results.worth import Gain


def gain(bound: BoundKind, expected: float | None, up_to: float) -> Gain:
    return Gain(bound=bound, step_ns=100e6, share_pct=up_to, gain_pct=expected)


def finding(
    bound: BoundKind | None = None, *, note: NoteKind | None = None, expected: float = 10.0, **kw: object
) -> Finding:
    g = gain(bound or BoundKind.SYNC, expected, expected + 2)
    return Finding(bound=bound, note=note, confidence=Confidence.HIGH, share_pct=expected + 2, gain=g, **kw)  # type: ignore[arg-type]


def baseline(
    *found: Finding, device: str = "cpu", memory: list[MemoryNote] | None = None, **evidence: object
) -> Baseline:
    verdict = Verdict(
        measured_on=next(iter(MeasuredOn)),
        primary=found[0],
        secondary=list(found[1:]),
        costs=[],
        evidence=Evidence(steps_per_rank=5, **evidence),  # type: ignore[arg-type]
    )
    return Baseline(
        folder="baseline",
        seconds=10.0,
        step_mean_ns=100e6,
        samples_per_s=1.0,
        device=device,
        verdict=verdict,
        memory=memory or [],
    )


def keys(
    config_overrides: dict[str, str], base: Baseline, *, cpus: int = 16, limit: int = 9, audit: ParamAudit | None = None
) -> list[str]:
    config = load_config(None, config_overrides)
    return [c.key for c in candidates(config, base, audit, cpus=cpus, limit=limit)]


def test_data_bound_without_workers_tries_a_share_of_the_cores_per_rank() -> None:
    data = baseline(finding(BoundKind.DATA, expected=60))
    assert keys({"nproc": "2"}, data, cpus=2) == ["num_workers=2"]  # at least 2
    assert keys({"nproc": "2"}, data, cpus=12) == ["num_workers=6"]
    assert keys({"nproc": "1"}, data, cpus=96) == ["num_workers=8"]  # at most 8
    # on a GPU, pinning follows
    assert keys({"nproc": "8"}, baseline(finding(BoundKind.DATA), device="cuda"), cpus=96) == [
        "num_workers=8",
        "pin_memory=true",
    ]


def test_data_bound_with_workers_doubles_them_then_keeps_them_and_prefetches_deeper() -> None:
    data = baseline(finding(BoundKind.DATA))
    assert keys({"num_workers": "3"}, data) == ["num_workers=6", "persistent_workers=true", "prefetch_factor=4"]
    done = {"num_workers": "3", "persistent_workers": "true", "prefetch_factor": "4"}
    assert keys(done, data) == ["num_workers=6"]


def test_first_knobs_of_every_finding_come_before_second_ones_largest_gain_first() -> None:
    both = baseline(finding(BoundKind.DATA, expected=20), finding(BoundKind.LAUNCH, expected=40))
    assert keys({"num_workers": "2"}, both) == [
        "optimizer_impl=fused",  # launch: the larger expected gain
        "num_workers=4",
        "persistent_workers=true",
        "prefetch_factor=4",
    ]
    assert keys({"num_workers": "2"}, both, limit=2) == ["optimizer_impl=fused", "num_workers=4"]


def test_comms_knobs_need_ddp_and_follow_the_overlap() -> None:
    comms = baseline(finding(BoundKind.COMMS, expected=30))
    assert keys({"nproc": "4"}, comms) == [
        "ddp_bucket_cap_mb=100",
        "ddp_comm_hook=fp16",
        "ddp_gradient_as_bucket_view=true",
    ]
    hidden_little = baseline(finding(BoundKind.COMMS, expected=30), finding(note=NoteKind.LOW_OVERLAP, expected=8))
    assert keys({"nproc": "4", "ddp_bucket_cap_mb": "40"}, hidden_little)[0] == "ddp_bucket_cap_mb=10"
    assert keys({"nproc": "1"}, comms) == []  # no DDP on one rank
    assert keys({"nproc": "4", "accelerate_config": "fsdp"}, comms) == []


def test_comms_of_an_exchange_try_no_bucket_knob_and_stay_a_code_change() -> None:
    """An all-to-all that takes 69% of the collectives' time (PARAM's DLRM ranks): DDP's buckets
    and hooks tune the gradient all-reduce, not the exchange: no trial, and the finding is listed
    among the changes of code, with its gain."""
    ops = [
        OpLatency(op="SendRecv", count=5, floor_ns=None, mean_wait_ns=None, time_ns=4_000_000),
        OpLatency(op="AllReduce", count=3, floor_ns=None, mean_wait_ns=None, time_ns=1_800_000),
    ]
    comms = baseline(finding(BoundKind.COMMS, expected=30), finding(note=NoteKind.LOW_OVERLAP, expected=8), ops=ops)
    config = load_config(None, {"nproc": "4"})
    tried = candidates(config, comms, None, cpus=16, limit=9)
    assert tried == []
    changes = [(c.bound, c.note) for c in code_changes(comms, tried)]
    assert changes == [(BoundKind.COMMS, None), (None, NoteKind.LOW_OVERLAP)]


def test_gpu_compute_tries_bf16_then_a_fused_optimizer() -> None:
    compute = baseline(finding(BoundKind.GPU_COMPUTE, expected=50), device="cuda")
    assert keys({}, compute) == ["mixed_precision=bf16", "optimizer_impl=fused"]
    assert keys({"mixed_precision": "bf16", "optimizer_impl": "foreach"}, compute) == []


def test_the_audit_and_the_allocator_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)  # the shell's allocator settings are not this test's
    used = ParamAudit(device="cpu", parameters=4, numel=10, unused=[], frozen=[])
    unused = msgspec.structs.replace(used, unused=[ModuleParams(module="head", parameters=["weight"], numel=4)])
    data = baseline(finding(BoundKind.DATA))
    assert keys({"find_unused_parameters": "true"}, data, audit=used)[0] == "find_unused_parameters=false"
    assert "find_unused_parameters=false" not in keys({"find_unused_parameters": "true"}, data, audit=unused)
    fragmented = baseline(finding(BoundKind.DATA), device="cuda", memory=[MemoryNote.FRAGMENTATION])
    assert keys({}, fragmented)[0] == "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert keys({}, baseline(finding(BoundKind.DATA), memory=[MemoryNote.FRAGMENTATION]))[0] == "num_workers=8"  # CPU


def test_the_allocator_is_not_tried_where_the_shell_already_grows_its_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ranks inherit the doctor's environment: expandable segments set there are on already
    fragmented = baseline(finding(BoundKind.DATA), device="cuda", memory=[MemoryNote.FRAGMENTATION])
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
    assert not any(k.startswith("env.") for k in keys({}, fragmented))
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:128")
    assert keys({}, fragmented)[0] == "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def test_findings_without_a_knob_are_code_changes_with_where_they_are() -> None:
    sync = finding(BoundKind.SYNC, expected=30)
    straggler = finding(BoundKind.STRAGGLER, expected=20, straggler_rank=3)
    slow = StragglerEvidence(
        rank=3,
        times_last=5,
        instances=5,
        caused_wait_per_step_ns=1e6,
        score=1.0,
        cause=next(iter(StragglerCause)),
        phase="forward",
        cause_excess_ns=1e6,
    )
    source = SyncSource(op="aten::item", kind=SyncKind.SYNC, per_step=2.0, phase="forward")
    base = baseline(sync, straggler, finding(BoundKind.DATA, expected=5), stragglers=[slow], sync_sources=[source])
    config = load_config(None, {})
    tried = candidates(config, base, None, cpus=8, limit=3)
    assert [c.knob for c in tried] == [Knob.NUM_WORKERS]
    changes = code_changes(base, tried)
    assert [(c.bound, c.op, c.phase, c.rank) for c in changes] == [
        (BoundKind.SYNC, "aten::item", "forward", None),
        (BoundKind.STRAGGLER, None, "forward", 3),
    ]
    assert changes[0].gain == sync.gain
    # a knob's finding whose knobs were not tried (--trials 0) is stated as it is
    assert [c.bound for c in code_changes(base, [])][-1] is BoundKind.DATA


def test_findings_rank_by_expected_gain_and_skip_those_without_one() -> None:
    a, b = finding(BoundKind.DATA, expected=10), finding(BoundKind.LAUNCH, expected=30)
    none = Finding(bound=BoundKind.HOST, confidence=Confidence.HIGH)
    assert findings(baseline(a, b, none).verdict) == [b, a]


def measure(gain_pct: float, low: float | None = None, high: float | None = None) -> TrialMeasure:
    return TrialMeasure(
        key="step", a=100.0, b=100 - gain_pct, gain_pct=gain_pct, low_pct=low, high_pct=high, change=Change.FASTER
    )


@pytest.mark.parametrize(
    ("expected", "share", "measured", "agrees"),
    [
        (40.0, 50.0, measure(45.0, 41.0, 49.0), Agreement.AS_PREDICTED),  # within 25% of the gain, beyond noise
        (40.0, 50.0, measure(35.0, 30.0, 40.5), Agreement.AS_PREDICTED),  # its interval holds the gain
        (40.0, 50.0, measure(31.0, 30.0, 32.0), Agreement.AS_PREDICTED),  # 9 of 40: within 25%
        (40.0, 50.0, measure(20.0, 15.0, 25.0), Agreement.PARTLY),  # a gain beyond noise, half the predicted one
        (40.0, 50.0, measure(70.0), Agreement.PARTLY),  # measured once: a point, far over
        (40.0, 50.0, measure(30.0, -5.0, 65.0), Agreement.INCONCLUSIVE),  # holds the gain, but zero too
        (40.0, 50.0, measure(-10.0, -15.0, -5.0), Agreement.MISSED),  # slower beyond noise
        (None, 50.0, measure(45.0), Agreement.AS_PREDICTED),  # not re-timed: the share stands for the gain
        (0.0, 0.0, measure(0.2, -1.0, 1.4), Agreement.AS_PREDICTED),  # no gain predicted, none measured
        (0.0, 0.0, measure(12.0, 5.0, 19.0), Agreement.PARTLY),  # no gain predicted, a gain measured
    ],
)
def test_agreement(expected: float | None, share: float, measured: TrialMeasure, agrees: Agreement) -> None:
    # as predicted only when the measured interval excludes zero and meets the predicted gain (issue 45)
    assert agreement(gain(BoundKind.DATA, expected, share), measured) is agrees


def test_agreement_without_a_prediction_or_a_measure() -> None:
    assert agreement(None, measure(10.0)) is Agreement.NO_PREDICTION
    assert agreement(gain(BoundKind.DATA, 10.0, 12.0), None) is Agreement.NOT_MEASURED


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20m", 1200.0), ("90s", 90.0), ("90", 90.0), ("1h30m", 5400.0), ("1.5h", 5400.0), (None, None)],
)
def test_budget(text: str | None, seconds: float | None) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "20 minutes", "0m", "-5m", "m"])
def test_a_bad_budget_is_one_line(text: str) -> None:
    with pytest.raises(InputError, match="--budget") as info:
        parse_budget(text)
    assert "\n" not in info.value.message
