"""The verdict's table of Student's t quantiles is scipy's, to the bit, and past it the expansion is
scipy's within 5e-12."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scipy.special import stdtrit

from tests.conftest import SAMPLES
from tracekit.analyzers.t_quantiles import T_QUANTILES, TABLE_LEVEL, _expanded, t_quantile
from tracekit.analyzers.verdict import LEVEL


def test_the_table_is_scipys_at_the_verdicts_level() -> None:
    assert TABLE_LEVEL == LEVEL
    assert len(T_QUANTILES) == 200
    assert list(T_QUANTILES) == [float(stdtrit(df, LEVEL)) for df in range(1, 201)]


@pytest.mark.parametrize(("df", "level"), [(1, 0.95), (200, 0.95), (7, 0.9), (200, 0.99)])
def test_outside_the_table_scipy_answers(df: int, level: float) -> None:
    assert t_quantile(df, level) == float(stdtrit(df, level))


def test_past_the_table_the_expansion_is_scipys_within_5e_12() -> None:
    dfs = [*range(201, 3001), 10**4, 10**5, 10**6]
    for level in (0.9, 0.95, 0.975, 0.99):
        worst = max(abs(t_quantile(df, level) / float(stdtrit(df, level)) - 1) for df in dfs)
        assert worst < 5e-12, (level, worst)
    assert t_quantile(201, 0.5) == 0.0
    # at a few degrees of freedom the expansion is off: the table and scipy answer there
    assert abs(_expanded(5, 0.95) / float(stdtrit(5, 0.95)) - 1) > 1e-6


def test_a_verdict_over_steps_does_not_import_scipy() -> None:
    # the 8-rank sample has steps and two close candidates: the verdict compares them by steps
    code = (
        "import sys; from tracekit.analyzers import analyze; from tracekit.readers import load_run; "
        f"a = analyze(load_run([{str(SAMPLES / 'captures' / 'straggler')!r}], use_cache=False)); "
        "assert a.verdict.primary.bound.value == 'mixed', a.verdict.primary; "
        "print('scipy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
