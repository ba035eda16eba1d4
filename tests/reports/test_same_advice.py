"""Every report format carries the same advice items (issue 46, item 3: the terminal showed four
of the verdict's five "What to change" items and one of each other finding's, the HTML three,
the Markdown one; on a gloo run the terminal dropped the one about giving each rank cores)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, analysis_of
from tracekit.pipeline.analyze import AnalyzeOptions, analyze_paths
from tracekit.reports import renderer
from tracekit.reports.sentences import OTHER_ADVICE, PRIMARY_ADVICE, write_analysis


def _flat(text: str, *, markup: bool = False) -> str:
    """``text`` with every run of white space one space (a terminal wraps lines); ``markup``: HTML,
    its tags dropped and its text unescaped."""
    if markup:
        text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return " ".join(text.split())


@pytest.mark.parametrize("folder", ["straggler", "cuda-h200-small"])
def test_every_format_carries_every_advice_item(folder: str) -> None:
    # as the CLI reads it: with the capture's summary beside the traces (its cores, its config)
    analysis = analyze_paths([SAMPLES / "captures" / folder], AnalyzeOptions(use_cache=False)).analysis
    written = write_analysis(analysis)
    items = [
        *written.primary.recommendations,
        *(r for f in (*written.secondary, *written.memory) for r in f.recommendations),
    ]
    assert len(written.primary.recommendations) <= PRIMARY_ADVICE
    assert all(len(f.recommendations) <= OTHER_ADVICE for f in (*written.secondary, *written.memory))
    texts = {
        "terminal": renderer("terminal").render(analysis),
        "md": html.unescape(renderer("md").render(analysis).replace("\\", "")),
        "html": renderer("html").render(analysis),
    }
    for fmt, text in texts.items():
        flat = _flat(text, markup=fmt == "html")
        missing = [item for item in items if " ".join(item.split()) not in flat]
        assert missing == [], fmt
    if folder == "straggler":  # the gloo run's advice on cores is among them (the terminal dropped it)
        assert any("one rank per core" in item for item in items)


def test_the_short_answer_names_each_other_finding(kineto_dir: Path) -> None:
    # the short answer (the terminal's default) has the verdict, three fixes and a line per finding
    from tracekit.reports import TerminalRenderer

    analysis = analysis_of([kineto_dir / "param-dlrm-8rank-v100"]).analysis
    written = write_analysis(analysis)
    text = TerminalRenderer(width=100, full=False).render(analysis)
    flat = _flat(text)
    assert len(text.splitlines()) <= 45
    for f in written.secondary:
        assert " ".join(f.title.split()) in flat
        # a finding whose gain differs from its share says why there too (a gain above the
        # primary's, unexplained, tells a second story)
        assert f.reason is None or " ".join(f.reason.split()) in flat
    assert any(f.reason for f in written.secondary)
    assert sum(1 for line in text.splitlines() if re.match(r"  \d\. ", line)) == min(3, len(written.first))
    assert "┃" not in text
