"""A run far from the others of its side is named (issue 46, item 2: one B run of 163 ms against 21
and 29 ms went unsaid, "within noise: +184.1%"), and the step chart keeps the boxes readable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pytest

from tests.analyzers.test_compare import _run
from tracekit.analyzers.compare import compare
from tracekit.analyzers.compare.outliers import outlier_runs
from tracekit.reports import compare_figures, renderer

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis


def _runs(*means_ms: float) -> list[np.ndarray]:
    return [np.full(10, m * 1e6) for m in means_ms]


def test_the_rule_by_hand() -> None:
    # 21, 29, 163 ms: median 29, deviations 8, 0, 134, MAD 8, robust sd 1.4826 x 8 = 11.86 ms:
    # 163 is 134 / 11.86 = 11.3 of them away (over 3.5) and 462% of the median (over 10%)
    [o] = outlier_runs("b", _runs(21, 29, 163), ["b/run1", "b/run2", "b/run3"])
    assert (o.side, o.run, o.source) == ("b", 3, "b/run3")
    assert o.mean_ns == pytest.approx(163e6) and o.side_median_ns == pytest.approx(29e6)
    assert o.others_ns == pytest.approx([21e6, 29e6])
    assert o.score == pytest.approx(134 / (1.4826 * 8), rel=1e-6)
    assert outlier_runs("a", _runs(20, 21, 22), [None] * 3) == []  # one cluster
    assert outlier_runs("a", _runs(100, 104, 109), [None] * 3) == []  # 4.8 sd away but only 5% of the median
    assert outlier_runs("a", _runs(21, 163), [None] * 2) == []  # two runs cannot tell which is off
    # two runs of the same mean: a MAD of zero, the third off by 50%: an outlier with no score
    [same] = outlier_runs("a", _runs(20, 20, 30), [None] * 3)
    assert same.run == 3 and same.score is None
    # one run in five far off among a spread of four: 3.5 sd is the line, not the spread's size
    assert [o.run for o in outlier_runs("a", _runs(20, 22, 24, 26, 60), [None] * 5)] == [5]


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("outliers")
    a = [_run(tmp, f"a{i}", seed=10 + i) for i in range(3)]
    b = [_run(tmp, f"b{i}", seed=20 + i) for i in range(2)] + [_run(tmp, "b2", seed=22, forward_us=150_000)]
    return {"a": a, "b": b}


def test_the_outlier_run_is_named_in_every_format(sides: dict[str, list[Analysis]]) -> None:
    c = compare(sides["a"], sides["b"])
    assert [(o.side, o.run) for o in c.outliers] == [("b", 3)]
    assert c.outliers[0].source is not None and c.outliers[0].source.endswith("b2")
    for fmt in ("terminal", "md", "html"):
        text = " ".join(renderer(fmt).render(c).split())
        assert "outlier: B run 3 (b2) averaged" in text, fmt
    assert compare(sides["a"], sides["b"][:2]).outliers == []


def test_the_step_chart_clips_a_far_step_and_says_so(sides: dict[str, list[Analysis]]) -> None:
    # about 9 ms steps, one of B's 530 ms (the issue's: it squashed both boxes flat)
    c = compare(sides["a"], sides["b"][:2])
    plain = compare_figures.steps(c)
    assert plain is not None and "range" not in plain.figure["layout"]["yaxis"]  # type: ignore[index, operator]
    far = [
        msgspec.structs.replace(d, values_ns=[530e6, *d.values_ns[1:]]) if d.side == "b" and d.rank is None else d
        for d in c.distributions
    ]
    chart = compare_figures.steps(msgspec.structs.replace(c, distributions=far))
    assert chart is not None
    layout: Any = chart.figure["layout"]
    low, high = layout["yaxis"]["range"]
    assert 0 <= low < 9 < high < 12  # the boxes of about 9 ms steps
    [note] = layout["annotations"]
    assert note["text"] == "off the scale, past the far fences: 1 step(s) of B (530.0 ms)"
    # a whole run far off is no single step: the side's box holds it, and the run is named instead
    bimodal = compare_figures.steps(compare(sides["a"], sides["b"]))
    assert bimodal is not None and "range" not in bimodal.figure["layout"]["yaxis"]  # type: ignore[index, operator]
