"""The capture summary's tables (placeholder until the typed capture summary lands)."""

from __future__ import annotations

from typing import Any

from tracekit.reports.tables import Table, _table, ms, pct


def capture_tables(cap: Any) -> list[Table]:
    """The capture summary (phases, throughput, memory) when the folder had one."""
    if not cap:
        return []
    phase_rows = (
        [r["phase"], ms(r["mean_ns"]), ms(r["median_ns"]), ms(r["p95_ns"]), pct(r.get("share_pct"))]
        for r in cap.get("phases", [])
    )
    t = cap.get("throughput", {})
    facts = [
        ("steps/s", f"{t['steps_per_s']:.2f}" if t.get("steps_per_s") else "-"),
        ("global samples/s", f"{t['global_samples_per_s']:,.0f}" if t.get("global_samples_per_s") else "-"),
        ("slowest rank", str(t.get("slowest_rank"))),
        ("straggler", "yes" if t.get("is_straggler") else "no"),
    ]
    for r in cap.get("per_rank", []):
        mem = r.get("memory", {})
        peak = mem.get("peak_allocated_bytes", mem.get("peak_rss_bytes"))
        label = "allocated" if "peak_allocated_bytes" in mem else "RSS"
        if peak is not None:
            facts.append((f"rank {r['rank']} peak memory", f"{peak / 2**20:,.0f} MiB {label}"))
    return [
        _table(
            "capture_phases",
            "Capture summary: phases (host ms)",
            ["phase", "mean", "median", "p95", "share"],
            phase_rows,
            "From summary.json written by tracekit capture.",
            numeric=[False, True, True, True, True],
        ),
        _table(
            "capture_facts",
            "Capture summary: throughput and memory",
            ["measure", "value"],
            facts,
            numeric=[False, False],
        ),
    ]
