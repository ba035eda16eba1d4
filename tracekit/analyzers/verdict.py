"""The verdict: what bounds the run, with the evidence and the knobs to turn.

Every candidate bound gets a *cost*: the share of the measured time it accounts for, as
the mean over ranks (GPU time on GPU runs; host time on CPU-only runs, where the host is
the device):

* ``data-bound``: device idle while the host fetches batches;
* ``comms-bound``: exposed collective time, less the part spent waiting for late ranks;
* ``straggler-bound``: that waiting, caused by the ranks that arrive last;
* ``sync-bound``: GPU idle right after host syncs;
* ``host-bound``: GPU idle while the host is busy in Python/launches (launch-bound);
* ``gpu-compute-bound`` (``compute-bound`` on CPU): time in compute.

Compute-bound is where a run should be; every other bound is avoidable waste. So the
primary verdict is the largest waste above its threshold (data wait above ~5% of the step
makes a run data-bound even when compute is the larger share, as common practice has it),
and compute-bound only when no waste passes its threshold. Every other waste above its
threshold is a secondary finding. All thresholds are the constants below, in this one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

from tracekit.analyzers.stats import num
from tracekit.analyzers.stragglers import StragglerResult, describe_cause

#: Data wait above this share of step time makes a run data-bound (common practice: ~5%).
DATA_MIN_SHARE: Final = 0.05
#: Exposed communication above this share is a finding.
COMMS_MIN_SHARE: Final = 0.10
#: GPU idle after host syncs above this share is a finding.
SYNC_MIN_SHARE: Final = 0.05
#: Launch-bound idle above this share is a finding.
HOST_MIN_SHARE: Final = 0.10
#: Waiting for stragglers above this share is a finding.
STRAGGLER_MIN_SHARE: Final = 0.05
#: GPU idle that no host activity in the trace explains, above this share, is a finding.
IDLE_MIN_SHARE: Final = 0.20
#: Comm/compute overlap below this (with comms above COMMS_MIN_SHARE) is a finding.
LOW_OVERLAP_PCT: Final = 50.0
#: Confidence is high when the primary waste is at least this multiple of its threshold and
#: of the next waste, medium at MEDIUM_CONFIDENCE_RATIO, low below.
HIGH_CONFIDENCE_RATIO: Final = 2.0
MEDIUM_CONFIDENCE_RATIO: Final = 1.25

THRESHOLDS: Final = {
    "data-bound": DATA_MIN_SHARE,
    "comms-bound": COMMS_MIN_SHARE,
    "straggler-bound": STRAGGLER_MIN_SHARE,
    "sync-bound": SYNC_MIN_SHARE,
    "host-bound": HOST_MIN_SHARE,
    "gpu-idle": IDLE_MIN_SHARE,
}

RECOMMENDATIONS: Final[dict[str, tuple[str, ...]]] = {
    "data-bound": (
        "Raise DataLoader num_workers (start at 4-8 per GPU) so batches are prepared ahead of the step.",
        "Set persistent_workers=True so workers survive between epochs.",
        "Set pin_memory=True and copy with .to(device, non_blocking=True) to overlap the copy with compute.",
        "Raise prefetch_factor (default 2) if workers keep up on average but not at every step.",
        "Move decoding/augmentation off the training process (pre-process, or GPU augmentation).",
    ),
    "comms-bound": (
        "Tune DDP bucket_cap_mb (default 25): larger buckets mean fewer, better-utilized collectives.",
        "Keep communication overlapped with backward: avoid find_unused_parameters=True unless needed, "
        "use gradient_as_bucket_view=True.",
        "Send less: bf16 gradients (a DDP comm hook such as bf16_compress_hook), or FSDP/ZeRO sharding.",
        "Do more compute per collective: a larger per-rank batch or gradient accumulation with no_sync().",
        "Check the interconnect: NCCL_DEBUG=INFO shows the transport (NVLink/IB vs. sockets).",
    ),
    "straggler-bound": (
        "Look at the straggler's cause below: the phase that takes longer on it than on the median rank.",
        "A slow data phase on one rank: give that rank's loader more workers or check its storage.",
        "A slow compute phase on one rank: check that host/GPU for throttling, other processes, or a "
        "slower device (nvidia-smi -q -d PERFORMANCE,CLOCK).",
        "Uneven work per rank (variable sequence lengths): bucket or pack samples to balance the load.",
    ),
    "sync-bound": (
        "Remove per-step .item(), .cpu(), .tolist() and print(loss): keep metrics on the device and read "
        "them every N steps.",
        "Find the syncs: torch.cuda.set_sync_debug_mode('warn') reports every synchronizing call.",
        "Avoid data-dependent shapes (torch.nonzero, boolean masks) in the step, which force a sync.",
    ),
    "host-bound": (
        "The GPU starves while Python launches kernels: capture the step with CUDA graphs, or "
        "torch.compile(mode='reduce-overhead').",
        "Fuse small ops (torch.compile, fused optimizers: AdamW(fused=True) / foreach=True).",
        "Raise the per-GPU batch size so each launch does more work.",
    ),
    "gpu-idle": (
        "The GPU waits while the trace shows no host activity: the time goes to code the profiler does not "
        "record (Python outside operators, checkpointing, logging, evaluation, torch.compile).",
        "Sample the host during the gaps: py-spy record -o profile.svg --pid <training process>.",
        "Record Python frames with torch.profiler(with_stack=True) to see what runs between operators.",
        "Profile steady-state steps only: compilation and warmup belong in the profiler's wait/warmup steps.",
    ),
    "gpu-compute-bound": (
        "The GPU is busy: make each kernel cheaper. Use bf16 autocast, and TF32 for fp32 matmuls "
        "(torch.backends.cuda.matmul.allow_tf32 = True).",
        "Use fused attention (torch.nn.functional.scaled_dot_product_attention / FlashAttention).",
        "torch.compile to fuse elementwise ops; look at the top kernels for the largest targets.",
    ),
    "compute-bound": (
        "The host computes most of the step: on CPU, use more threads per rank (torch.set_num_threads) "
        "or fewer ranks per machine; on GPUs, this run would be compute-bound.",
    ),
}


@dataclass(frozen=True)
class Finding:
    """One bound (or notable fact) with its cost, evidence and recommendations."""

    kind: str
    title: str
    share_pct: float | None
    confidence: str
    evidence: tuple[str, ...]
    recommendations: tuple[str, ...]
    numbers: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """The primary bound, the secondary findings and the cost of every candidate."""

    primary: Finding
    secondary: tuple[Finding, ...]
    #: bound, share_pct (mean over ranks), max_rank_share_pct, worst_rank
    costs: pl.DataFrame
    #: "gpu" or "host (CPU-only run)"
    measured_on: str


@dataclass(frozen=True)
class Costs:
    """Per-rank time of each candidate bound, in ns, with the window it is a share of."""

    #: rank, window_ns, data_ns, comms_ns, straggler_ns, sync_ns, host_ns, idle_ns, compute_ns
    per_rank: pl.DataFrame
    measured_on: str


def _cost_table(costs: Costs) -> pl.DataFrame:
    names = {
        "data_ns": "data-bound",
        "comms_ns": "comms-bound",
        "straggler_ns": "straggler-bound",
        "sync_ns": "sync-bound",
        "host_ns": "host-bound",
        "idle_ns": "gpu-idle",
        "compute_ns": "gpu-compute-bound" if costs.measured_on == "gpu" else "compute-bound",
    }
    df = costs.per_rank
    rows = []
    for col, bound in names.items():
        share = (df[col] / df["window_ns"]).fill_nan(0.0).fill_null(0.0)
        worst = int(df["rank"][int(share.arg_max() or 0)]) if df.height else None
        rows.append(
            {
                "bound": bound,
                "share_pct": 100 * num(share.mean()),
                "max_rank_share_pct": 100 * num(share.max()),
                "worst_rank": worst,
            }
        )
    return pl.DataFrame(rows).sort("share_pct", descending=True)


def decide(
    costs: Costs,
    *,
    stragglers: StragglerResult,
    evidence: dict[str, tuple[str, ...]],
    extra_findings: tuple[Finding, ...] = (),
) -> Verdict:
    """Pick the primary bound and the secondary findings from the costs."""
    table = _cost_table(costs)
    ranked = list(table.iter_rows(named=True))
    if not ranked or ranked[0]["share_pct"] <= 0:
        primary = Finding(
            "undetermined",
            "No verdict: nothing was measured in these traces",
            None,
            "low",
            ("no steps, no device activity and no collectives to weigh",),
            (),
        )
        return Verdict(primary, extra_findings, table, costs.measured_on)
    waste = [r for r in ranked if r["bound"] in THRESHOLDS and r["share_pct"] >= 100 * THRESHOLDS[r["bound"]]]
    if waste:
        top = waste[0]
        over_threshold = top["share_pct"] / (100 * THRESHOLDS[top["bound"]])
        over_next = top["share_pct"] / waste[1]["share_pct"] if len(waste) > 1 else float("inf")
        margin = min(over_threshold, over_next)
    else:
        top = next(r for r in ranked if r["bound"] not in THRESHOLDS)
        margin = HIGH_CONFIDENCE_RATIO if top["share_pct"] >= 50 else MEDIUM_CONFIDENCE_RATIO
    confidence = "high" if margin >= HIGH_CONFIDENCE_RATIO else "medium" if margin >= MEDIUM_CONFIDENCE_RATIO else "low"
    primary = _finding(top, confidence, stragglers, evidence)
    secondary = [_finding(row, "medium", stragglers, evidence) for row in waste if row is not top]
    return Verdict(primary, tuple(secondary) + extra_findings, table, costs.measured_on)


def _finding(
    row: dict[str, object], confidence: str, stragglers: StragglerResult, evidence: dict[str, tuple[str, ...]]
) -> Finding:
    bound = str(row["bound"])
    share = num(row["share_pct"])
    lines = [
        f"{share:.1f}% of the measured time on average over ranks "
        f"(most on rank {row['worst_rank']}: {num(row['max_rank_share_pct']):.1f}%)"
    ]
    lines += evidence.get(bound, ())
    title = {
        "data-bound": "Data-bound: the device waits for the DataLoader",
        "comms-bound": "Comms-bound: collectives are exposed, not hidden behind compute",
        "straggler-bound": "Straggler-bound: ranks wait at collectives for the last rank to arrive",
        "sync-bound": "Sync-bound: host syncs drain the GPU queue every step",
        "host-bound": "Host/launch-bound: the GPU starves while the host launches work",
        "gpu-idle": "The GPU sits idle, and the trace does not show why",
        "gpu-compute-bound": "GPU-compute-bound: the GPU is busy computing",
        "compute-bound": "Compute-bound: the host is busy computing (CPU-only run)",
    }[bound]
    numbers: dict[str, object] = {
        "share_pct": share,
        "worst_rank": row["worst_rank"],
        "max_rank_share_pct": row["max_rank_share_pct"],
    }
    recs = RECOMMENDATIONS.get(bound, ())
    if bound == "straggler-bound" and stragglers.stragglers:
        s = stragglers.stragglers[0]
        title = f"Straggler-bound: rank {s.rank} arrives last and the others wait for it"
        numbers.update(straggler_rank=s.rank, cause=s.cause, cause_excess_ns=s.cause_excess_ns)
        recs = (f"Rank {s.rank}: {describe_cause(s)}.", *recs)
    return Finding(bound, title, share, confidence, tuple(lines), recs, numbers)
