"""Heatmaps of a sweep over its grid: throughput and peak memory, one cell per grid cell.

The x axis is the batch size per rank (or the last grid axis when the batch size is not one),
the y axis every other axis's values together (``accelerate_config=ddp``); a cell that did not
run is blank, its status in the hover text.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from tracekit.reports.document import JSON, Chart
from tracekit.reports.figures import _fig, _layout

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.results.sweep import MatrixRow, SweepMatrix

__all__ = ["all_charts"]

GIB: Final = float(1 << 30)
_BATCH: Final = "batch_size"


def _axes(m: SweepMatrix) -> tuple[str, list[str], list[str]]:
    """The x key, its values in grid order, and the y labels in grid order."""
    keys = [a.key for a in m.grid]
    x_key = _BATCH if _BATCH in keys else keys[-1]
    xs = next(a.values for a in m.grid if a.key == x_key)
    ys: dict[str, None] = {}
    for row in m.rows:
        ys[_label(row, x_key)] = None
    return x_key, xs, list(ys)


def _label(row: MatrixRow, x_key: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(row.values.items()) if k != x_key) or "(config)"


def _heatmap(
    m: SweepMatrix, key: str, *, title: str, value: Callable[[MatrixRow], float | None], unit: str, scale: str
) -> Chart:
    x_key, xs, ys = _axes(m)
    z: list[JSON] = [[None for _ in xs] for _ in ys]
    text: list[JSON] = [["not run" for _ in xs] for _ in ys]
    values = [v for row in m.rows if row.status == "ok" and (v := value(row)) is not None]
    digits = _digits(values)
    for row in m.rows:
        i, j = ys.index(_label(row, x_key)), xs.index(row.values[x_key])
        v = value(row) if row.status == "ok" else None
        z[i][j] = None if v is None else round(v, digits + 2)  # type: ignore[index]
        shown = "-" if v is None else f"{v:,.2f} {unit}"
        text[i][j] = f"{row.cell} · {row.backend} · {shown} · {row.status}"  # type: ignore[index]
    labels: list[JSON] = list(ys)
    trace: dict[str, JSON] = {
        "type": "heatmap",
        "x": [str(x) for x in xs],
        "y": labels,
        "z": z,
        "text": text,
        "hoverinfo": "text",
        "colorscale": scale,
        "colorbar": {"title": {"text": unit}},
        "texttemplate": f"%{{z:,.{digits}f}}",
    }
    layout = _layout(title, y="", xaxis={"title": {"text": x_key}, "type": "category"}, left=220)
    layout["yaxis"] = {"type": "category", "automargin": True}
    return Chart(key, title, _fig([trace], layout))


def _digits(values: list[float]) -> int:
    """Decimals that tell the cells apart (0.324 and 0.334 GiB both read "0.3" at one): one more
    than the order of the spread's, at least 1, at most 4."""
    spread = max(values) - min(values) if values else 0.0
    if spread <= 0:
        return 1
    return min(4, max(1, math.ceil(-math.log10(spread) - 1e-9) + 1))  # (0.4 - 0.3 is 0.0999...)


def _peak_gib(row: MatrixRow) -> float | None:
    peak = row.peak_reserved_bytes if row.memory_device == "cuda" else row.peak_rss_bytes
    return None if peak is None else peak / GIB


def all_charts(m: SweepMatrix) -> list[Chart]:
    """Throughput and peak memory over the grid (none when no cell ran)."""
    if not m.rows:
        return []
    cuda = any(r.memory_device == "cuda" for r in m.rows)
    memory = "peak reserved device memory (worst rank)" if cuda else "peak RSS (worst rank)"
    return [
        _heatmap(
            m,
            "throughput",
            title="Throughput (global samples/s)",
            value=lambda r: r.samples_per_s,
            unit="samples/s",
            scale="Viridis",
        ),
        _heatmap(m, "memory", title=f"Memory: {memory}", value=_peak_gib, unit="GiB", scale="Reds"),
    ]
