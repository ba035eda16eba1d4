"""Every renderer draws every result type (as its document), and the JSON one loads back."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import pytest

from tests.reports.comparisons import slower
from tests.reports.test_doctor_report import doctor
from tests.reports.test_sweep_report import _sweep
from tests.reports.test_tool_reports import audit, probe
from tests.results.test_capture import small_summary
from tracekit.analyzers import analyze
from tracekit.analyzers.sweep import build_matrix
from tracekit.readers import load_run
from tracekit.reports import RENDERERS, renderer
from tracekit.reports.document import Document, Format
from tracekit.reports.documents import BUILDERS, as_document
from tracekit.results.ab import load_ab
from tracekit.results.analysis import Analysis
from tracekit.results.compare import Comparison
from tracekit.results.param_audit import ModuleParams

if TYPE_CHECKING:
    from collections.abc import Callable

SAMPLES = Path(__file__).parents[2] / "samples" / "captures"

#: One result of every type a report is made of.
RESULTS: dict[str, Callable[[], msgspec.Struct]] = {
    "analysis": cache(lambda: analyze(load_run([SAMPLES / "cuda-h200-small"]))),  # one analysis, every format
    "sweep": lambda: build_matrix(_sweep(), source="sweep-dir", headroom_pct=10.0),
    "capture": small_summary,
    "ab": lambda: load_ab((SAMPLES / "cuda-h200-sync-ab" / "ab.json").read_bytes(), source="ab.json"),
    "dataloader": lambda: probe(loader_sps=500.0),
    "audit": lambda: audit([ModuleParams(module="head", parameters=["bias"], numel=10)]),
    "comparison": slower,
    "doctor": doctor,
}


def test_every_result_type_has_a_fixture() -> None:
    made = {type(make()) for make in RESULTS.values()}
    assert {Analysis, Comparison, *BUILDERS} <= made


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_every_renderer_draws_every_result(kind: str, fmt: str) -> None:
    result = RESULTS[kind]()
    text = renderer(fmt).render(result)
    doc = as_document(result, Format(fmt))
    assert isinstance(doc, Document) and doc.source is result
    if fmt == "json":
        assert msgspec.json.decode(text.encode()) == msgspec.to_builtins(result)
        return
    # every table the format shows is in the text, titled
    shown = [t for s in doc.sections for t in s.tables if Format(fmt) in t.formats]
    assert shown, kind
    for t in shown:
        assert t.title[:12] in text, (kind, t.title)
    if fmt == "html":
        assert text.startswith("<!doctype html>") and all(f'id="{s.key}"' in text for s in doc.sections)
