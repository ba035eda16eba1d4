"""``summary.json``: the phase timings of every rank, summarized (no torch needed).

Per phase: mean/median/p95 over every measured step of every rank and the share of the mean
step time; the phases (with ``device_sync`` and ``other``) tile each step, so shares sum to
100% and no aggregate phase stands beside its parts.

In a synchronous data-parallel run the collectives equalize step times: every rank waits
for the last one to arrive. So the *slowest rank* is the one that arrives last, the rank
with the most host time before the step's first collective (data wait, copy, forward);
throughput is set by the largest per-rank mean step time.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from tracekit.capture import files
from tracekit.errors import InputError

#: Phases that run before a step's first collective (DDP's all-reduce starts in backward).
PRE_COLLECTIVE = ("dataload_wait", "h2d", "forward")
#: The slowest rank is a straggler when it arrives later than the median of the others by
#: more than this share of the mean step time (the time every rank then spends waiting).
STRAGGLER_MIN_SHARE = 0.05


def p95(values: list[int]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)])


def _stats(values: list[int]) -> dict[str, float]:
    return {
        "mean_ns": statistics.fmean(values),
        "median_ns": float(statistics.median(values)),
        "p95_ns": p95(values),
    }


def read_phase_files(out_dir: Path) -> list[dict[str, Any]]:
    """Every ``phases.rank{r}.json`` in ``out_dir``, by rank."""
    records = []
    for path in sorted(out_dir.glob("phases.rank*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"unreadable phase timings ({exc})", path=path) from None
    return sorted(records, key=lambda r: int(r["rank"]))


def summarize(records: list[dict[str, Any]], *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of per-rank phase records (see ``Profiler.phase_record``)."""
    if not records:
        raise InputError("no phase timings to summarize")
    names: list[str] = []
    for rec in records:
        for step in rec["steps"]:
            names.extend(n for n in step["phases_ns"] if n not in names)
    pooled_steps = [s["step_ns"] for rec in records for s in rec["steps"]]
    mean_step = statistics.fmean(pooled_steps) if pooled_steps else 0.0
    phases = []
    for name in names:
        values = [s["phases_ns"].get(name, 0) for rec in records for s in rec["steps"]]
        stats = _stats(values)
        phases.append(
            {"phase": name, **stats, "share_pct": 100.0 * stats["mean_ns"] / mean_step if mean_step else None}
        )
    per_rank = []
    for rec in records:
        steps = rec["steps"]
        step_times = [s["step_ns"] for s in steps]
        per_rank.append(
            {
                "rank": rec["rank"],
                "steps": len(steps),
                "step_mean_ns": statistics.fmean(step_times) if steps else None,
                "phase_means_ns": {n: statistics.fmean([s["phases_ns"].get(n, 0) for s in steps]) for n in names}
                if steps
                else {},
                "memory": rec.get("memory", {}),
            }
        )
    for row in per_rank:
        row["pre_collective_mean_ns"] = sum(row["phase_means_ns"].get(n, 0.0) for n in PRE_COLLECTIVE)
    timed = [r for r in per_rank if r["step_mean_ns"]]
    samples = records[0].get("samples_per_step")
    world = max(int(r.get("world_size") or 1) for r in records)
    throughput: dict[str, Any] = {"slowest_rank": None, "steps_per_s": None, "global_samples_per_s": None}
    if timed:
        latest = max(timed, key=lambda r: r["pre_collective_mean_ns"])
        longest = max(timed, key=lambda r: r["step_mean_ns"])
        others = [r["pre_collective_mean_ns"] for r in timed if r is not latest]
        median_other = statistics.median(others) if others else None
        lateness = latest["pre_collective_mean_ns"] - (median_other or 0.0)
        straggler = median_other is not None and lateness > STRAGGLER_MIN_SHARE * max(r["step_mean_ns"] for r in timed)
        steps_per_s = 1e9 / longest["step_mean_ns"]
        throughput = {
            "slowest_rank": latest["rank"],
            "slowest_rank_pre_collective_mean_ns": latest["pre_collective_mean_ns"],
            "median_other_pre_collective_mean_ns": median_other,
            "lateness_ns": lateness if median_other is not None else None,
            "is_straggler": straggler,
            "slowest_rank_by": "host time before the step's first collective (" + ", ".join(PRE_COLLECTIVE) + ")",
            "step_mean_ns": longest["step_mean_ns"],
            "steps_per_s": steps_per_s,
            "global_samples_per_s": steps_per_s * samples * world if samples else None,
            "samples_per_step_per_rank": samples,
        }
    return {
        "schema": "tracekit.capture_summary",
        "schema_version": "1.0",
        **(extra or {}),
        "world_size": world,
        "ranks": [r["rank"] for r in records],
        "measured_steps": len(records[0]["steps"]),
        "step": {**(_stats(pooled_steps) if pooled_steps else {}), "count": len(pooled_steps)},
        "phases": phases,
        "per_rank": per_rank,
        "throughput": throughput,
    }


def write_summary(out_dir: str | Path, *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Summarize the phase files in ``out_dir`` into ``summary.json``; returns the summary."""
    folder = Path(out_dir)
    summary = summarize(read_phase_files(folder), extra=extra)
    files.write_json_atomic(folder / files.SUMMARY, summary)
    return summary
