"""The tables every shareable report shows, built once from the JSON document.

Markdown and HTML render the same :class:`Table` objects, so a number cannot differ between
them. Per-rank tables keep the ``limit`` ranks with the largest value of the table's sort key
when a run has more ranks (the JSON keeps them all) and say so in the caption.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class Table:
    """A titled table of display strings; ``numeric`` columns sort as numbers in HTML."""

    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    numeric: tuple[bool, ...] = ()
    empty: str = ""


def ms(ns: Any) -> str:
    """ns as ms."""
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def pct(value: Any) -> str:
    """A percentage."""
    return "-" if value is None else f"{value:.1f}%"


def short(name: Any, limit: int = 90) -> str:
    """A long name cut to ``limit`` characters."""
    text = str(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _limited(rows: list[Row], key: str, limit: int | None) -> tuple[list[Row], str]:
    if limit is None or len(rows) <= limit:
        return rows, ""
    kept = sorted(rows, key=lambda r: (r.get(key) is None, -(r.get(key) or 0)))[:limit]
    kept.sort(key=lambda r: r.get("rank", 0))
    return kept, f" {limit} of {len(rows)} ranks shown (largest {key}); all are in the JSON."


def _table(
    key: str,
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    caption: str = "",
    *,
    numeric: Sequence[bool] | None = None,
    empty: str = "",
) -> Table:
    body = tuple(tuple(r) for r in rows)
    flags = tuple(numeric) if numeric is not None else tuple(i > 0 for i in range(len(columns)))
    return Table(key, title, tuple(columns), body, caption.strip(), flags, empty)


def run_facts(doc: dict[str, Any]) -> Table:
    """Run facts as a two-column table."""
    run = doc["run"]
    ranks = run["ranks"]
    steps = doc["steps"]["per_rank"]
    rows = [
        ("ranks", f"{len(ranks)} ({', '.join(str(r['rank']) for r in ranks[:16])}{'…' if len(ranks) > 16 else ''})"),
        ("world size", str(run.get("world_size") or "not recorded")),
        ("backend", str(run.get("backend") or "not recorded")),
        ("devices", ", ".join(run.get("devices") or []) or "none recorded"),
        ("GPU activity", "yes" if run.get("has_gpu") else "none (CPU-only run)"),
        ("steps per rank", str(max((s["count"] for s in steps), default=0))),
        ("trace span", f"{ms(run.get('span_ns'))} ms"),
        ("trace files", f"{len(ranks)}" + (f", {len(run['skipped'])} skipped" if run.get("skipped") else "")),
        ("tracekit", str(doc.get("tracekit_version"))),
    ]
    if doc.get("analysis_seconds") is not None:
        rows.append(("analysis time", f"{doc['analysis_seconds']:.2f} s"))
    return _table("facts", "Facts", ["fact", "value"], rows, numeric=[False, False])


def trace_files(doc: dict[str, Any]) -> Table:
    """Which file is which rank, and how that was decided; skipped files."""
    rows = [
        (str(r["rank"]), short(r["source"], 120), r["rank_source"], f"{r['events']:,}") for r in doc["run"]["ranks"]
    ]
    rows += [("skipped", short(s["path"], 120), short(s["reason"], 120), "") for s in doc["run"].get("skipped", [])]
    return _table(
        "files", "Trace files", ["rank", "file", "rank from", "events"], rows, numeric=[True, False, False, True]
    )


def step_times(doc: dict[str, Any], limit: int | None) -> Table:
    """Step time per rank."""
    rows, note = _limited(doc["steps"]["per_rank"], "mean_ns", limit)
    return _table(
        "steps",
        "Step time per rank (host, ms)",
        ["rank", "steps", "mean", "median", "p95", "min", "max"],
        (
            [
                str(r["rank"]),
                str(r["count"]),
                ms(r["mean_ns"]),
                ms(r["median_ns"]),
                ms(r["p95_ns"]),
                ms(r["min_ns"]),
                ms(r["max_ns"]),
            ]
            for r in rows
        ),
        note,
        empty="No ProfilerStep#N ranges in these traces: per-step figures are not available.",
    )


def phases(doc: dict[str, Any]) -> Table:
    """Phase (top-level annotation) breakdown over ranks and steps."""
    ann = doc["annotations"]
    gpu = doc["run"].get("has_gpu")
    rank_steps = max(1, sum(r["count"] for r in doc["steps"]["per_rank"]))
    columns = ["phase", "mean ms/step", "median", "p95", "share", *(["GPU ms/step"] if gpu else [])]
    rows = (
        [
            short(r["name"]),
            ms(r["step_mean_ns"]),
            ms(r["step_median_ns"]),
            ms(r["step_p95_ns"]),
            pct(r["cpu_pct"]),
            *([ms(r["gpu_ns"] / rank_steps)] if gpu else []),
        ]
        for r in ann["summary"]
    )
    return _table(
        "phases",
        "Phases (host time per step, over ranks and steps)",
        columns,
        rows,
        f"Level: {ann['level']}. Shares are of step time and sum to 100%.",
        numeric=[False, *([True] * (len(columns) - 1))],
        empty="No user annotations (record_function / NVTX ranges) were recorded.",
    )


def phases_per_rank(doc: dict[str, Any], limit: int | None) -> Table:
    """Mean host ms per step of each phase, per rank (the stacked-bar data)."""
    names = [r["name"] for r in doc["annotations"]["summary"]]
    by_rank: dict[int, dict[str, Any]] = {}
    for r in doc["annotations"]["per_rank"]:
        by_rank.setdefault(r["rank"], {"rank": r["rank"]})[r["name"]] = r["step_mean_ns"]
    rows = list(by_rank.values())
    for row in rows:
        row["total"] = sum(v or 0 for k, v in row.items() if k in names)
    rows, note = _limited(rows, "total", limit)
    return _table(
        "phases_per_rank",
        "Phases per rank (host ms per step)",
        ["rank", *map(short, names)],
        ([str(r["rank"]), *(ms(r.get(n)) for n in names)] for r in rows),
        note,
        empty="No user annotations were recorded.",
    )


def gpu_breakdown(doc: dict[str, Any], limit: int | None) -> Table:
    """GPU time breakdown and overlap per rank."""
    overlap = {r["rank"]: r for r in doc["overlap"]["per_rank"]}
    rows = [
        dict(r, **{f"ov_{k}": v for k, v in overlap.get(r["rank"], {}).items()})
        for r in doc["gpu_breakdown"]["per_rank"]
    ]
    rows, note = _limited(rows, "idle_pct", limit)
    window = "profiler steps" if doc["gpu_breakdown"]["window"] == "steps" else "first to last GPU activity"
    return _table(
        "gpu",
        "GPU time breakdown per rank",
        ["rank", "window ms", "compute", "comm", "memory", "idle", "collective ms", "overlap"],
        (
            [
                str(r["rank"]),
                ms(r["window_ns"]),
                pct(r["compute_pct"]),
                pct(r["comm_pct"]),
                pct(r["memory_pct"]),
                pct(r["idle_pct"]),
                ms(r.get("ov_comm_ns")),
                pct(r.get("ov_overlap_pct")),
            ]
            for r in rows
        ),
        f"Window: {window}. Wall-clock unions over all streams; shares sum to 100%. comm = collectives not "
        "hidden by compute; overlap = share of collective time during which compute runs." + note,
        empty="No GPU activity was recorded (a CPU-only run): nothing to break down.",
    )


def host_breakdown(doc: dict[str, Any], limit: int | None) -> Table | None:
    """The host timeline of a CPU-only run."""
    host = doc.get("host_breakdown")
    if not host:
        return None
    rows, note = _limited(host["per_rank"], "idle_pct", limit)
    return _table(
        "host",
        "Host time breakdown per rank (CPU-only run)",
        ["rank", "window ms", "operators", "collectives", "idle"],
        (
            [str(r["rank"]), ms(r["window_ns"]), pct(r["compute_pct"]), pct(r["comm_pct"]), pct(r["idle_pct"])]
            for r in rows
        ),
        "The host is the device of a CPU-only run: operators as compute, gloo/MPI work as collectives." + note,
    )


def stragglers(doc: dict[str, Any], limit: int | None) -> Table:
    """Who arrives last at collectives."""
    s = doc["stragglers"]
    rows, note = _limited(s["per_rank"], "score", limit)
    named = ", ".join(f"rank {x['rank']} ({x['cause']})" for x in s["stragglers"]) or "none"
    return _table(
        "stragglers",
        "Collectives: who arrives last",
        ["rank", "last / collectives", "mean lateness ms", "others waited ms", "score"],
        (
            [
                str(r["rank"]),
                f"{r['times_last']}/{r['instances']}",
                ms(r["mean_lateness_ns"]),
                ms(r["caused_wait_ns"]),
                pct(100 * (r["score"] or 0)),
            ]
            for r in rows
        ),
        f"Stragglers: {named}. The score is the others' wait a rank causes per step, as a share of the step." + note,
        empty="No collectives were matched across ranks (a single rank, or no communication).",
    )


def collectives(doc: dict[str, Any], limit: int = 40) -> Table:
    """Matched collective instances."""
    inst = doc["collectives"]["instances"]
    rows = inst[:limit]
    note = f" {limit} of {len(inst)} shown." if len(inst) > limit else ""
    return _table(
        "collectives",
        "Collective instances matched across ranks",
        ["operation", "k", "ranks", "latency floor ms", "spread ms", "last rank", "last ranks"],
        (
            [
                short(r["op"], 40),
                str(r["k"]),
                str(r["ranks"]),
                ms(r["floor_ns"]),
                ms(r["spread_ns"]),
                str(r["last_rank"]),
                ", ".join(map(str, r["last_ranks"] or [])),
            ]
            for r in rows
        ),
        "Latency floor = the shortest duration over ranks; the rest of each rank's duration is waiting." + note,
        numeric=[False, True, True, True, True, True, False],
        empty="No collectives were recorded.",
    )


def dataloader(doc: dict[str, Any], limit: int | None) -> Table:
    """DataLoader gaps per rank."""
    dl = doc["dataloader"]
    rows, note = _limited(dl["per_rank"], "share_pct", limit)
    has = any(r["fetch_ns"] for r in dl["per_rank"])
    return _table(
        "dataloader",
        "DataLoader gaps per rank",
        ["rank", "host fetch ms", "device idle ms", "share"],
        ([str(r["rank"]), ms(r["fetch_ns"]), ms(r["idle_ns"]), pct(r["share_pct"])] for r in rows) if has else [],
        f"Measured as {dl['measure']}." + note,
        empty="No DataLoader fetch ranges (enumerate(DataLoader)#…__next__, tracekit.phase/dataload_wait) "
        "were recorded.",
    )


def syncs(doc: dict[str, Any], limit: int | None) -> Table:
    """Host syncs per rank."""
    per = doc["host_syncs"]["per_rank"]
    rows, note = _limited(per, "idle_after_ns", limit)
    has = any(r["sync_calls"] or r["sync_ops"] or r["gpu_sync_events"] for r in per)
    return _table(
        "syncs",
        "Host syncs per rank",
        ["rank", "sync calls / step", ".item() / step", "GPU sync events", "GPU idle after ms"],
        (
            [
                str(r["rank"]),
                f"{r['per_step_calls']:.1f}",
                f"{r['per_step_ops']:.1f}",
                str(r["gpu_sync_events"]),
                ms(r["idle_after_ns"]),
            ]
            for r in rows
        )
        if has
        else [],
        note,
        empty="No host syncs were recorded.",
    )


def idle_causes(doc: dict[str, Any], limit: int | None) -> Table:
    """GPU idle by cause per rank."""
    idle = doc.get("idle_causes")
    causes = ("data", "host_sync", "peer", "launch", "unexplained")
    by_rank: dict[int, dict[str, Any]] = {}
    for r in (idle or {}).get("per_rank", []):
        by_rank.setdefault(r["rank"], {"rank": r["rank"], "total": 0})[r["cause"]] = r["idle_ns"]
        by_rank[r["rank"]]["total"] += r["idle_ns"]
    rows, note = _limited(list(by_rank.values()), "total", limit)
    return _table(
        "idle",
        "GPU idle by cause (ms)",
        ["rank", *causes],
        ([str(r["rank"]), *(ms(r.get(c, 0)) for c in causes)] for r in rows),
        "Each idle interval has one cause, in priority order: data, host sync, peer, launch, unexplained." + note,
        empty="No GPU idle to attribute (no GPU activity).",
    )


def kernels(doc: dict[str, Any], top: int = 15) -> Table:
    """Top GPU kernels."""
    rows = doc["kernels"]["top"][:top]
    return _table(
        "kernels",
        f"Top {min(top, len(rows))} GPU kernels over all ranks",
        ["kernel", "category", "count", "total ms", "mean us", "share"],
        (
            [
                short(r["name"]),
                str(r["category"]),
                f"{r['count']:,}",
                ms(r["total_ns"]),
                f"{r['mean_ns'] / 1e3:,.1f}",
                pct(r["share_pct"]),
            ]
            for r in rows
        ),
        "Share of summed GPU activity time.",
        numeric=[False, False, True, True, True, True],
        empty="No GPU kernels were recorded.",
    )


def capture_tables(doc: dict[str, Any]) -> list[Table]:
    """The capture summary (phases, per rank, throughput) when the folder had one."""
    from tracekit.reports.capture_tables import capture_tables as build  # noqa: PLC0415 (it imports this module)
    from tracekit.results.capture import as_capture_summary  # noqa: PLC0415

    cap = doc.get("capture")
    return build(as_capture_summary(cap, source="capture summary in the report")) if cap else []


Builder = Callable[[dict[str, Any]], Table]


def all_tables(doc: dict[str, Any], *, limit: int | None) -> list[Table]:
    """Every table, in report order (after the verdict)."""
    tables = [
        run_facts(doc),
        step_times(doc, limit),
        phases(doc),
        phases_per_rank(doc, limit),
        gpu_breakdown(doc, limit),
    ]
    host = host_breakdown(doc, limit)
    tables += [host] if host else []
    tables += [
        stragglers(doc, limit),
        collectives(doc),
        dataloader(doc, limit),
        syncs(doc, limit),
        idle_causes(doc, limit),
        kernels(doc),
        *capture_tables(doc),
        trace_files(doc),
    ]
    return tables
