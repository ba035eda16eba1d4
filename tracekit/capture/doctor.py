"""``tracekit doctor``: the whole diagnostic sequence on one config, with the top fix measured.

1. a baseline capture (``out/baseline``), analyzed: its verdict, each finding's predicted gain;
2. the DataLoader's ceiling against what training consumed (``out/baseline.dataloader``);
3. the parameter audit, when ``find_unused_parameters`` is on or DDP refused to run without it;
4. for the top findings a configuration knob addresses (:mod:`tracekit.capture.doctor_plan`),
   an A/B capture of the knob (``out/trials/<knob>``: A the baseline config, B with the knob,
   interleaved, ``repeats`` of each), compared by :func:`tracekit.compare`'s noise model: the
   measured gain with its 95% interval against the predicted one;
5. the findings that need a change of code, with their predicted gain and where they are.

Analyzing and comparing traces is the pipeline's (a layer above capture): the caller passes them
in (:class:`Judge`). ``out/doctor.json`` (:mod:`tracekit.results.doctor`) is rewritten
atomically after every stage: a stage that fails is recorded with its one-line reason and the
doctor goes on with what does not need it; an interrupted doctor keeps what it finished, and
``resume=True`` runs only the stages it does not record as done. ``budget_s`` bounds the whole
run: a trial whose estimate (its captures, each as long as the baseline's) does not fit in what
is left is skipped, and recorded as such.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from tracekit import __version__
from tracekit.capture import files, outdir
from tracekit.capture.ab import capture_ab, plan_ab
from tracekit.capture.audit import audit_params
from tracekit.capture.config import CaptureConfig, load_config, to_dict
from tracekit.capture.deadline import deadline
from tracekit.capture.doctor_plan import Candidate, agreement, candidates, code_changes, slug
from tracekit.capture.launcher import CaptureInterrupted, capture
from tracekit.capture.loader_probe import DEFAULT_BATCHES, probe_dataloader, probe_folder
from tracekit.capture.ranks import DDP_REFUSED
from tracekit.errors import InputError, TracekitError
from tracekit.locks import folder_lock
from tracekit.results.doctor import (
    DOCTOR_SCHEMA,
    Baseline,
    Doctor,
    DoctorStage,
    Knob,
    SkipReason,
    StageRun,
    StageStatus,
    Trial,
    TrialMeasure,
    load_doctor,
)
from tracekit.results.records import dump_record
from tracekit.results.vocab import Change

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.capture.ab import ABPlan
    from tracekit.results.ab import ABCapture
    from tracekit.results.analysis import Analysis
    from tracekit.results.capture import CaptureSummary
    from tracekit.results.compare import Comparison, Measure
    from tracekit.results.loader_probe import LoaderProbe
    from tracekit.results.param_audit import ParamAudit

__all__ = ["DEFAULT_OUT", "DOCTOR_FILE", "DoctorPlan", "Judge", "Tools", "plan_doctor", "run_doctor"]

DOCTOR_FILE: Final = "doctor.json"
BASELINE: Final = "baseline"
TRIALS: Final = "trials"
AUDIT_FILE: Final = "audit.json"
_OWN: Final = re.compile(r"^(doctor\.json|audit\.json|baseline(\.dataloader)?|trials|\.doctor\.json\.\d+\.tmp)$")
#: A doctor folder: ``doctor.json``, the baseline, its DataLoader probe, the trials, the audit.
DOCTOR_FOLDER: Final = outdir.FolderKind(
    "a tracekit doctor run", DOCTOR_FILE, DOCTOR_SCHEMA, lambda n: bool(_OWN.match(n))
)
#: A trial's estimate: its captures each as long as the baseline's, and this much more.
ESTIMATE_MARGIN: Final = 1.1
#: What a resumed doctor keeps.
_DONE: Final = (StageStatus.OK, StageStatus.FAILED)


class Judge(Protocol):
    """Analyzing and comparing traces: the pipeline's, given by the caller."""

    def analyze(self, folder: Path) -> Analysis:
        """The analysis of the capture in ``folder``."""
        ...

    def compare(self, a: Path, b: Path) -> Comparison:
        """B's runs against the baseline A's (each a folder of captures)."""
        ...


@dataclass(frozen=True)
class Tools:
    """What the doctor runs (the real ones by default; tests give others)."""

    capture: Callable[[CaptureConfig], CaptureSummary] = capture
    probe: Callable[..., LoaderProbe] = probe_dataloader
    audit: Callable[[CaptureConfig], ParamAudit] = audit_params
    ab: Callable[[ABPlan], ABCapture] = capture_ab


@dataclass(frozen=True)
class DoctorPlan:
    """A checked doctor run: where, on which config, within which budget."""

    out_dir: Path
    config: CaptureConfig
    config_path: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    budget_s: float | None = None
    repeats: int = 2
    max_trials: int = 3
    batches: int = DEFAULT_BATCHES
    resume: bool = False
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)


#: The doctor's folder when none is given.
DEFAULT_OUT: Final = "tracekit-doctor"


def plan_doctor(
    config_path: str | Path | None,
    overrides: dict[str, str],
    out_dir: str | Path | None = None,
    *,
    budget_s: float | None = None,
    repeats: int = 2,
    max_trials: int = 3,
    batches: int = DEFAULT_BATCHES,
    resume: bool = False,
) -> DoctorPlan:
    """Check the config and the settings; nothing runs yet. The captures go under ``out_dir``,
    the doctor's folder (default :data:`DEFAULT_OUT`; an ``out_dir`` override names it too, as
    for a sweep; the config file's own ``out_dir`` is not used: the doctor's folder holds every
    capture it makes)."""
    if repeats < 1:
        raise InputError(f"--repeats must be at least 1, got {repeats}")
    if max_trials < 0:
        raise InputError(f"--trials must be 0 or more, got {max_trials}")
    if batches < 1:
        raise InputError(f"--batches must be at least 1, got {batches}")
    overrides = dict(overrides)
    named = overrides.pop("out_dir", None)
    if named is not None and out_dir is not None and Path(named) != Path(out_dir):
        raise InputError(f"--out {out_dir} and --out_dir={named}: give the doctor's folder once")
    target = outdir.check(out_dir or named or DEFAULT_OUT, DOCTOR_FOLDER)
    config = load_config(config_path, {**overrides, "out_dir": str(target / BASELINE)})
    if not config.trace:
        raise InputError("the doctor analyzes the baseline's traces: trace=false is not for it")
    return DoctorPlan(
        out_dir=target,
        config=config,
        config_path=None if config_path is None else str(config_path),
        overrides=dict(overrides),
        budget_s=budget_s,
        repeats=repeats,
        max_trials=max_trials,
        batches=batches,
        resume=resume,
    )


class _Run:
    """One doctor run: the record so far, saved after every change, and the clock."""

    def __init__(self, plan: DoctorPlan, record: Doctor, say: Callable[[str], None]) -> None:
        self.plan, self.record, self.say = plan, record, say
        self.began = time.perf_counter()

    def save(self, **changes: object) -> Doctor:
        self.record = msgspec.structs.replace(self.record, **changes)
        files.write_bytes_atomic(self.plan.out_dir / DOCTOR_FILE, dump_record(self.record))
        return self.record

    def done(self, key: str) -> StageRun | None:
        return next((s for s in self.record.stages if s.key == key and s.status in _DONE), None)

    def put(self, run: StageRun) -> None:
        stages = [s for s in self.record.stages if s.key != run.key]
        self.save(stages=[*stages, run])

    def left(self) -> float | None:
        budget = self.plan.budget_s
        return None if budget is None else budget - (time.perf_counter() - self.began)

    def fits(self, estimate: float) -> bool:
        left = self.left()
        return left is None or estimate <= left


def run_doctor(
    plan: DoctorPlan, judge: Judge, *, tools: Tools | None = None, say: Callable[[str], None] | None = None
) -> Doctor:
    """Run the plan's stages (those a resumed doctor has not finished); returns ``doctor.json``'s record.

    ``say`` is told what starts, in one line each.
    """
    with folder_lock(plan.out_dir, flag="--out"):  # a second doctor in the same folder is refused
        return _run_doctor_in(plan, judge, tools or Tools(), say)


def _run_doctor_in(plan: DoctorPlan, judge: Judge, tools: Tools, say: Callable[[str], None] | None) -> Doctor:
    """The doctor's stages of ``plan`` (its folder locked by this process)."""
    run = _Run(plan, _start(plan), say or (lambda _: None))
    baseline = _baseline(run, judge, tools)
    _loader(run, tools, compare=baseline is not None)
    refused = _refused(run.record)
    if plan.config.find_unused_parameters or refused:
        _audit(run, tools)
    if baseline is None:
        return run.save(finished=True)
    chosen = candidates(plan.config, baseline, run.record.audit, cpus=plan.cpus, limit=plan.max_trials)
    for candidate in chosen:
        _trial(run, judge, tools, candidate, baseline)
    return run.save(code_changes=code_changes(baseline, chosen), finished=True)


def _start(plan: DoctorPlan) -> Doctor:
    """The record to go on from: the earlier one when resuming (checked to be this plan's), else new."""
    fresh = Doctor(
        tracekit_version=__version__,
        config_path=plan.config_path,
        overrides=plan.overrides,
        config=to_dict(plan.config),
        budget_s=plan.budget_s,
        repeats=plan.repeats,
        max_trials=plan.max_trials,
    )
    path = plan.out_dir / DOCTOR_FILE
    if not path.exists():
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        files.write_bytes_atomic(path, dump_record(fresh))
        return fresh
    if not plan.resume:
        raise InputError(
            "--out holds an earlier doctor run: --resume continues it; give another --out to start over",
            path=plan.out_dir,
        )
    earlier = load_doctor(path.read_bytes(), source=str(path))
    same = ("config_path", "overrides", "config", "repeats")
    differs = [k for k in same if getattr(earlier, k) != getattr(fresh, k)]
    if differs:
        raise InputError(f"cannot resume: this run's {', '.join(differs)} differ from the earlier one's", path=path)
    for stale in plan.out_dir.glob(f"**/*{outdir.TMP_INFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)  # a capture cut off by the interruption
    return msgspec.structs.replace(
        earlier, budget_s=plan.budget_s, max_trials=plan.max_trials, tracekit_version=__version__, finished=False
    )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _stage(stage: DoctorStage, key: str, action: Callable[[], str | None]) -> StageRun:
    """Run ``action`` (it returns its folder) as one stage; a tracekit error is its one-line reason."""
    started, clock = _now(), time.perf_counter()
    try:
        folder = action()
    except CaptureInterrupted:
        raise
    except TracekitError as exc:
        return StageRun(
            stage=stage,
            key=key,
            status=StageStatus.FAILED,
            started=started,
            seconds=round(time.perf_counter() - clock, 3),
            reason=exc.message,
        )
    seconds = round(time.perf_counter() - clock, 3)
    return StageRun(stage=stage, key=key, status=StageStatus.OK, started=started, seconds=seconds, folder=folder)


def _skipped(stage: DoctorStage, key: str, why: SkipReason) -> StageRun:
    return StageRun(stage=stage, key=key, status=StageStatus.SKIPPED, skip=why)


def _baseline(run: _Run, judge: Judge, tools: Tools) -> Baseline | None:
    """The baseline capture and its analysis (kept from an earlier run when resuming)."""
    if run.done(DoctorStage.CAPTURE.value) is not None:
        return run.record.baseline
    config = run.plan.config
    run.say(f"capturing the baseline: {config.nproc} rank(s) of {config.workload!r} into {config.out_dir} ...")
    found: dict[str, Baseline] = {}

    def action() -> str:
        clock = time.perf_counter()
        summary = tools.capture(config)
        seconds = time.perf_counter() - clock
        run.say("analyzing the baseline ...")
        analysis = judge.analyze(Path(config.out_dir))
        found["baseline"] = _baseline_of(summary, analysis, seconds)
        return BASELINE

    stage = _stage(DoctorStage.CAPTURE, DoctorStage.CAPTURE.value, action)
    baseline = found.get("baseline")
    run.save(baseline=baseline)
    run.put(stage)
    return baseline


def _baseline_of(summary: CaptureSummary, analysis: Analysis, seconds: float) -> Baseline:
    # the capture lists the CUDA devices by name ("NVIDIA H200"), or ["cpu"] for a CPU run
    devices = (summary.environment or {}).get("devices") or []
    cuda = any(str(d) != "cpu" for d in devices)
    memory = analysis.memory
    return Baseline(
        folder=BASELINE,
        seconds=round(seconds, 3),
        step_mean_ns=summary.throughput.step_mean_ns,
        samples_per_s=summary.throughput.global_samples_per_s,
        device="cuda" if cuda else "cpu",
        verdict=analysis.verdict,
        memory=[] if memory is None else sorted({f.note for f in memory.findings}),
    )


def _loader(run: _Run, tools: Tools, *, compare: bool) -> None:
    """The DataLoader's ceiling (against the baseline's samples/s when ``compare``)."""
    key = DoctorStage.LOADER.value
    if run.done(key) is not None:
        return
    baseline = run.record.baseline
    if baseline is not None and not run.fits(baseline.seconds):
        run.put(_skipped(DoctorStage.LOADER, key, SkipReason.BUDGET))
        return
    config = run.plan.config
    run.say(f"timing the DataLoader alone on {config.nproc} rank(s) ...")
    found: dict[str, LoaderProbe] = {}

    def action() -> str:
        capture = config.out_dir if compare else None
        found["probe"] = tools.probe(config, batches=run.plan.batches, capture=capture)
        return probe_folder(config).name

    stage = _stage(DoctorStage.LOADER, key, action)
    run.save(loader=found.get("probe"))
    run.put(stage)


def _refused(record: Doctor) -> bool:
    """Whether the baseline failed because DDP refused a parameter that got no gradient."""
    stage = next((s for s in record.stages if s.key == DoctorStage.CAPTURE.value), None)
    return stage is not None and stage.status is StageStatus.FAILED and bool(DDP_REFUSED.search(stage.reason or ""))


def _audit(run: _Run, tools: Tools) -> None:
    """Which parameters get no gradient (one process, one batch)."""
    key = DoctorStage.AUDIT.value
    if run.done(key) is not None:
        return
    run.say("auditing the parameters (one forward and backward) ...")
    found: dict[str, ParamAudit] = {}

    def action() -> str:
        with deadline("doctor's parameter audit", run.plan.config.timeout):  # the workload runs in this process
            audit = tools.audit(run.plan.config)
        files.write_bytes_atomic(run.plan.out_dir / AUDIT_FILE, dump_record(audit))
        found["audit"] = audit
        return AUDIT_FILE

    stage = _stage(DoctorStage.AUDIT, key, action)
    run.save(audit=found.get("audit"))
    run.put(stage)


def _trial(run: _Run, judge: Judge, tools: Tools, candidate: Candidate, baseline: Baseline) -> None:
    """One knob A/B-captured and compared, recorded whatever its outcome."""
    key = candidate.key
    kept = next((t for t in run.record.trials if t.run.key == key and t.run.status in _DONE), None)
    if kept is not None:
        return
    head = {
        "knob": candidate.knob,
        "overrides": candidate.overrides,
        "bound": candidate.bound,
        "note": candidate.note,
        "memory": candidate.memory,
        "predicted": candidate.predicted,
    }
    estimate = 2 * run.plan.repeats * baseline.seconds * ESTIMATE_MARGIN
    if not run.fits(estimate):
        _put_trial(run, Trial(run=_skipped(DoctorStage.TRIAL, key, SkipReason.BUDGET), **head))  # type: ignore[arg-type]
        return
    where = Path(TRIALS, slug(key))
    common = {**run.plan.overrides, "out_dir": str(run.plan.out_dir / where)}
    run.say(f"trying {key} (A/B, {run.plan.repeats} capture(s) of each) into {run.plan.out_dir / where} ...")
    found: dict[str, Comparison] = {}

    def action() -> str:
        ab = plan_ab(run.plan.config_path, common, ["", key], repeats=run.plan.repeats)
        tools.ab(ab)
        run.say(f"comparing {key} with the baseline ...")
        found["comparison"] = judge.compare(run.plan.out_dir / where / "a", run.plan.out_dir / where / "b")
        return where.as_posix()

    stage = _stage(DoctorStage.TRIAL, key, action)
    comparison = found.get("comparison")
    measured = None if comparison is None else _measure(comparison, candidate.knob)
    after = None if comparison is None else comparison.verdicts.b
    trial = Trial(
        run=stage,
        measured=measured,
        agreement=agreement(candidate.predicted, measured),
        after=after,
        **head,  # type: ignore[arg-type]
    )
    _put_trial(run, trial)


def _put_trial(run: _Run, trial: Trial) -> None:
    trials = [t for t in run.record.trials if t.run.key != trial.run.key]
    run.save(trials=[*trials, trial])


def _measure(comparison: Comparison, knob: Knob) -> TrialMeasure | None:
    """The comparison's change as a gain (positive: B better): the step time, or the peak
    reserved memory for the allocator's knob."""
    m: Measure | None = comparison.step
    if knob is Knob.EXPANDABLE_SEGMENTS:
        m = next((x for x in comparison.measures if x.key == "peak_reserved"), None)
    if m is None or m.a is None or m.b is None or not m.a or m.delta is None:
        return None
    gain = -100 * m.delta / m.a
    low = None if m.ci is None else -100 * m.ci.high / m.a
    high = None if m.ci is None else -100 * m.ci.low / m.a
    return TrialMeasure(
        key=m.key,
        a=m.a,
        b=m.b,
        gain_pct=round(gain, 2),
        low_pct=None if low is None else round(low, 2),
        high_pct=None if high is None else round(high, 2),
        change=m.change if isinstance(m.change, Change) else Change(m.change),
        n_a=m.n_a,
        n_b=m.n_b,
    )
