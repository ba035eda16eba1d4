"""Every command case of ``cases_outputs.py``, each alone: refused up front, inputs untouched; and of
``cases_bad_input.py``: one line naming the field (exit 2), or legitimate input rendered quietly."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pytest

from tests.robustness.cases_bad_input import CASES as BAD_INPUT
from tests.robustness.cases_bad_input import BadInputCase
from tests.robustness.cases_outputs import CASES, CommandCase
from tests.robustness.runner import run_cli

if TYPE_CHECKING:
    from pathlib import Path

#: Each case is a tracekit process (~1 s): with the corpus, outside the fast lane (CI runs them).
pytestmark = [pytest.mark.e2e, pytest.mark.concurrent]


def _contents(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_output_over_an_input_is_refused(case: CommandCase, tmp_path: Path) -> None:
    args = case.build(tmp_path)
    before = _contents(tmp_path)
    out = run_cli(args, process=True, timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.code == 2, f"exit {out.code}: {out.stderr[-600:]}"
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    for needle in case.needles:
        assert needle in lines[0], lines[0]
    assert _contents(tmp_path) == before  # nothing written over, nothing written at all


@pytest.mark.parametrize("case", BAD_INPUT, ids=[c.name for c in BAD_INPUT])
def test_a_command_on_bad_input_says_which_field(case: BadInputCase, tmp_path: Path) -> None:
    out = run_cli(case.build(tmp_path), process=True, timeout=120)
    assert out.code == case.code, f"exit {out.code}: {out.stderr[-600:]}"
    if case.code == 0:
        assert out.stderr == "", out.stderr  # no numpy warning
        return
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    for needle in case.needles:
        assert needle in lines[0], lines[0]
