"""The HTML report embeds tracekit's partial plotly.js bundle, not plotly's full one (issue 32):
the report stays small, and the bundle draws every trace type tracekit's charts use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.reports.html import BUNDLED_TRACES, _plotly_js

ROOT = Path(__file__).parents[2]
ASSETS = ROOT / "tracekit" / "reports" / "assets"
#: Where tracekit's charts are built.
FIGURES = sorted((ROOT / "tracekit" / "reports").glob("*figures.py"))


def registered_traces(bundle: str) -> set[str]:
    """The trace types a plotly.js bundle registers (each trace module says its name)."""
    return set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))


def chart_trace_types() -> set[str]:
    """Every trace type tracekit's charts use: ``_trace("bar", ...)`` and ``"type": "heatmap"``
    (not the axes' ``"type": "category"``, nor the error bars' ``"type": "data"``)."""
    found: set[str] = set()
    for path in FIGURES:
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'_trace\(\s*"(\w+)"', text))
        found |= set(re.findall(r'"type":\s*"(\w+)",\s*\n?\s*"(?:z|x|y)"', text))
    return found


def test_every_trace_type_the_charts_use_is_in_the_bundle() -> None:
    used = chart_trace_types()
    assert {"bar", "scatter", "heatmap", "box"} <= used  # the scan finds them
    bundled = registered_traces(_plotly_js())
    assert used <= bundled
    assert bundled == BUNDLED_TRACES
    assert len(bundled) < len(registered_traces(get_plotlyjs()))  # a partial bundle


def test_the_bundle_is_the_plotly_js_version_plotly_python_writes_for() -> None:
    assert (ASSETS / "plotly.js.VERSION").read_text(encoding="utf-8").strip() == get_plotlyjs_version()
    assert f'"{get_plotlyjs_version()}"' in _plotly_js()
    assert "MIT License" in (ASSETS / "plotly.js.LICENSE").read_text(encoding="utf-8")
    # inlined in a script element: nothing in it may end the element
    assert "</script" not in _plotly_js().lower()
    assert "<!--" not in _plotly_js()


@pytest.mark.parametrize("capture", ["straggler", "cuda-h200-memory"])
def test_the_report_is_small_and_embeds_the_partial_bundle_once(capture: str) -> None:
    report = renderer("html").render(analyze(load_run([ROOT / "samples" / "captures" / capture])))
    assert len(report.encode("utf-8")) < 1_500_000
    assert report.count(_plotly_js()) == 1
    assert get_plotlyjs()[:2000] not in report  # not plotly's full bundle
