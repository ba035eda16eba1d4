"""``tracekit doctor``'s run: stages recorded as they end, failures one line, the budget, resume.

The captures, the probe and the audit are stand-ins (the real ones are run end to end by
tests/capture/test_doctor_e2e.py); the analysis is of the real data-bound sample capture.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from tests.conftest import SAMPLES, analysis_of
from tracekit.analyzers.compare import compare
from tracekit.capture import files
from tracekit.capture.doctor import DOCTOR_FILE, Tools, plan_doctor, run_doctor
from tracekit.capture.launcher import CaptureError
from tracekit.errors import InputError
from tracekit.reports import renderer
from tracekit.results.capture import load_capture_summary
from tracekit.results.doctor import Agreement, DoctorStage, Knob, SkipReason, StageStatus, load_doctor
from tracekit.results.loader_probe import LoaderProbe, RankFetches
from tracekit.results.param_audit import ParamAudit
from tracekit.results.vocab import BoundKind, CeilingBy, Change

if TYPE_CHECKING:
    from tracekit.capture.ab import ABPlan
    from tracekit.capture.config import CaptureConfig
    from tracekit.results.ab import ABCapture
    from tracekit.results.analysis import Analysis
    from tracekit.results.capture import CaptureSummary
    from tracekit.results.compare import Comparison

DATA_BOUND = SAMPLES / "captures" / "data_bound"
CONFIG = {"workload": "mlp", "nproc": 2, "batch_size": 16, "warmup_steps": 2, "measured_steps": 4}


def _analysis() -> Analysis:
    return analysis_of([DATA_BOUND]).analysis


@dataclass
class Fake:
    """Stand-in tools that record what ran; ``fail`` names the stages (or trial keys) that fail."""

    fail: set[str] = field(default_factory=set)
    ran: list[str] = field(default_factory=list)
    gain_pct: float = 50.0
    summary: Path = DATA_BOUND / files.SUMMARY

    def capture(self, config: CaptureConfig) -> CaptureSummary:
        self.ran.append("capture")
        if "capture" in self.fail:
            raise CaptureError(
                "rank 1 failed: RuntimeError: Expected to have finished reduction in the prior iteration"
            )
        Path(config.out_dir).mkdir(parents=True, exist_ok=True)
        return load_capture_summary(self.summary.read_bytes(), source="summary.json")

    def probe(self, config: CaptureConfig, *, batches: int, capture: str | None) -> LoaderProbe:
        self.ran.append("loader")
        if "loader" in self.fail:
            raise CaptureError("rank 0 failed: the DataLoader raised")
        fetches = RankFetches(
            rank=0, batches=batches, fetch_ns=[1], mean_ns=1.0, median_ns=1.0, p95_ns=1.0, wall_ns=1, batches_per_s=10.0
        )
        return LoaderProbe(
            config={},
            world_size=2,
            batch_size=16,
            warmup_batches=2,
            per_rank=[fetches],
            slowest_rank=0,
            samples_per_s=320.0,
            samples_per_s_by=next(iter(CeilingBy)),
        )

    def audit(self, config: CaptureConfig) -> ParamAudit:
        self.ran.append("audit")
        return ParamAudit(device="cpu", parameters=6, numel=100, unused=[], frozen=[])

    def ab(self, plan: ABPlan) -> ABCapture:
        key = plan.texts["b"]
        self.ran.append(key)
        if key in self.fail:
            raise CaptureError(f"A/B capture stopped at side B {key!r}, repeat 1 of 1: rank 0 failed")
        for side in ("a", "b"):
            (Path(plan.out_dir) / side).mkdir(parents=True, exist_ok=True)
        return None  # type: ignore[return-value]  (the doctor reads the comparison, not the record)

    def tools(self) -> Tools:
        return Tools(capture=self.capture, probe=self.probe, audit=self.audit, ab=self.ab)


class Judge:
    """The real analysis of the sample; a comparison whose B is ``gain_pct`` faster."""

    def __init__(self, fake: Fake) -> None:
        self.fake = fake

    def analyze(self, folder: Path) -> Analysis:
        return _analysis()

    def compare(self, a: Path, b: Path) -> Comparison:
        c = compare([_analysis()], [_analysis()])
        base = c.step.a or 1.0
        delta = -base * self.fake.gain_pct / 100
        step = msgspec.structs.replace(c.step, b=base + delta, delta=delta, ci=None, change=Change.FASTER)
        return msgspec.structs.replace(c, step=step)


def config_file(tmp_path: Path, **changes: Any) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(CONFIG | changes))
    return path


def test_the_stages_run_in_order_and_are_recorded(tmp_path: Path) -> None:
    fake = Fake()
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=2)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    assert fake.ran[:2] == ["capture", "loader"]
    assert record.baseline is not None and record.baseline.verdict.primary.bound is BoundKind.DATA
    assert [s.key for s in record.stages] == ["capture", "loader"]
    assert record.trials and record.trials[0].knob is Knob.NUM_WORKERS
    trial = record.trials[0]
    assert trial.run.status is StageStatus.OK and trial.measured is not None
    assert trial.measured.gain_pct == pytest.approx(50.0, abs=0.01)
    assert trial.predicted is not None and trial.agreement is not None
    assert record.finished
    saved = load_doctor((tmp_path / "doc" / DOCTOR_FILE).read_bytes(), source="doctor.json")
    assert saved == record


def test_a_capture_on_a_gpu_is_a_cuda_baseline_and_pinned_memory_is_tried(tmp_path: Path) -> None:
    # the capture names its GPUs ("NVIDIA H200"); the doctor read that as a CPU run on the H200
    # and never proposed pin_memory there
    cuda = SAMPLES / "captures" / "cuda-h200-data-bound-pinned" / files.SUMMARY
    fake = Fake(summary=cuda)
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=3)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    assert record.baseline is not None and record.baseline.device == "cuda"
    knobs = [t.knob for t in record.trials]
    assert knobs[0] is Knob.NUM_WORKERS and Knob.PIN_MEMORY in knobs
    cpu = run_doctor(
        plan_doctor(config_file(tmp_path), {}, tmp_path / "cpu", repeats=1), Judge(Fake()), tools=Fake().tools()
    )
    assert cpu.baseline is not None and cpu.baseline.device == "cpu"
    assert Knob.PIN_MEMORY not in [t.knob for t in cpu.trials]


def test_a_failed_trial_is_one_line_and_the_others_stay(tmp_path: Path) -> None:
    fake = Fake(fail={"num_workers=2"})
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=3)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    failed = next(t for t in record.trials if t.run.key == "num_workers=2")
    assert failed.run.status is StageStatus.FAILED and failed.measured is None
    assert failed.run.reason is not None and "\n" not in failed.run.reason
    assert record.finished and record.baseline is not None


def test_a_failed_stage_does_not_stop_the_others(tmp_path: Path) -> None:
    fake = Fake(fail={"loader"})
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=1)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    loader = next(s for s in record.stages if s.stage is DoctorStage.LOADER)
    assert loader.status is StageStatus.FAILED and "DataLoader raised" in (loader.reason or "")
    assert len(record.trials) == 1 and record.trials[0].run.status is StageStatus.OK


def test_ddp_refusing_runs_the_audit_and_no_trial(tmp_path: Path) -> None:
    fake = Fake(fail={"capture"})
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    assert "audit" in fake.ran and record.audit is not None
    assert record.baseline is None and record.trials == []
    for fmt in ("terminal", "md", "html", "json"):
        assert renderer(fmt).render(record)  # a doctor with no baseline still reports


def test_find_unused_parameters_is_audited_and_tried_off_when_every_parameter_is_used(tmp_path: Path) -> None:
    fake = Fake()
    plan = plan_doctor(config_file(tmp_path, find_unused_parameters=True), {}, tmp_path / "doc", repeats=1)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    assert record.audit is not None
    first = record.trials[0]
    assert first.knob is Knob.FIND_UNUSED_PARAMETERS and first.agreement is Agreement.NO_PREDICTION


def test_the_budget_skips_trials_that_do_not_fit(tmp_path: Path) -> None:
    fake = Fake()
    # the baseline "took" well under a second: a budget of 0.001 s fits no trial
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, budget_s=0.001)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    skipped = [t.run for t in record.trials] + [s for s in record.stages if s.status is StageStatus.SKIPPED]
    assert skipped and all(s.skip is SkipReason.BUDGET for s in skipped)
    assert not any(k.startswith("num_workers") for k in fake.ran)
    # resumed without a budget, the skipped ones run, and nothing else again
    fake.ran.clear()
    resumed = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, resume=True)
    record = run_doctor(resumed, Judge(fake), tools=fake.tools())
    assert "capture" not in fake.ran and any(k.startswith("num_workers") for k in fake.ran)
    assert all(t.run.status is StageStatus.OK for t in record.trials)


def test_resume_keeps_what_finished(tmp_path: Path) -> None:
    fake = Fake(fail={"num_workers=2"})
    plan = plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=1)
    run_doctor(plan, Judge(fake), tools=fake.tools())
    fake.ran.clear()
    record = run_doctor(
        plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=1, resume=True),
        Judge(fake),
        tools=fake.tools(),
    )
    assert fake.ran == []  # a failed trial is a result: kept
    assert record.trials[0].run.status is StageStatus.FAILED


def test_an_earlier_run_needs_resume_and_the_same_config(tmp_path: Path) -> None:
    fake = Fake()
    run_doctor(
        plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1, max_trials=0),
        Judge(fake),
        tools=fake.tools(),
    )
    with pytest.raises(InputError, match="--resume continues it"):
        run_doctor(plan_doctor(config_file(tmp_path), {}, tmp_path / "doc", repeats=1), Judge(fake), tools=fake.tools())
    other = plan_doctor(config_file(tmp_path), {"batch_size": "8"}, tmp_path / "doc", repeats=1, resume=True)
    with pytest.raises(InputError, match=r"cannot resume: .*overrides, config"):
        run_doctor(other, Judge(fake), tools=fake.tools())


@pytest.mark.parametrize(
    ("overrides", "settings", "message"),
    [
        ({"trace": "false"}, {}, "trace=false"),
        ({}, {"repeats": 0}, "--repeats"),
        ({"batch_size": "0"}, {}, "--batch_size=0: out of range: must be at least 1"),
    ],
)
def test_bad_settings_are_one_line(
    tmp_path: Path, overrides: dict[str, str], settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message) as info:
        plan_doctor(config_file(tmp_path), overrides, tmp_path / "doc", **settings)
    assert "\n" not in info.value.message


def test_an_out_folder_of_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "doc").mkdir()
    (tmp_path / "doc" / "notes.txt").write_text("mine")
    with pytest.raises(InputError):
        plan_doctor(config_file(tmp_path), {}, tmp_path / "doc")


def test_the_report_renders_in_every_format(tmp_path: Path) -> None:
    fake = Fake(fail={"persistent_workers=true"})
    plan = plan_doctor(config_file(tmp_path, num_workers=1), {}, tmp_path / "doc", repeats=1, max_trials=3)
    record = run_doctor(plan, Judge(fake), tools=fake.tools())
    text = renderer("terminal").render(record)
    assert "num_workers=2: the step is 50.0% shorter" in text
    md = renderer("md").render(record)
    assert "failed: A/B capture stopped" in md
    assert "| num_workers=2 | data-bound |" in md
    html = renderer("html").render(record)
    assert "Knobs tried" in html and "<script" in html
    assert json.loads(renderer("json").render(record))["schema"] == "tracekit.doctor"
    shutil.rmtree(tmp_path / "doc")


def test_out_dir_names_the_doctor_s_folder_as_for_a_sweep(tmp_path: Path) -> None:
    plan = plan_doctor(config_file(tmp_path), {"out_dir": str(tmp_path / "doc")})
    assert plan.out_dir == (tmp_path / "doc").resolve() and "out_dir" not in plan.overrides
    assert plan.config.out_dir == str((tmp_path / "doc" / "baseline").resolve())
    same = tmp_path / "doc"
    assert plan_doctor(config_file(tmp_path), {"out_dir": str(same)}, same).out_dir == same.resolve()  # given twice
    with pytest.raises(InputError, match="give the doctor's folder once"):
        plan_doctor(config_file(tmp_path), {"out_dir": str(tmp_path / "a")}, tmp_path / "b")


def test_the_h200_record_reads_and_renders() -> None:
    # a real run (benchmarks/gpu_check.sh, 2026-11-27): data_bound.json on one H200, the loader
    # at 10 ms a sample in the training process; 8 workers measured 170.29 -> 4.45 ms a step
    record = load_doctor((SAMPLES / "captures" / "cuda-h200-doctor" / DOCTOR_FILE).read_bytes(), source="doctor.json")
    assert record.finished and record.baseline is not None
    assert record.baseline.verdict.primary.bound is BoundKind.DATA
    (trial,) = record.trials
    assert trial.knob is Knob.NUM_WORKERS and trial.measured is not None and trial.predicted is not None
    assert trial.measured.gain_pct == pytest.approx(97.39) and trial.measured.low_pct == pytest.approx(96.92)
    assert trial.predicted.gain_pct == pytest.approx(96.11, abs=0.01)
    assert trial.agreement is Agreement.NEAR_EXPECTED
    md = renderer("md").render(record)
    assert "num_workers=8: the step is 97.4% shorter" in md and "as predicted" in md
    assert "Knobs tried" in renderer("html").render(record)
