"""The table of every waste with what removing it is worth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.reports.gains_words import COMPUTE, GAIN_LIMITS, faster, step_after
from tracekit.reports.tables import make_table, pct

if TYPE_CHECKING:
    from tracekit.reports.document import Table
    from tracekit.results.analysis import Analysis, Gain


def gains_table(a: Analysis) -> Table | None:
    """Every waste with its gain, largest bound first; compute's row is every waste at once."""
    return waste_table(a.verdict.gains)


def waste_table(gains: list[Gain]) -> Table | None:
    """The table of ``gains`` (a verdict's): None when there are none."""
    if not gains:
        return None
    rows = []
    for g in gains:
        name = f"{g.bound.value}: every waste at once" if g.bound in COMPUTE else g.bound.value
        expected = "-" if g.expected_pct is None else f"{step_after(g, g.expected_pct) / 1e6:,.2f}"
        rows.append(
            (
                name,
                pct(g.up_to_pct),
                f"{step_after(g, g.up_to_pct) / 1e6:,.2f}",
                pct(g.expected_pct),
                expected,
                faster(g.expected_pct) if g.expected_pct is not None else "-",
                "; ".join(GAIN_LIMITS[limit] for limit in g.limits),
            )
        )
    return make_table(
        "gains",
        f"What removing each waste is worth (the step is {gains[0].step_ns / 1e6:,.2f} ms)",
        ("waste", "up to", "step at most (ms)", "expected", "step expected (ms)", "as fast", "what it assumes"),
        rows,
        "Up to: the waste's share of the ledger on the ranks that set the pace, all of it given back. "
        "Expected: every rank re-timed along the trace's dependencies (host order, launches, streams, "
        "syncs, collectives across ranks) with the waste removed: less where other work takes the freed "
        "time back (tracekit/analyzers/gains.py, retime.py).",
        numeric=(False, True, True, True, True, True, False),
    )
