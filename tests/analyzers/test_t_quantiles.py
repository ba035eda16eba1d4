"""The verdict's table of Student's t quantiles is scipy's, to the bit."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scipy.special import stdtrit

from tests.conftest import SAMPLES
from tracekit.analyzers.t_quantiles import T_QUANTILES, TABLE_LEVEL, t_quantile
from tracekit.analyzers.verdict import LEVEL


def test_the_table_is_scipys_at_the_verdicts_level() -> None:
    assert TABLE_LEVEL == LEVEL
    assert len(T_QUANTILES) == 200
    assert list(T_QUANTILES) == [float(stdtrit(df, LEVEL)) for df in range(1, 201)]


@pytest.mark.parametrize(("df", "level"), [(1, 0.95), (200, 0.95), (201, 0.95), (5000, 0.95), (7, 0.9)])
def test_outside_the_table_scipy_answers(df: int, level: float) -> None:
    assert t_quantile(df, level) == float(stdtrit(df, level))


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
