"""The charts of a comparison's HTML report, built from the typed :class:`Comparison` (plotly.js dicts).

Both runs' step times on one chart (box plots, A beside B, and per rank when the comparison
holds per-rank distributions), each phase's change with its interval, and the work that
changed most. Like :mod:`tracekit.reports.figures`, figures are plain JSON-ready dicts; the HTML
renderer escapes every string in them.
"""

from __future__ import annotations

from statistics import quantiles
from typing import TYPE_CHECKING, Final

from tracekit.reports import compare_text as ct
from tracekit.reports.document import JSON, Chart
from tracekit.reports.figures import _fig, _layout, _trace
from tracekit.results.vocab import Change, Unit

if TYPE_CHECKING:
    from tracekit.results.compare import Comparison, Distribution, Measure

#: The two sides' colors.
SIDE_COLORS: Final = {"a": "#78909c", "b": "#1565c0"}
#: How a change is colored.
CHANGE_COLORS: Final = {
    Change.SLOWER: "#c62828",
    Change.FASTER: "#2e7d32",
    Change.HIGHER: "#ef6c00",
    Change.LOWER: "#00838f",
    Change.APPEARED: "#c62828",
    Change.DISAPPEARED: "#2e7d32",
}
NEUTRAL: Final = "#9e9e9e"
#: Ranks drawn in the per-rank distribution chart.
MAX_RANKS: Final = 64
#: Steps above which a box plot shows its outliers only, not every step.
MAX_POINTS: Final = 200


def _label(c: Comparison, side: str) -> str:
    return c.a.label if side == "a" else c.b.label


def _box(c: Comparison, d: Distribution) -> JSON:
    values: list[JSON] = [v / 1e6 for v in d.values_ns]
    return _trace(
        "box",
        y=values,
        name=_label(c, d.side),
        marker_color=SIDE_COLORS.get(d.side, NEUTRAL),
        boxmean=True,
        boxpoints="all" if len(values) <= MAX_POINTS else "outliers",
        jitter=0.3,
        pointpos=0,
    )


#: Interquartile ranges beyond a side's quartiles at which its box plot's scale stops (Tukey's far
#: fences): a step past them is clipped, and said, so that one slow step does not squash both boxes.
FENCE_IQR: Final = 3.0


def _fences(values: list[float]) -> tuple[float, float]:
    """Tukey's far fences of ``values``: the quartiles widened by :data:`FENCE_IQR` interquartile ranges."""
    if len(values) < 4:
        return min(values), max(values)
    q1, _, q3 = quantiles(values, n=4)
    return q1 - FENCE_IQR * (q3 - q1), q3 + FENCE_IQR * (q3 - q1)


def _clipped(c: Comparison, runs: list[Distribution]) -> tuple[list[JSON] | None, str]:
    """The y range (ms) that keeps every side's box readable, and what it leaves out, when a step
    lies beyond a side's far fences (:data:`FENCE_IQR`); (None, "") when none does."""
    values = {d.side: [v / 1e6 for v in d.values_ns] for d in runs}
    fences = [_fences(v) for v in values.values()]
    low = max(0.0, min(max(f[0], min(v)) for f, v in zip(fences, values.values(), strict=True)))
    high = max(min(f[1], max(v)) for f, v in zip(fences, values.values(), strict=True))
    out = {side: [x for x in v if x > high or x < low] for side, v in values.items()}
    if not any(out.values()) or high <= low:
        return None, ""
    said = [
        f"{len(x)} step(s) of {_label(c, side)} ({', '.join(f'{v:.1f}' for v in sorted(x)[-3:])} ms"
        f"{', ...' if len(x) > 3 else ''})"
        for side, x in out.items()
        if x
    ]
    pad = 0.05 * (high - low)
    return [max(0.0, low - pad), high + pad], f"off the scale, past the far fences: {'; '.join(said)}"


def steps(c: Comparison) -> Chart | None:
    """Both runs' step times (each step the mean over ranks) side by side; a step far past its
    side's box is clipped, and said under the title (the box's mean and whiskers still count it)."""
    runs = [d for d in c.distributions if d.rank is None and d.values_ns]
    if not runs:
        return None
    data = [_box(c, d) for d in sorted(runs, key=lambda d: d.side)]
    title = "Step time (each step the mean over ranks)"
    span, left_out = _clipped(c, runs)
    if span is None:
        return Chart("steps", title, _fig(data, _layout(title, y="ms")))
    layout = _layout(title, y="ms", yaxis={"range": span})
    layout["annotations"] = [
        {"text": left_out, "xref": "paper", "yref": "paper", "x": 0, "y": 1.02, "showarrow": False, "xanchor": "left"}
    ]
    return Chart("steps", title, _fig(data, layout))


def rank_steps(c: Comparison) -> Chart | None:
    """Each rank's step times on both runs, grouped by rank (the first ``MAX_RANKS`` ranks)."""
    per_rank = [d for d in c.distributions if d.rank is not None and d.values_ns]
    ranks = sorted({d.rank for d in per_rank if d.rank is not None})[:MAX_RANKS]
    if len(ranks) < 2:
        return None
    data: list[JSON] = []
    for side in ("a", "b"):
        values: list[JSON] = []
        labels: list[JSON] = []
        for d in sorted((d for d in per_rank if d.side == side and d.rank in ranks), key=lambda d: d.rank or 0):
            values += [v / 1e6 for v in d.values_ns]
            labels += [f"rank {d.rank}"] * len(d.values_ns)
        if values:
            data.append(
                _trace(
                    "box",
                    x=labels,
                    y=values,
                    name=_label(c, side),
                    marker_color=SIDE_COLORS[side],
                    boxpoints="outliers",
                )
            )
    title = "Step time per rank"
    layout = _layout(title, y="ms", xaxis={"type": "category"})
    layout["boxmode"] = "group"
    return Chart("rank_steps", title, _fig(data, layout))


def _delta_rows(c: Comparison) -> list[Measure]:
    return [m for m in (c.step, *c.phases) if m.delta is not None]


def phases(c: Comparison) -> Chart | None:
    """The step's and each phase's change per step (B - A), with its confidence interval."""
    rows = _delta_rows(c)
    if not any(m is not c.step for m in rows):
        return None
    sc = ct.scale(Unit.NS, [v for m in rows for v in (m.delta, *((m.ci.low, m.ci.high) if m.ci else ()))])
    deltas = [(m.delta or 0.0) / sc.factor for m in rows]
    plus: list[JSON] = [((m.ci.high - (m.delta or 0.0)) / sc.factor) if m.ci else 0.0 for m in rows]
    minus: list[JSON] = [(((m.delta or 0.0) - m.ci.low) / sc.factor) if m.ci else 0.0 for m in rows]
    labels: list[JSON] = [("step (total)" if m is c.step else ct.measure_label(m)) for m in rows]
    data = [
        _trace(
            "scatter",
            x=list(deltas),
            y=labels,
            mode="markers",
            marker={"color": [CHANGE_COLORS.get(m.change, NEUTRAL) for m in rows], "size": 11},
            error_x={"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": "#616161"},
            text=[f"{m.change.value}: {ct.measure_line(m, per=c.noise.unit)}" for m in rows],
            hoverinfo="text",
            name="change",
        )
    ]
    title = f"Change per step, {c.b.label} - {c.a.label}, with {c.noise.level * 100:g}% intervals"
    layout = _layout(
        title,
        y="",
        height=max(300, 36 * len(rows) + 140),
        xaxis={"title": {"text": sc.suffix}, "zeroline": True, "zerolinecolor": "#424242", "rangemode": "tozero"},
        yaxis={"type": "category", "autorange": "reversed"},
        left=200,
    )
    return Chart("phases", "Change per phase", _fig(data, layout))


def work(c: Comparison, top: int = 15) -> Chart | None:
    """The change in time per step of the work that changed most."""
    rows = [w for w in c.work[:top] if w.delta_ns]
    if not rows:
        return None
    sc = ct.scale(Unit.NS, [w.delta_ns for w in rows])
    names: list[JSON] = [w.name if len(w.name) <= 60 else w.name[:59] + "…" for w in rows]
    data = [
        _trace(
            "bar",
            y=names,
            x=[w.delta_ns / sc.factor for w in rows],
            orientation="h",
            marker_color=[CHANGE_COLORS.get(w.change, NEUTRAL) for w in rows],
            hovertext=[f"{w.kind.value}: {w.name} ({w.change.value})" for w in rows],
            name="delta",
        )
    ]
    per = c.noise.unit
    title = f"Work that changed: time per {per}, {c.b.label} - {c.a.label}"
    layout = _layout(
        title,
        y="",
        height=max(300, 28 * len(rows) + 140),
        xaxis={"title": {"text": f"{sc.suffix} per {per}"}},
        yaxis={"type": "category", "autorange": "reversed"},
        left=380,
    )
    return Chart("work", "Work that changed", _fig(data, layout))


def all_charts(c: Comparison, *, top: int = 15) -> list[Chart]:
    """Every chart of the comparison that has data."""
    charts = (steps(c), rank_steps(c), phases(c), work(c, top))
    return [chart for chart in charts if chart is not None]
