"""No module of tracekit is over 500 lines (issue 30): a module that grows past it is split by concern."""

from __future__ import annotations

from pathlib import Path

MAX_LINES = 500
PACKAGE = Path(__file__).resolve().parents[1] / "tracekit"


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
