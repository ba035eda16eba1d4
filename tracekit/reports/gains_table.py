"""The table of every waste with its share and what removing it is worth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.reports.gains_words import COMPUTE, GAIN_LIMITS, faster, floor, step_after, why_short
from tracekit.reports.tables import make_table, pct

if TYPE_CHECKING:
    from tracekit.reports.document import Table
    from tracekit.results.analysis import Analysis
    from tracekit.results.worth import Gain


def gains_table(a: Analysis) -> Table | None:
    """Every waste with its gain, largest share first; compute's row is every waste at once."""
    return waste_table(a.verdict.gains)


def _note(g: Gain) -> str:
    """Why the gain differs from the share, else what the estimate assumes."""
    said = why_short(g)
    least = "a floor (ranks outnumbered cores)" if floor(g) else None
    if said is not None:
        return said if least is None else f"{least}; {said}"
    return "; ".join(GAIN_LIMITS[limit] for limit in g.limits)


def waste_table(gains: list[Gain]) -> Table | None:
    """The table of ``gains`` (a verdict's): None when there are none."""
    if not gains:
        return None
    rows = []
    for g in gains:
        name = f"{g.bound.value}: every waste at once" if g.bound in COMPUTE else g.bound.value
        after = "-" if g.gain_pct is None else f"{step_after(g, g.gain_pct) / 1e6:,.2f}"
        rows.append(
            (
                name,
                pct(g.share_pct),
                f"≥{pct(g.gain_pct)}" if floor(g) else pct(g.gain_pct),
                f"≤{after}" if floor(g) else after,
                faster(g.gain_pct) if g.gain_pct is not None else "-",
                _note(g),
            )
        )
    return make_table(
        "gains",
        f"What removing each waste is worth (the step is {gains[0].step_ns / 1e6:,.2f} ms)",
        ("waste", "share", "gain", "step without it (ms)", "as fast", "why they differ, or what it assumes"),
        rows,
        "Share: the waste's part of the ledger on the ranks that set the pace (what the time is). Gain: every "
        "rank re-timed along the trace's dependencies (host order, launches, streams, syncs, collectives across "
        "ranks) with the waste removed (what removing it is worth). A gain is below its share where other work "
        "takes the freed time back, above it where removing it removes other waste too; gains of several fixes "
        "are never added (tracekit/analyzers/gains.py, gain_why.py, retime.py).",
        numeric=(False, True, True, True, True, False),
    )
