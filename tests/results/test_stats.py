"""The shared statistics, on values worked out by hand, and against the analyzers' polars."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from tracekit.results.stats import mean, median, p95, quantile_higher


def test_mean_and_median() -> None:
    assert mean([1, 2, 3, 4]) == 2.5
    assert median([3, 1, 2]) == 2  # the middle value
    assert median([4, 1, 3, 2]) == 2.5  # the mean of the two middle values
    assert isinstance(median([7]), float)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, 1),  # position 0
        (4, 4),  # 0.95 * 3 = 2.85 -> 3: the largest
        (20, 20),  # 0.95 * 19 = 18.05 -> 19: the largest (nearest rank would give 19)
        (21, 20),  # 0.95 * 20 = 19 exactly: the second largest
        (40, 39),  # 0.95 * 39 = 37.05 -> 38 (nearest rank would give 38)
        (100, 96),  # 0.95 * 99 = 94.05 -> 95 (nearest rank would give 95)
    ],
)
def test_p95_takes_the_value_at_the_rounded_up_position(n: int, expected: int) -> None:
    values = list(range(1, n + 1))
    random.Random(n).shuffle(values)  # order does not matter
    assert p95(values) == expected


def test_quantile_bounds_and_empty_input() -> None:
    assert quantile_higher([5, 1, 3], 0.0) == 1
    assert quantile_higher([5, 1, 3], 0.5) == 3
    assert quantile_higher([5, 1, 3], 1.0) == 5
    with pytest.raises(ValueError, match="between 0 and 1"):
        quantile_higher([1], 1.5)
    for function in (mean, median, p95):
        with pytest.raises(ValueError, match="no values"):
            function([])


def test_agrees_with_the_analyzers_polars_expressions() -> None:
    pl = pytest.importorskip("polars")
    from tracekit.analyzers.stats import summary_exprs

    rng = random.Random(0)
    for n in [*range(1, 120), 999, 1000, 1001]:
        values = [rng.randrange(0, 10**9) for _ in range(n)]
        row = pl.DataFrame({"x": values}).select(summary_exprs("x")).row(0, named=True)
        assert p95(values) == row["p95_ns"], n
        assert median(values) == row["median_ns"], n
        assert mean(values) == pytest.approx(row["mean_ns"], rel=1e-12), n


def test_capture_side_modules_do_not_import_polars() -> None:
    code = (
        "import sys, tracekit.capture.summary, tracekit.results.capture, tracekit.results.stats;"
        "sys.exit('polars' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
