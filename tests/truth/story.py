"""One story per finding on every case of the corpus: the table in docs/verdict.md.

``python -m tests.truth.story`` prints, for every shared trace and sample capture, the verdict,
its share and re-timed gain, the wastes passed over as symptoms, what to do first and what the
first two fixes are worth together. ``tests/test_docs.py`` holds docs/verdict.md's table to it,
row by row.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.truth.corpus import CASES, Case

if TYPE_CHECKING:
    from tracekit.results.analysis import Verdict
    from tracekit.results.worth import Gain

ROOT = Path(__file__).resolve().parents[2]
ROOTS = {"shared": ROOT.parent / "shared" / "traces", "samples": ROOT / "samples" / "captures"}
HEADER = (
    "| trace | verdict | share | gain | passed over (share, gain) | what to do first (gain) | first two together |",
    "|---|---|---:|---:|---|---|---:|",
)


def paths(case: Case) -> list[Path]:
    return [ROOTS[case.root] / p for p in case.paths]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _gain(g: Gain | None) -> str:
    return "-" if g is None else _pct(g.gain_pct) if g.gain_pct is not None else "not re-timed"


def row(case: Case, verdict: Verdict) -> str:
    """The table row of ``case`` from its verdict."""
    p = verdict.primary
    kind = (p.bound or p.note).value if (p.bound or p.note) is not None else "?"  # type: ignore[union-attr]
    if p.components:
        kind += " (" + ", ".join(c.value for c in p.components) + ")"
    if p.bound is not None and p.bound.value == "undetermined":
        why = [f.note.value for f in verdict.secondary if f.note is not None][:1]
        kind += f" ({why[0]})" if why else ""
    gains = {g.bound: g for g in verdict.gains}
    over = ", ".join(f"{b.value} ({_pct(gains[b].share_pct)}, {_gain(gains[b])})" for b in p.passed_over if b in gains)
    first = ", ".join(f"{f.bound.value} ({_pct(f.gain_pct)})" for f in verdict.first[:3]) or "-"
    joint = _pct(verdict.joint.gain_pct) if verdict.joint is not None else "-"
    return f"| `{case.id}` | {kind} | {_pct(p.share_pct)} | {_gain(p.gain)} | {over or '-'} | {first} | {joint} |"


def table() -> list[str]:
    """Every case's row, in the corpus's order (cases whose traces are absent are left out)."""
    from tracekit.analyzers import run_analysis
    from tracekit.readers import load_run

    rows = list(HEADER)
    for case in CASES:
        found = paths(case)
        if not all(p.exists() for p in found):
            continue
        rows.append(row(case, run_analysis(load_run(found, use_cache=False)).analysis.verdict))
    return rows


if __name__ == "__main__":
    sys.stdout.write("\n".join(table()) + "\n")
