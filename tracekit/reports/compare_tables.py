"""The tables of a comparison of two runs, built once from the typed :class:`Comparison`.

Shown by the terminal, Markdown and HTML renderers through their table writers (which escape
every cell), like the analysis tables of :mod:`tracekit.reports.tables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports import compare_text as ct
from tracekit.reports.document import Table
from tracekit.reports.sentences import write_alone
from tracekit.reports.tables import short
from tracekit.reports.terms import phase_name
from tracekit.results.vocab import Change, Unit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.results.compare import Comparison, Measure, Side, WorkChange

#: Ranks shown in the per-rank table (those that changed most); the JSON has them all.
RANK_ROWS: Final = 16
#: Sources named in the sides table.
SOURCE_ROWS: Final = 4


def _measure_rows(c: Comparison, rows: Sequence[Measure], *, first: str = "measure") -> Table:
    """Label, A, B, delta, delta %, interval, change (and note, when a row has one)."""
    notes, per = any(m.note is not None for m in rows), c.noise.unit
    body = []
    for m in rows:
        s = ct.of(m, per=per)
        cells = [
            ct.measure_label(m),
            s.show(m.a),
            s.show(m.b),
            s.show(m.delta, sign=True, delta=True),
            ct.pct(m.delta_pct),
            ct.interval(m, per=per),
            m.change.value,
        ]
        body.append((*cells, ct.measure_note(m)) if notes else tuple(cells))
    columns = [first, c.a.label, c.b.label, "delta", "delta %", "interval", "change", *(["note"] if notes else [])]
    return Table(
        "",
        "",
        tuple(columns),
        tuple(body),
        numeric=(False, True, True, True, True, True, False, *((False,) if notes else ())),
    )


def measures(c: Comparison) -> Table:
    """The run-level measures."""
    t = _measure_rows(c, c.measures)
    level = f"{c.noise.level * 100:g}%"
    return Table(
        "measures",
        "Run-level measures",
        t.columns,
        t.rows,
        f"delta is B - A; interval: {level} confidence interval of the difference; percentages' deltas are in "
        "percentage points (pp).",
        t.numeric,
        "No run-level measures.",
    )


def phases(c: Comparison) -> Table:
    """Each phase per step: A, B, the change, and the change as a share of the step."""
    per = c.noise.unit
    rows = []
    for m in c.phases:
        s = ct.of(m, per=per)
        hw = ct.half_width(m)
        rows.append(
            (
                ct.measure_label(m),
                s.show(m.a),
                s.show(m.b),
                s.show(m.delta, sign=True, delta=True),
                "-" if hw is None else f"± {s.bare(hw)}",
                "-" if m.step_pct is None else f"{m.step_pct:+.2f}%",
                ct.interval(m, per=per),
                m.change.value,
            )
        )
    return Table(
        "phases",
        "Phases per step",
        ("phase", c.a.label, c.b.label, "delta", "±", "% of the step", "interval", "change"),
        tuple(rows),
        "± is half the interval's width; % of the step is the change over A's mean step time.",
        (False, True, True, True, True, True, True, False),
        "No phase (outermost annotation) on both runs.",
    )


def per_rank(c: Comparison, limit: int | None = RANK_ROWS) -> Table:
    """Each rank's step time; the ``limit`` ranks that changed most when there are more."""
    rows = list(c.per_rank)
    caption = ""
    if limit is not None and len(rows) > limit:
        rows = sorted(rows, key=lambda m: -abs(m.delta or 0.0))[:limit]
        rows.sort(key=lambda m: m.rank if m.rank is not None else -1)
        caption = f"{limit} of {len(c.per_rank)} ranks shown (largest changes); all are in the JSON."
    t = _measure_rows(c, rows, first="rank")
    return Table("per_rank", "Step time per rank", t.columns, t.rows, caption, t.numeric, "No rank is on both runs.")


def syncs(c: Comparison) -> Table:
    """What issued the syncs, on both sides (counts: a sync's time is the idle it causes, in the analysis)."""
    per = ct.per_unit(c.noise.unit)
    rows, what = c.syncs.sources, ct.sync_measure(c.syncs)
    return Table(
        "syncs",
        f"Sync sources ({what})",
        ("operator", "phase", "kind", f"{c.a.label} per {per}", f"{c.b.label} per {per}", "change"),
        tuple(
            (
                short(w.name),
                phase_name(w.phase) or "-",
                w.sync_kind or "-",
                _count(w.a_count),
                _count(w.b_count),
                w.change.value,
            )
            for w in rows
        ),
        numeric=(False, False, False, True, True, False),
        empty=f"No {what} on either run.",
    )


def _count(value: float | None) -> str:
    return "-" if value is None else ct.num(value)


def work(c: Comparison, top: int = 15) -> Table:
    """The ``top`` kernels, host ops and collectives that appeared, disappeared or changed most.

    The name comes first (a table cut into groups of columns repeats it), and the count's change
    only when some count changed ("same" in every row said nothing; issue 46, item 8)."""
    per = ct.per_unit(c.noise.unit)
    rows: list[WorkChange] = c.work[:top]
    sc = ct.scale(Unit.NS, [v for w in rows for v in (w.a_ns, w.b_ns, w.delta_ns)])
    caption = f"Per {'second of trace' if per == 's' else 'step'}, largest changes first"
    caption += f"; {len(rows)} of {len(c.work)} shown, all are in the JSON." if len(c.work) > top else "."
    counts = any(w.change is not Change.SAME for w in rows)
    if rows and not counts:
        caption += " Every count per step is the same on both runs (one column): the times changed."
    count_columns = (f"{c.a.label} count/{per}", f"{c.b.label} count/{per}") if counts else (f"count/{per}",)
    return Table(
        "work",
        "Work that changed",
        (
            "name",
            "kind",
            *count_columns,
            f"{c.a.label} time/{per}",
            f"{c.b.label} time/{per}",
            "delta time",
            *(("change",) if counts else ()),
        ),
        tuple(
            (
                short(w.name),
                w.kind.value if w.category is None else f"{w.kind.value} ({w.category})",
                *((_count(w.a_count), _count(w.b_count)) if counts else (_count(w.a_count),)),
                sc.show(w.a_ns),
                sc.show(w.b_ns),
                sc.show(w.delta_ns, sign=True),
                *((w.change.value,) if counts else ()),
            )
            for w in rows
        ),
        caption,
        (False, False, *((True,) * len(count_columns)), True, True, True, *((False,) if counts else ())),
        "No kernel, host op or collective changed.",
    )


def verdicts(c: Comparison) -> Table:
    """The two verdicts side by side."""
    v = c.verdicts
    a, b = write_alone(v.a, v.a_measured_on), write_alone(v.b, v.b_measured_on)
    return Table(
        "verdicts",
        "Verdicts",
        ("", c.a.label, c.b.label),
        (
            ("verdict", a.title, b.title),
            ("share", ct.pct(a.share_pct, sign=False), ct.pct(b.share_pct, sign=False)),
            ("confidence", a.confidence, b.confidence),
            ("measured on", v.a_measured_on.value, v.b_measured_on.value),
        ),
        ct.cost_line(c) + ".",
        (False, False, False),
    )


def costs(c: Comparison) -> Table:
    """Each candidate bound's share on both sides: what moved."""
    return Table(
        "costs",
        "What moved: each bound's share",
        ("bound", c.a.label, c.b.label, "delta"),
        tuple(
            (
                r.bound,
                ct.pct(r.a_pct, sign=False),
                ct.pct(r.b_pct, sign=False),
                "-" if r.delta_pct is None else f"{r.delta_pct:+.1f} pp",
            )
            for r in c.verdicts.costs
        ),
        "Shares of the measured time; deltas in percentage points.",
        (False, True, True, True),
        "No bound's cost was measured.",
    )


def _sources(side: Side) -> str:
    shown = [short(s, 120) for s in side.sources[:SOURCE_ROWS]]
    more = len(side.sources) - SOURCE_ROWS
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "") or "-"


def _ranks(side: Side) -> str:
    ranks = side.ranks
    text = ", ".join(map(str, ranks[:16])) + ("…" if len(ranks) > 16 else "")
    return f"{len(ranks)} ({text})" if ranks else "-"


def _opt(value: object) -> str:
    return "not recorded" if value is None else str(value)


def sides(c: Comparison) -> Table:
    """What each side is: its files, ranks, devices, steps and workload."""
    rows = [
        ("sources", _sources(c.a), _sources(c.b)),
        ("runs pooled", str(c.a.runs), str(c.b.runs)),
        ("world size", _opt(c.a.world_size), _opt(c.b.world_size)),
        ("ranks", _ranks(c.a), _ranks(c.b)),
        ("devices", ", ".join(c.a.devices) or "none recorded", ", ".join(c.b.devices) or "none recorded"),
        ("backend", _opt(c.a.backend), _opt(c.b.backend)),
        ("measured on", c.a.measured_on.value, c.b.measured_on.value),
        ("steps", str(c.a.steps), str(c.b.steps)),
        ("steps found from", _opt(c.a.step_source), _opt(c.b.step_source)),
        ("workload", _opt(c.a.workload), _opt(c.b.workload)),
        ("batch size", _opt(c.a.batch_size), _opt(c.b.batch_size)),
        ("tracekit", _opt(c.a.tracekit_version), _opt(c.b.tracekit_version)),
    ]
    return Table(
        "sides",
        "The runs",
        ("", c.a.label, c.b.label),
        tuple(rows),
        "steps: measured steps per run, over every rank (0 when a trace has no steps).",
        (False, False, False),
    )
