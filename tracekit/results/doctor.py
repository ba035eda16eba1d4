"""``doctor.json``: what ``tracekit doctor`` ran and found, as typed Structs.

The doctor runs the diagnostic sequence on one config: a baseline capture and its verdict with
each finding's predicted gain, the DataLoader's ceiling against training's samples/s, the
parameter audit when ``find_unused_parameters`` is on (or DDP refused to run without it), and
an A/B capture of each configuration knob that addresses a top finding, its measured gain
against the predicted one. Times are nanoseconds, gains percent of A's step. Layout of schema 1.x:

- ``config_path``, ``overrides``, ``config``: what the baseline ran (plain JSON, as in ``summary.json``);
- ``budget_s``, ``repeats``, ``max_trials``: the run's settings;
- ``stages``: one :class:`StageRun` per stage that ran, failed or was skipped, in order;
- ``baseline``: the baseline capture's folder, step and verdict (with its gains), when it ran;
- ``loader``, ``audit``: the DataLoader probe and the parameter audit, when they ran;
- ``trials``: per knob tried, the B side's overrides, the finding it addresses and its
  predicted gain, and the measured gain with its 95% interval;
- ``code_changes``: the findings no knob addresses (a per-step ``.item()``, a straggler), with
  their predicted gain and where to change the code.

``doctor.json`` is rewritten atomically after every stage, so an interrupted doctor keeps what
it finished and ``--resume`` runs only the stages it does not record as done.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tracekit.results.analysis import Finding, Verdict  # noqa: TC001  (msgspec reads them at run time)
from tracekit.results.loader_probe import LoaderProbe  # noqa: TC001
from tracekit.results.param_audit import ParamAudit  # noqa: TC001
from tracekit.results.records import load_record
from tracekit.results.upgrade_analysis import gains_2_8
from tracekit.results.vocab import BoundKind, Change, MemoryNote, NoteKind, StrEnum, SyncKind
from tracekit.results.worth import Gain  # noqa: TC001

__all__ = [
    "DOCTOR_SCHEMA",
    "DOCTOR_SCHEMA_VERSION",
    "Agreement",
    "Baseline",
    "CodeChange",
    "Doctor",
    "DoctorStage",
    "Knob",
    "SkipReason",
    "StageRun",
    "StageStatus",
    "Trial",
    "TrialMeasure",
    "load_doctor",
]

DOCTOR_SCHEMA: Final = "tracekit.doctor"
DOCTOR_SCHEMA_VERSION: Final = "1.1"


class DoctorStage(StrEnum):
    """A stage of ``tracekit doctor``, in the order its report lists them."""

    LOADER = "loader"  # the DataLoader's ceiling against training's samples/s
    CAPTURE = "capture"  # the baseline capture and its verdict with predicted gains
    AUDIT = "audit"  # the parameter audit (find_unused_parameters on, or DDP refused)
    TRIAL = "trial"  # an A/B capture of one configuration knob


class StageStatus(StrEnum):
    """How a stage of ``tracekit doctor`` ended."""

    OK = "ok"
    FAILED = "failed"  # its one-line reason recorded; the stages that finished stay
    SKIPPED = "skipped"  # not run (see :class:`SkipReason`); a resumed doctor runs it


class SkipReason(StrEnum):
    """Why ``tracekit doctor`` did not run a stage."""

    BUDGET = "budget"  # its estimated time did not fit in what was left of --budget
    NO_BASELINE = "no_baseline"  # the baseline capture failed: nothing to compare with


class Knob(StrEnum):
    """A configuration change ``tracekit doctor`` can A/B (each one capture config key, or an
    environment variable of the ranks)."""

    NUM_WORKERS = "num_workers"
    PIN_MEMORY = "pin_memory"
    PERSISTENT_WORKERS = "persistent_workers"
    PREFETCH_FACTOR = "prefetch_factor"
    FIND_UNUSED_PARAMETERS = "find_unused_parameters"
    BUCKET_CAP_MB = "ddp_bucket_cap_mb"
    GRADIENT_AS_BUCKET_VIEW = "ddp_gradient_as_bucket_view"
    COMM_HOOK = "ddp_comm_hook"
    OPTIMIZER_IMPL = "optimizer_impl"
    MIXED_PRECISION = "mixed_precision"
    EXPANDABLE_SEGMENTS = "expandable_segments"


class Agreement(StrEnum):
    """How a measured gain compares with its prediction (``tracekit doctor``, the calibration).

    Since doctor 1.1 (issue 45): ``as_predicted`` only when the measured interval excludes zero
    and meets the predicted gain; ``partly`` when it excludes zero but does not; ``inconclusive``
    when it holds zero. ``in_range`` and ``near_expected`` are 1.0's looser rule, kept for its files.
    """

    AS_PREDICTED = "as_predicted"  # a gain beyond noise, and its interval holds the prediction (or within 25% of it)
    PARTLY = "partly"  # a gain beyond noise, but not the one predicted (more or less)
    INCONCLUSIVE = "inconclusive"  # the measured interval holds zero: noise cannot be told from a gain
    MISSED = "missed"  # slower beyond noise where a gain was predicted (1.0: neither of its two rules)
    NO_PREDICTION = "no_prediction"  # nothing predicted this knob's gain (a knob with no finding's share)
    NOT_MEASURED = "not_measured"  # the comparison measured no step time on one side
    IN_RANGE = "in_range"  # doctor 1.0: the measured interval met [expected, up to]
    NEAR_EXPECTED = "near_expected"  # doctor 1.0: the measured gain within 25% of the expected one


class StageRun(msgspec.Struct, kw_only=True, frozen=True):
    """One stage: how it ended, how long it took, where its output is."""

    stage: DoctorStage
    #: unique in the record: ``capture``, ``loader``, ``audit``, or a trial's overrides (``num_workers=2``)
    key: str
    status: StageStatus
    started: str | None = None
    seconds: float = 0.0
    #: its output, relative to the doctor's folder
    folder: str | None = None
    #: a failed stage's one-line error
    reason: str | None = None
    skip: SkipReason | None = None


class Baseline(msgspec.Struct, kw_only=True, frozen=True):
    """The baseline capture and what its analysis found."""

    folder: str
    #: seconds the capture took (what a trial's estimate is made of)
    seconds: float
    step_mean_ns: float | None
    samples_per_s: float | None
    #: the ranks' device: ``cuda`` or ``cpu``
    device: str
    verdict: Verdict
    #: memory findings of the analysis (fragmentation is a knob's)
    memory: list[MemoryNote] = msgspec.field(default_factory=list)


class TrialMeasure(msgspec.Struct, kw_only=True, frozen=True):
    """What an A/B measured: the step's change as a gain (positive: B faster), with its interval."""

    #: the comparison's measure: ``step`` (a time), or ``peak_reserved`` (memory, for the allocator)
    key: str
    a: float
    b: float
    gain_pct: float
    #: the 95% interval of the gain (None when measured once)
    low_pct: float | None = None
    high_pct: float | None = None
    change: Change
    n_a: int = 0
    n_b: int = 0


class Trial(msgspec.Struct, kw_only=True, frozen=True):
    """One knob A/B-captured: B is the baseline config with ``overrides``."""

    knob: Knob
    overrides: dict[str, str]
    #: the finding it addresses (a bound, a note or a memory finding)
    bound: BoundKind | None = None
    note: NoteKind | None = None
    memory: MemoryNote | None = None
    #: that finding's predicted gain (None: no finding's share predicts this knob)
    predicted: Gain | None = None
    run: StageRun
    measured: TrialMeasure | None = None
    agreement: Agreement | None = None
    #: B's verdict (its primary finding): what bounds the run once the knob is on
    after: Finding | None = None


class CodeChange(msgspec.Struct, kw_only=True, frozen=True):
    """A finding that needs a change of code, not of config: what it is worth and where."""

    bound: BoundKind | None = None
    note: NoteKind | None = None
    gain: Gain | None = None
    #: the operator to change (the top source of blocking syncs or copies)
    op: str | None = None
    kind: SyncKind | None = None
    per_step: float | None = None
    #: the phase it runs in (outermost annotation), and the rank (a straggler)
    phase: str | None = None
    rank: int | None = None


class Doctor(msgspec.Struct, kw_only=True, frozen=True):
    """``doctor.json``."""

    schema: str = DOCTOR_SCHEMA
    schema_version: str = DOCTOR_SCHEMA_VERSION
    tracekit_version: str
    config_path: str | None = None
    overrides: dict[str, str] = msgspec.field(default_factory=dict)
    config: dict[str, Any]
    budget_s: float | None = None
    repeats: int
    max_trials: int
    stages: list[StageRun] = msgspec.field(default_factory=list)
    baseline: Baseline | None = None
    loader: LoaderProbe | None = None
    audit: ParamAudit | None = None
    trials: list[Trial] = msgspec.field(default_factory=list)
    code_changes: list[CodeChange] = msgspec.field(default_factory=list)
    #: every planned stage ran (or failed, or was skipped)
    finished: bool = False


def load_doctor(data: bytes | str, *, source: str) -> Doctor:
    """Parse a saved record (:func:`tracekit.results.records.load_record`); write one with ``dump_record``."""
    return load_record(data, Doctor, what="tracekit doctor record", source=source, upgrade=gains_2_8)
