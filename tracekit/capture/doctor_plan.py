"""What ``tracekit doctor`` tries, from what the baseline found: the knobs per finding, the code
changes, the budget, and how a measured gain compares with its prediction.

Pure functions of the baseline's record (:class:`~tracekit.results.doctor.Baseline`), the
config and the parameter audit; :mod:`tracekit.capture.doctor` runs them.

Which knob addresses which finding (each only where it can act: ``pin_memory`` needs a GPU,
DDP's knobs a DDP run of several ranks, the allocator's a CUDA one):

* data-bound: ``num_workers`` (from none to a share of the CPU cores per rank, or twice as
  many), then ``persistent_workers``, a deeper ``prefetch_factor``, ``pin_memory``;
* transfer-bound: ``pin_memory``;
* comms-bound (and low overlap): DDP's ``bucket_cap_mb`` (smaller buckets start their
  all-reduce sooner when compute hides little of it; larger ones make fewer, larger
  collectives otherwise), then fp16 compression of the gradients (``ddp_comm_hook=fp16``: half
  the bytes), then ``gradient_as_bucket_view``;
* launch-bound, compute-bound: a fused optimizer (one kernel, or one loop, instead of one per
  parameter and operation); GPU-compute-bound: mixed precision (bf16) first;
* memory fragmentation (CUDA): ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``;
* ``find_unused_parameters=false`` when it is on and the audit found every parameter used.

The rest (a per-step ``.item()``, a blocking copy, a straggler, host work, the GPU waiting on
events) needs a change of code: each is stated with its predicted gain and where it is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from tracekit.errors import InputError
from tracekit.results.capture import ALLOC_CONF_VARS, grows_segments
from tracekit.results.doctor import Agreement, CodeChange, Knob
from tracekit.results.vocab import BoundKind, MemoryNote, NoteKind

if TYPE_CHECKING:
    from tracekit.capture.config import CaptureConfig
    from tracekit.results.analysis import Finding, Verdict
    from tracekit.results.doctor import Baseline, TrialMeasure
    from tracekit.results.param_audit import ParamAudit
    from tracekit.results.worth import Gain

__all__ = [
    "NEAR_EXPECTED",
    "Candidate",
    "agreement",
    "candidates",
    "code_changes",
    "findings",
    "override_text",
    "parse_budget",
    "slug",
]

#: A measured gain this close to the expected one (relative) agrees with it.
NEAR_EXPECTED: Final = 0.25
#: A predicted gain under this (percent of the step) predicts no change.
NO_GAIN_PCT: Final = 1.0
#: Workers per rank the doctor tries at most, from none.
MAX_WORKERS: Final = 8
#: DDP's default bucket, MB.
DDP_BUCKET_MB: Final = 25.0
ALLOCATOR_ENV: Final = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE: Final = "expandable_segments:True"
#: The bounds a config knob addresses; the other bounds are code changes.
_CODE: Final = (
    BoundKind.SYNC,
    BoundKind.STRAGGLER,
    BoundKind.HOST,
    BoundKind.DEPENDENCY,
    BoundKind.IDLE,
)
_DURATION: Final = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


@dataclass(frozen=True)
class Candidate:
    """A knob to A/B: the B side's overrides of the baseline config, and the finding it addresses."""

    knob: Knob
    overrides: dict[str, str]
    bound: BoundKind | None = None
    note: NoteKind | None = None
    memory: MemoryNote | None = None
    predicted: Gain | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """The trial's key: its overrides as written on the command line."""
        return override_text(self.overrides)


def override_text(overrides: dict[str, str]) -> str:
    """``{"num_workers": "2"}`` -> ``num_workers=2`` (several separated by spaces)."""
    return " ".join(f"{k}={v}" for k, v in overrides.items())


def slug(key: str) -> str:
    """A folder name for a trial's key."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", key).strip("_") or "trial"


def parse_budget(text: str | None) -> float | None:
    """``20m``, ``90s``, ``1h30m``, ``1.5h`` or plain seconds -> seconds; None: no budget."""
    if text is None:
        return None
    found = _DURATION.match(text.strip().lower())
    if not text.strip() or found is None or not any(found.groups()):
        raise InputError(f"--budget {text!r}: write a duration such as 20m, 90s or 1h30m")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise InputError(f"--budget {text!r}: give a positive duration")
    return total


def findings(verdict: Verdict) -> list[Finding]:
    """The verdict's bound findings and notes that carry a gain, largest gain first (a waste
    with no re-timing by its share)."""
    every = [verdict.primary, *verdict.secondary]
    gained = [f for f in every if f.gain is not None and (f.bound is not None or f.note is not None)]

    def size(f: Finding) -> float:
        g = f.gain
        assert g is not None
        return g.gain_pct if g.gain_pct is not None else g.share_pct

    return sorted(gained, key=size, reverse=True)


def _is_ddp(config: CaptureConfig) -> bool:
    """Whether the ranks run under DDP: several ranks and no FSDP or DeepSpeed config."""
    name = (config.accelerate_config or "").lower()
    return config.nproc > 1 and not any(word in name for word in ("fsdp", "deepspeed", "zero"))


def _data_knobs(config: CaptureConfig, *, cuda: bool, cpus: int) -> list[tuple[Knob, dict[str, str]]]:
    workers = config.num_workers
    per_rank = max(1, cpus // max(1, config.nproc))
    knobs: list[tuple[Knob, dict[str, str]]] = []
    if workers == 0:
        knobs.append((Knob.NUM_WORKERS, {"num_workers": str(max(2, min(MAX_WORKERS, per_rank)))}))
    else:
        knobs.append((Knob.NUM_WORKERS, {"num_workers": str(2 * workers)}))
        if not config.persistent_workers:
            knobs.append((Knob.PERSISTENT_WORKERS, {"persistent_workers": "true"}))
        if (config.prefetch_factor or 2) < 4:
            knobs.append((Knob.PREFETCH_FACTOR, {"prefetch_factor": "4"}))
    if cuda and not config.pin_memory:
        knobs.append((Knob.PIN_MEMORY, {"pin_memory": "true"}))
    return knobs


def _comms_knobs(config: CaptureConfig, *, low_overlap: bool) -> list[tuple[Knob, dict[str, str]]]:
    if not _is_ddp(config):
        return []
    bucket = config.ddp_bucket_cap_mb or DDP_BUCKET_MB
    size = bucket / 4 if low_overlap else bucket * 4
    knobs = [(Knob.BUCKET_CAP_MB, {"ddp_bucket_cap_mb": f"{size:g}"})]
    if config.ddp_comm_hook == "default":  # half the bytes (bf16 compression needs NCCL; fp16 runs anywhere)
        knobs.append((Knob.COMM_HOOK, {"ddp_comm_hook": "fp16"}))
    if not config.ddp_gradient_as_bucket_view:
        knobs.append((Knob.GRADIENT_AS_BUCKET_VIEW, {"ddp_gradient_as_bucket_view": "true"}))
    return knobs


def _optimizer_knob(config: CaptureConfig) -> list[tuple[Knob, dict[str, str]]]:
    return [(Knob.OPTIMIZER_IMPL, {"optimizer_impl": "fused"})] if config.optimizer_impl == "default" else []


def _knobs(
    f: Finding, config: CaptureConfig, *, cuda: bool, cpus: int, low_overlap: bool, exchange: bool = False
) -> list[tuple[Knob, dict[str, str]]]:
    """The knobs that address finding ``f``, the likeliest first. ``exchange``: most of the
    collectives' time is an all-to-all or point-to-point exchange (:meth:`Evidence.exchange`),
    which DDP's buckets and hooks do not tune: no knob addresses its communication."""
    bound = f.bound
    if bound is BoundKind.DATA:
        return _data_knobs(config, cuda=cuda, cpus=cpus)
    if bound is BoundKind.TRANSFER:
        return [(Knob.PIN_MEMORY, {"pin_memory": "true"})] if cuda and not config.pin_memory else []
    if bound is BoundKind.COMMS or f.note is NoteKind.LOW_OVERLAP:
        return [] if exchange else _comms_knobs(config, low_overlap=low_overlap)
    if bound is BoundKind.GPU_COMPUTE:
        precision = [(Knob.MIXED_PRECISION, {"mixed_precision": "bf16"})] if config.mixed_precision == "no" else []
        return precision + _optimizer_knob(config)
    if bound in (BoundKind.LAUNCH, BoundKind.COMPUTE):
        return _optimizer_knob(config)
    return []


def _grows() -> bool:
    """Whether the ranks, which inherit this process's environment, already run with growable
    allocator segments (set in the shell, not in the config): no trial of what is on."""
    return grows_segments({name: os.environ.get(name, "") for name in ALLOC_CONF_VARS})


def candidates(
    config: CaptureConfig, baseline: Baseline, audit: ParamAudit | None, *, cpus: int, limit: int
) -> list[Candidate]:
    """The knobs to A/B, at most ``limit``: the audit's when it proved
    ``find_unused_parameters`` needless, the allocator's on a fragmented CUDA run, then the first
    knob of each finding (largest predicted gain first), then their second knobs, and so on."""
    cuda = baseline.device == "cuda"
    chosen: list[Candidate] = []
    if config.find_unused_parameters and audit is not None and not audit.unused:
        chosen.append(Candidate(Knob.FIND_UNUSED_PARAMETERS, {"find_unused_parameters": "false"}))
    if cuda and MemoryNote.FRAGMENTATION in baseline.memory and ALLOCATOR_ENV not in config.env and not _grows():
        overrides = {f"env.{ALLOCATOR_ENV}": EXPANDABLE}
        chosen.append(Candidate(Knob.EXPANDABLE_SEGMENTS, overrides, memory=MemoryNote.FRAGMENTATION))
    ranked = findings(baseline.verdict)
    low_overlap = any(f.note is NoteKind.LOW_OVERLAP for f in ranked)
    exchange = baseline.verdict.evidence.exchange() is not None
    per_finding = [
        [
            Candidate(knob, overrides, bound=f.bound, note=f.note, predicted=f.gain)
            for knob, overrides in _knobs(f, config, cuda=cuda, cpus=cpus, low_overlap=low_overlap, exchange=exchange)
        ]
        for f in ranked
    ]
    depth = max((len(k) for k in per_finding), default=0)
    for i in range(depth):
        for knobs in per_finding:
            if i < len(knobs) and all(c.overrides != knobs[i].overrides for c in chosen):
                chosen.append(knobs[i])
    return chosen[:limit]


def code_changes(baseline: Baseline, tried: list[Candidate]) -> list[CodeChange]:
    """The findings no knob tried addresses, with their gain and where in the code they are:
    the top operator issuing blocking syncs (sync-bound, host reads), the straggler's rank and
    slow phase."""
    addressed = {(c.bound, c.note) for c in tried}
    evidence = baseline.verdict.evidence
    changes: list[CodeChange] = []
    for f in findings(baseline.verdict):
        if (f.bound, f.note) in addressed:
            continue
        if f.bound not in _CODE and f.note is not NoteKind.HOST_SYNCS and f.bound is not None:
            # a knob's finding with no knob left to try: stated as it is, with its gain
            changes.append(CodeChange(bound=f.bound, gain=f.gain))
            continue
        if f.bound is BoundKind.SYNC or f.note is NoteKind.HOST_SYNCS:
            top = evidence.sync_sources[0] if evidence.sync_sources else None
            changes.append(
                CodeChange(
                    bound=f.bound,
                    note=f.note,
                    gain=f.gain,
                    op=None if top is None else top.op,
                    kind=None if top is None else top.kind,
                    per_step=None if top is None else top.per_step,
                    phase=None if top is None else top.phase,
                )
            )
        elif f.bound is BoundKind.STRAGGLER:
            slow = next((s for s in evidence.stragglers if s.rank == f.straggler_rank), None)
            rank = f.straggler_rank
            changes.append(
                CodeChange(bound=f.bound, gain=f.gain, rank=rank, phase=None if slow is None else slow.phase)
            )
        elif f.bound is not None or f.note is not None:
            changes.append(CodeChange(bound=f.bound, note=f.note, gain=f.gain))
    return changes


def agreement(predicted: Gain | None, measured: TrialMeasure | None) -> Agreement:  # noqa: PLR0911  (one per outcome)
    """Whether the measured gain is the predicted one (:class:`Agreement`): as predicted only
    when its interval excludes zero and holds the predicted gain (the re-timed gain, else the
    share where no what-if re-timed it) or lies within :data:`NEAR_EXPECTED` of it; partly when
    it excludes zero but is another gain; inconclusive when it holds zero; missed when it is
    slower beyond noise. A prediction of no gain (under :data:`NO_GAIN_PCT`) is as predicted
    when the interval holds zero, partly when it shows a gain. Without an interval (one
    repeat), the measured gain stands for it."""
    if predicted is None:
        return Agreement.NO_PREDICTION
    if measured is None:
        return Agreement.NOT_MEASURED
    expected = predicted.share_pct if predicted.gain_pct is None else predicted.gain_pct
    low = measured.gain_pct if measured.low_pct is None else measured.low_pct
    high = measured.gain_pct if measured.high_pct is None else measured.high_pct
    if expected < NO_GAIN_PCT:  # nothing predicted: as predicted when nothing beyond noise is measured
        return Agreement.AS_PREDICTED if low <= 0 <= high else Agreement.PARTLY
    if low <= 0 <= high:
        return Agreement.INCONCLUSIVE
    if high < 0:
        return Agreement.MISSED
    if low <= expected <= high or abs(measured.gain_pct - expected) <= NEAR_EXPECTED * max(abs(expected), 1.0):
        return Agreement.AS_PREDICTED
    return Agreement.PARTLY
