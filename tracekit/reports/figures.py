"""The charts of the HTML report, built once from the JSON document (plotly).

Figures are plain plotly.js dicts (``{"data": [...], "layout": {...}}``) rather than
plotly.py graph objects, whose validation and template loading cost more than the rest of
the report together; the browser test checks that plotly.js draws every one of them.

Per-rank charts show every rank up to ``MAX_BARS`` ranks; beyond that, consecutive ranks are
grouped into bins (mean over the ranks of each bin, labelled ``a-b``), so 512 ranks stay
readable. The lateness heatmap keeps one row per rank (it is small: ranks x steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

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
    "peer": "#3949ab",
    "launch": "#fb8c00",
    "unexplained": "#9e9e9e",
}


@dataclass(frozen=True)
class Chart:
    """One chart: its section key, title, and the plotly figure as JSON-ready data."""

    key: str
    title: str
    figure: dict[str, Any]


def _bins(ranks: Sequence[int]) -> list[list[int]]:
    ordered = sorted(ranks)
    if len(ordered) <= MAX_BARS:
        return [[r] for r in ordered]
    size = -(-len(ordered) // MAX_BARS)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _binned(rows: list[dict[str, Any]], fields: Sequence[str]) -> tuple[list[str], dict[str, list[float]]]:
    """Labels and per-field means over the rank bins of ``rows`` (each with ``rank``)."""
    by_rank = {r["rank"]: r for r in rows}
    labels: list[str] = []
    values: dict[str, list[float]] = {f: [] for f in fields}
    for group in _bins(list(by_rank)):
        labels.append(f"rank {group[0]}" if len(group) == 1 else f"ranks {group[0]}-{group[-1]}")
        for f in fields:
            vals = [by_rank[r].get(f) or 0.0 for r in group]
            values[f].append(sum(vals) / len(vals))
    return labels, values


def _layout(title: str, *, y: str, barmode: str | None = None, height: int = 380) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 80},
        "yaxis": {"title": {"text": y}},
        "legend": {"orientation": "h", "y": -0.25},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "xaxis": {"gridcolor": GRID, "zerolinecolor": GRID},
    }
    layout["yaxis"].update(gridcolor=GRID, zerolinecolor=GRID)
    if barmode:
        layout["barmode"] = barmode
    return layout


def _fig(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    return {"data": data, "layout": layout}


def _trace(kind: str, **attributes: Any) -> dict[str, Any]:
    """One plotly.js trace; ``marker_color=`` stands for ``marker={"color": ...}``."""
    if "marker_color" in attributes:
        attributes["marker"] = {"color": attributes.pop("marker_color")}
    return {"type": kind, **attributes}


def step_time(doc: dict[str, Any]) -> Chart | None:
    """Mean step time per rank with its p95."""
    rows = doc["steps"]["per_rank"]
    if not rows:
        return None
    labels, v = _binned(rows, ["mean_ns", "p95_ns"])
    data = [
        _trace("bar", x=labels, y=[x / 1e6 for x in v["mean_ns"]], name="mean", marker_color="#1565c0"),
        _trace(
            "scatter", x=labels, y=[x / 1e6 for x in v["p95_ns"]], name="p95", mode="markers", marker_color="#e53935"
        ),
    ]
    return Chart("steps", "Step time per rank", _fig(data, _layout("Step time per rank (host)", y="ms")))


def phases(doc: dict[str, Any]) -> Chart | None:
    """Host time per step of each phase, stacked per rank."""
    names = [r["name"] for r in doc["annotations"]["summary"]]
    if not names or not doc["steps"]["per_rank"]:
        return None
    by_rank: dict[int, dict[str, Any]] = {}
    for r in doc["annotations"]["per_rank"]:
        by_rank.setdefault(r["rank"], {"rank": r["rank"]})[r["name"]] = r["step_mean_ns"]
    labels, v = _binned(list(by_rank.values()), names)
    data = [_trace("bar", x=labels, y=[x / 1e6 for x in v[n]], name=n[:60]) for n in names]
    return Chart(
        "phases", "Phases per rank", _fig(data, _layout("Phase time per step, per rank", y="ms", barmode="stack"))
    )


def gpu_breakdown(doc: dict[str, Any]) -> Chart | None:
    """Compute / comm / memory / idle shares, stacked per rank."""
    rows = doc["gpu_breakdown"]["per_rank"] or (doc.get("host_breakdown") or {}).get("per_rank", [])
    if not rows:
        return None
    host = not doc["gpu_breakdown"]["per_rank"]
    parts = ["compute", "comm", "memory", "idle"]
    labels, v = _binned(rows, [f"{p}_pct" for p in parts])
    data = [_trace("bar", x=labels, y=v[f"{p}_pct"], name=p, marker_color=COLORS[p]) for p in parts]
    title = "Host time breakdown per rank (CPU-only run)" if host else "GPU time breakdown per rank"
    return Chart("gpu", title, _fig(data, _layout(title, y="% of measured time", barmode="stack")))


def overlap(doc: dict[str, Any]) -> Chart | None:
    """Share of collective time hidden by compute, per rank."""
    rows = [r for r in doc["overlap"]["per_rank"] if r.get("overlap_pct") is not None]
    if not rows:
        return None
    labels, v = _binned(rows, ["overlap_pct"])
    data = [_trace("bar", x=labels, y=v["overlap_pct"], name="overlap", marker_color=COLORS["comm"])]
    return Chart("overlap", "Comm/compute overlap", _fig(data, _layout("Collective time hidden by compute", y="%")))


def lateness(doc: dict[str, Any]) -> Chart | None:
    """The rank x step lateness heatmap."""
    cells = doc["stragglers"]["lateness_matrix"]
    if not cells:
        return None
    ranks = sorted({c["rank"] for c in cells})
    steps = sorted({c["step"] for c in cells})
    grid = {(c["rank"], c["step"]): c["lateness_ns"] / 1e6 for c in cells}
    z = [[grid.get((r, s)) for s in steps] for r in ranks]
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
        "Lateness at collectives (rank x step)", y="rank", height=max(300, min(900, 20 * len(ranks) + 120))
    )
    layout["xaxis"].update(title={"text": "step"}, type="category")
    layout["yaxis"].update(title={"text": "rank"}, type="category", autorange="reversed")
    return Chart("lateness", "Straggler lateness", _fig(data, layout))


def data_and_syncs(doc: dict[str, Any]) -> Chart | None:
    """DataLoader idle share and GPU idle after syncs, per rank."""
    dl = {r["rank"]: r for r in doc["dataloader"]["per_rank"]}
    sy = {r["rank"]: r for r in doc["host_syncs"]["per_rank"]}
    if not any(r["fetch_ns"] for r in dl.values()) and not any(r["idle_after_ns"] for r in sy.values()):
        return None
    rows = [
        {
            "rank": r,
            "data": (dl.get(r, {}).get("share_pct") or 0.0),
            "sync": 100 * (sy.get(r, {}).get("idle_after_ns") or 0) / max(1, dl.get(r, {}).get("window_ns") or 1),
        }
        for r in sorted(set(dl) | set(sy))
    ]
    labels, v = _binned(rows, ["data", "sync"])
    data = [
        _trace("bar", x=labels, y=v["data"], name="waiting for data", marker_color=COLORS["data"]),
        _trace("bar", x=labels, y=v["sync"], name="idle after host syncs", marker_color=COLORS["host_sync"]),
    ]
    return Chart(
        "dataloader",
        "DataLoader gaps and host syncs",
        _fig(data, _layout("Device time lost to data and to host syncs", y="% of measured time")),
    )


def idle_causes(doc: dict[str, Any]) -> Chart | None:
    """GPU idle by cause, stacked per rank."""
    idle = doc.get("idle_causes")
    if not idle or not idle["per_rank"]:
        return None
    causes = ["data", "host_sync", "peer", "launch", "unexplained"]
    by_rank: dict[int, dict[str, Any]] = {}
    for r in idle["per_rank"]:
        by_rank.setdefault(r["rank"], {"rank": r["rank"]})[r["cause"]] = r["idle_ns"] / 1e6
    labels, v = _binned(list(by_rank.values()), causes)
    data = [_trace("bar", x=labels, y=v[c], name=c, marker_color=COLORS[c]) for c in causes]
    return Chart("idle", "GPU idle by cause", _fig(data, _layout("GPU idle time by cause", y="ms", barmode="stack")))


def kernels(doc: dict[str, Any], top: int = 15) -> Chart | None:
    """Top kernels by total time."""
    rows = doc["kernels"]["top"][:top]
    if not rows:
        return None
    rows = list(reversed(rows))
    names = [r["name"] if len(r["name"]) <= 60 else r["name"][:59] + "…" for r in rows]
    data = [
        _trace(
            "bar",
            y=names,
            x=[r["total_ns"] / 1e6 for r in rows],
            orientation="h",
            marker_color=[COLORS["comm"] if r["category"] == "collective" else COLORS["compute"] for r in rows],
            hovertext=[r["name"] for r in rows],
            name="total ms",
        )
    ]
    layout = _layout("Top GPU kernels (total over ranks)", y="", height=max(300, 28 * len(rows) + 120))
    layout["margin"]["l"] = 380
    layout["xaxis"].update(title={"text": "ms"})
    return Chart("kernels", "Top kernels", _fig(data, layout))


def all_charts(doc: dict[str, Any]) -> list[Chart]:
    """Every chart that has data, in report order."""
    builders = (step_time, phases, gpu_breakdown, overlap, lateness, data_and_syncs, idle_causes, kernels)
    return [c for c in (b(doc) for b in builders) if c is not None]
