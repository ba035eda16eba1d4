"""The charts of the HTML report, built once from the typed analysis (plotly).

Figures are plain plotly.js dicts (``{"data": [...], "layout": {...}}``) rather than
plotly.py graph objects, whose validation and template loading cost more than the rest of
the report together; the browser test checks that plotly.js draws every one of them.

Per-rank charts show every rank up to ``MAX_BARS`` ranks; beyond that, consecutive ranks are
grouped into bins (mean over the ranks of each bin, labelled ``a-b``), so 512 ranks stay
readable. The lateness heatmap keeps one row per rank (it is small: ranks x steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from tracekit.reports.document import JSON, Chart, Figure
from tracekit.reports.memory_tables import memory_unit
from tracekit.reports.tables import phase_label

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.results.analysis import Analysis
    from tracekit.results.rows import LedgerRow
    from tracekit.results.vocab import LedgerEntry

T = TypeVar("T")

#: Above this many ranks, per-rank bars are binned.
MAX_BARS: Final = 64
#: Grid lines (plotly_white's).
GRID: Final = "#ebf0f8"
COLORS: Final = {
    "compute": "#2e7d32",
    "comm": "#1565c0",
    "memory": "#f9a825",
    "idle": "#bdbdbd",
    "data": "#8e24aa",
    "host_sync": "#e53935",
    "capture_sync": "#ef9a9a",
    "blocking_collective": "#5e35b1",
    "one_time": "#6d4c41",
    "launch": "#fb8c00",
    "host_work": "#00897b",
    "dependency": "#00acc1",
    "peer": "#3949ab",
    "back_to_back": "#c5e1a5",
    "device_gap": "#dcedc8",
    "unobservable": "#e0e0e0",
    "unexplained": "#9e9e9e",
    "comms": "#1565c0",
    "straggler": "#ad1457",
    "transfer": "#ffb300",
    "switch": "#c5e1a5",
    "other": "#cfd8dc",
}


def _bins(ranks: Sequence[int]) -> list[list[int]]:
    ordered = sorted(ranks)
    if len(ordered) <= MAX_BARS:
        return [[r] for r in ordered]
    size = -(-len(ordered) // MAX_BARS)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _binned(
    rows: dict[int, T], fields: dict[str, Callable[[T], float | None]]
) -> tuple[list[JSON], dict[str, list[JSON]]]:
    """Labels and per-field means over the rank bins of ``rows`` (by rank)."""
    labels: list[JSON] = []
    values: dict[str, list[JSON]] = {f: [] for f in fields}
    for group in _bins(list(rows)):
        labels.append(f"rank {group[0]}" if len(group) == 1 else f"ranks {group[0]}-{group[-1]}")
        for f, get in fields.items():
            vals = [get(rows[r]) or 0.0 for r in group]
            values[f].append(sum(vals) / len(vals))
    return labels, values


def _layout(
    title: str,
    *,
    y: str,
    barmode: str | None = None,
    height: int = 380,
    xaxis: dict[str, JSON] | None = None,
    yaxis: dict[str, JSON] | None = None,
    left: int = 60,
) -> dict[str, JSON]:
    layout: dict[str, JSON] = {
        "title": {"text": title},
        "height": height,
        "margin": {"l": left, "r": 20, "t": 50, "b": 80},
        "yaxis": {"title": {"text": y}, "gridcolor": GRID, "zerolinecolor": GRID, **(yaxis or {})},
        # in the order of the traces (plotly reverses a stacked chart's), as the tables list them
        "legend": {"orientation": "h", "y": -0.25, "traceorder": "normal"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "xaxis": {"gridcolor": GRID, "zerolinecolor": GRID, **(xaxis or {})},
    }
    if barmode:
        layout["barmode"] = barmode
    return layout


def _fig(data: list[JSON], layout: dict[str, JSON]) -> Figure:
    return {"data": data, "layout": layout}


def _trace(kind: str, *, marker_color: JSON = None, **attributes: JSON) -> JSON:
    """One plotly.js trace; ``marker_color=`` stands for ``marker={"color": ...}``."""
    out: dict[str, JSON] = {"type": kind, **attributes}
    if marker_color is not None:
        out["marker"] = {"color": marker_color}
    return out


def _ms(values: list[JSON]) -> list[JSON]:
    return [v / 1e6 if isinstance(v, (int, float)) else v for v in values]


def _getter(key: str) -> Callable[[dict[str, float | None]], float | None]:
    return lambda values: values.get(key)


def step_time(a: Analysis) -> Chart | None:
    """Mean step time per rank with its p95."""
    if not a.steps.per_rank:
        return None
    labels, v = _binned({r.rank: r for r in a.steps.per_rank}, {"mean": lambda r: r.mean_ns, "p95": lambda r: r.p95_ns})
    data = [
        _trace("bar", x=labels, y=_ms(v["mean"]), name="mean", marker_color="#1565c0"),
        _trace("scatter", x=labels, y=_ms(v["p95"]), name="p95", mode="markers", marker_color="#e53935"),
    ]
    return Chart("steps", "Step time per rank", _fig(data, _layout("Step time per rank (host)", y="ms")))


def phases(a: Analysis) -> Chart | None:
    """Host time per step of each phase, stacked per rank."""
    names = [r.name for r in a.annotations.summary]
    if not names or not a.steps.per_rank:
        return None
    by_rank: dict[int, dict[str, float | None]] = {}
    for r in a.annotations.per_rank:
        by_rank.setdefault(r.rank or 0, {})[r.name] = r.step_mean_ns
    labels, v = _binned(by_rank, {n: _getter(n) for n in names})
    data = [_trace("bar", x=labels, y=_ms(v[n]), name=phase_label(n)[:60]) for n in names]
    return Chart(
        "phases", "Phases per rank", _fig(data, _layout("Phase time per step, per rank", y="ms", barmode="stack"))
    )


def gpu_breakdown(a: Analysis) -> Chart | None:
    """Compute / comm / memory / idle shares, stacked per rank."""
    host = a.host_breakdown is not None and not a.gpu_breakdown.per_rank
    rows = a.host_breakdown.per_rank if host and a.host_breakdown is not None else a.gpu_breakdown.per_rank
    if not rows:
        return None
    labels, v = _binned(
        {r.rank: r for r in rows},
        {
            "compute": lambda r: r.compute_pct,
            "comm": lambda r: r.comm_pct,
            "memory": lambda r: r.memory_pct,
            "idle": lambda r: r.idle_pct,
        },
    )
    data = [_trace("bar", x=labels, y=v[p], name=p, marker_color=COLORS[p]) for p in v]
    title = "Host time breakdown per rank (CPU-only run)" if host else "GPU time breakdown per rank"
    return Chart("gpu", title, _fig(data, _layout(title, y="% of measured time", barmode="stack")))


def _share_of(entry: LedgerEntry) -> Callable[[LedgerRow], float | None]:
    return lambda row: row.pct.get(entry, 0.0)


def ledger(a: Analysis) -> Chart | None:
    """The ledger's entries, stacked per rank (each bar 100%)."""
    led = a.ledger
    if led is None or not led.per_rank:
        return None
    entries = [s.entry for s in led.run]
    labels, v = _binned(
        {r.rank: r for r in led.per_rank},
        {e.value: _share_of(e) for e in entries},
    )
    data = [_trace("bar", x=labels, y=v[e], name=e, marker_color=COLORS.get(e, "#757575")) for e in v]
    title = "Where each rank's measured time went"
    return Chart("ledger", title, _fig(data, _layout(title, y="% of measured time", barmode="stack")))


def overlap(a: Analysis) -> Chart | None:
    """Share of collective time hidden by compute, per rank."""
    rows = {r.rank: r for r in a.overlap.per_rank if r.overlap_pct is not None}
    if not rows:
        return None
    labels, v = _binned(rows, {"overlap": lambda r: r.overlap_pct})
    data = [_trace("bar", x=labels, y=v["overlap"], name="overlap", marker_color=COLORS["comm"])]
    return Chart("overlap", "Comm/compute overlap", _fig(data, _layout("Collective time hidden by compute", y="%")))


def lateness(a: Analysis) -> Chart | None:
    """The rank x step lateness heatmap."""
    cells = a.stragglers.lateness_matrix
    if not cells:
        return None
    ranks = sorted({c.rank for c in cells})
    steps = sorted({c.step for c in cells})
    grid = {(c.rank, c.step): (c.lateness_ns or 0) / 1e6 for c in cells}
    z: list[JSON] = [[grid.get((r, s)) for s in steps] for r in ranks]
    data = [
        _trace(
            "heatmap",
            z=z,
            x=[str(s) for s in steps],
            y=[str(r) for r in ranks],
            colorscale="Reds",
            colorbar={"title": {"text": "ms late"}},
            hovertemplate="rank %{y}, step %{x}: %{z:.2f} ms<extra></extra>",
        )
    ]
    layout = _layout(
        "Lateness at collectives (rank x step)",
        y="rank",
        height=max(300, min(900, 20 * len(ranks) + 120)),
        xaxis={"title": {"text": "step"}, "type": "category"},
        yaxis={"type": "category", "autorange": "reversed"},
    )
    return Chart("lateness", "Straggler lateness", _fig(data, layout))


@dataclass(frozen=True)
class _Lost:
    data: float
    sync: float


def data_and_syncs(a: Analysis) -> Chart | None:
    """DataLoader idle share and GPU idle after syncs, per rank."""
    dl = {r.rank: r for r in a.dataloader.per_rank}
    sy = {r.rank: r for r in a.host_syncs.per_rank}
    if not any(r.fetch_ns for r in dl.values()) and not any(r.idle_after_ns for r in sy.values()):
        return None
    rows = {
        r: _Lost(
            data=(d.share_pct or 0.0) if (d := dl.get(r)) else 0.0,
            sync=100 * (y.idle_after_ns if (y := sy.get(r)) else 0) / max(1, d.window_ns if d else 1),
        )
        for r in sorted(set(dl) | set(sy))
    }
    labels, v = _binned(rows, {"data": lambda r: r.data, "sync": lambda r: r.sync})
    data = [
        _trace("bar", x=labels, y=v["data"], name="waiting for data", marker_color=COLORS["data"]),
        _trace("bar", x=labels, y=v["sync"], name="idle after host syncs", marker_color=COLORS["host_sync"]),
    ]
    return Chart(
        "dataloader",
        "DataLoader gaps and host syncs",
        _fig(data, _layout("Device time lost to data and to host syncs", y="% of measured time")),
    )


def idle_causes(a: Analysis) -> Chart | None:
    """GPU idle by cause, stacked per rank."""
    if a.idle_causes is None or not a.idle_causes.per_rank:
        return None
    causes = list(dict.fromkeys(r.cause.value for r in a.idle_causes.per_rank))
    by_rank: dict[int, dict[str, float | None]] = {}
    for r in a.idle_causes.per_rank:
        by_rank.setdefault(r.rank, {})[r.cause.value] = r.idle_ns / 1e6
    labels, v = _binned(by_rank, {c: _getter(c) for c in causes})
    data = [_trace("bar", x=labels, y=v[c], name=c, marker_color=COLORS.get(c, "#9e9e9e")) for c in causes]
    return Chart("idle", "GPU idle by cause", _fig(data, _layout("GPU idle time by cause", y="ms", barmode="stack")))


def _unique(labels: list[str]) -> list[str]:
    """``labels``, a repeated one numbered (``name (2)``): a category axis draws equal labels as one bar."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def kernels(a: Analysis, top: int = 15) -> Chart | None:
    """Top kernels by total time."""
    rows = list(reversed(a.kernels.top[:top]))
    if not rows:
        return None
    names: list[JSON] = list(_unique([r.name if len(r.name) <= 60 else r.name[:59] + "…" for r in rows]))
    data = [
        _trace(
            "bar",
            y=names,
            x=[r.total_ns / 1e6 for r in rows],
            orientation="h",
            marker_color=[COLORS["comm"] if r.category == "collective" else COLORS["compute"] for r in rows],
            hovertext=[r.name for r in rows],
            name="total ms",
        )
    ]
    layout = _layout(
        "Top GPU kernels (total over ranks)",
        y="",
        height=max(300, 28 * len(rows) + 120),
        xaxis={"title": {"text": "ms"}},
        left=380,
    )
    return Chart("kernels", "Top kernels", _fig(data, layout))


#: Ranks drawn in the memory timeline (those with the highest peaks).
MEMORY_LINES: Final = 8


def memory_timeline(a: Analysis) -> Chart | None:
    """Allocated (and reserved, dotted) memory over time, per rank and device, from its first sample."""
    memory = a.memory
    if memory is None or not memory.timeline:
        return None
    series: dict[tuple[int, str], list[tuple[int, int | None, int | None]]] = {}
    for p in memory.timeline:
        label = f"rank {p.rank} {p.device_type or '?'}{'' if p.device is None else f':{p.device}'}"
        series.setdefault((p.rank, label), []).append((p.time_ns, p.allocated_bytes, p.reserved_bytes))
    top = sorted(series, key=lambda k: -max((v[1] or v[2] or 0) for v in series[k]))[:MEMORY_LINES]
    unit = memory_unit(a)
    data: list[JSON] = []
    for key in sorted(top):
        points = series[key]
        start = points[0][0]
        x: list[JSON] = [(t - start) / 1e6 for t, _, _ in points]
        if any(v[1] is not None for v in points):
            data.append(
                _trace("scatter", x=x, y=[unit.value(v[1]) for v in points], name=f"{key[1]} allocated", mode="lines")
            )
        if any(v[2] is not None for v in points):
            data.append(
                _trace(
                    "scatter",
                    x=x,
                    y=[unit.value(v[2]) for v in points],
                    name=f"{key[1]} reserved",
                    mode="lines",
                    line={"dash": "dot"},
                )
            )
    title = f"Memory over time ({unit.name}; dotted: reserved)"
    layout = _layout(title, y=unit.name, xaxis={"title": {"text": "ms from the rank's first sample"}})
    return Chart("memory_timeline", "Memory over time", _fig(data, layout))


def memory_categories(a: Analysis) -> Chart | None:
    """What fills memory at each rank's peak, stacked by category."""
    memory = a.memory
    if memory is None or not memory.categories:
        return None
    categories = list(dict.fromkeys(c.category for c in memory.categories))
    unit = memory_unit(a)
    by_rank: dict[int, dict[str, float | None]] = {}
    for c in memory.categories:
        by_rank.setdefault(c.rank, {})[c.category] = unit.value(c.at_peak_bytes)
    labels, v = _binned(by_rank, {c: _getter(c) for c in categories})
    data = [_trace("bar", x=labels, y=v[c], name=c) for c in categories]
    layout = _layout(f"Memory at the peak by category ({unit.name})", y=unit.name, barmode="stack")
    return Chart("memory_categories", "Memory at the peak by category", _fig(data, layout))
