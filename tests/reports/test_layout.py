"""The page list every format draws an analysis from: every field of Analysis is shown, every
page is in every format, and a registered section without a field is shown from its fields."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from tracekit.analyzers import analyze
from tracekit.analyzers.registry import ANALYSES
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.reports.document import Format, Table, View
from tracekit.reports.layout import CLOSING, PAGES, SECTION_TABLES, analysis_document, fields_section, view_for
from tracekit.results.analysis import Analysis, SectionData

SAMPLES = Path(__file__).parents[2] / "samples" / "captures"

#: Fields no page shows, and why: the head shows the verdict; the version is in every footer;
#: the work by name is what a comparison matches; the registered sections are shown from their
#: fields (not by a page); the schema and the timing are bookkeeping.
NOT_ON_A_PAGE = {
    "verdict": "the head",
    "tracekit_version": "the footer and the facts",
    "work": "read by tracekit compare",
    "sections": "each shown from its fields",
    "schema": "bookkeeping",
    "schema_version": "bookkeeping",
    "analysis_seconds": "a row of the facts table",
}


def test_every_field_of_analysis_is_on_a_page() -> None:
    shown = {f for p in (*PAGES, *CLOSING) for f in p.shows}
    assert shown <= set(Analysis.__struct_fields__)
    assert set(Analysis.__struct_fields__) - shown == set(NOT_ON_A_PAGE)


def test_page_keys_are_unique_and_no_registered_section_takes_one() -> None:
    keys = [p.key for p in (*PAGES, *CLOSING)]
    assert len(keys) == len(set(keys))
    assert not {e.name for e in ANALYSES if e.title is not None} & set(keys)


@pytest.fixture(scope="module")
def gpu_analysis() -> Analysis:
    return analyze(load_run([SAMPLES / "cuda-h200-memory"]))


@pytest.mark.parametrize("fmt", ["terminal", "md", "html"])
def test_every_page_is_in_every_format(gpu_analysis: Analysis, fmt: str) -> None:
    text = renderer(fmt).render(gpu_analysis)
    doc = analysis_document(gpu_analysis, view_for(Format(fmt), gpu_analysis))
    assert [s.key for s in doc.sections][: len(PAGES)] == [p.key for p in PAGES]
    for section in doc.sections:
        for table in section.tables:
            if Format(fmt) in table.formats:
                assert table.title[:12] in text, (fmt, section.key, table.title)
    if fmt == "html":
        nav = text[text.index("<nav>") : text.index("</nav>")]
        assert [s.key for s in doc.sections] == [part.split('"')[0] for part in nav.split('href="#')[1:]]


def test_a_section_without_a_page_is_shown_from_its_fields() -> None:
    data = {
        "per_rank": [{"rank": 0, "wait_ns": 1_500_000, "share_pct": 12.5, "name": "x"}, {"rank": 1, "wait_ns": None}],
        "total_ns": 2_500,
    }
    section = fields_section("demo", SectionData(title="Demo", data=data), View(Format.MARKDOWN, limit=1))
    facts, rows = section.tables
    assert facts.rows == (("total (µs)", "2.5"),)
    assert rows.columns == ("rank", "wait (ms)", "share (%)", "name")
    assert rows.rows == (("0", "1.50", "12.5%", "x"),)  # one row of two: the view's limit
    assert "1 of 2 rows shown" in rows.caption
    assert msgspec.json.decode(msgspec.json.encode(SectionData(title="Demo", data=data)), type=SectionData).data == data


def test_a_section_with_tables_of_its_own_shows_them_in_every_format(
    gpu_analysis: Analysis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 49: one mechanism for generic and custom sections: a table hook in place of the fields' tables."""

    def busiest(section: SectionData, view: View) -> tuple[Table, ...]:
        ranks = sorted(section.data["per_rank"], key=lambda r: -r["kernels"])
        body = tuple((str(r["rank"]), str(r["kernels"])) for r in ranks[:1])
        return (Table("launches_busiest", "Busiest rank by kernels", ("rank", "kernels"), body),)

    monkeypatch.setitem(SECTION_TABLES, "launches", busiest)
    section = next(
        s
        for s in analysis_document(gpu_analysis, view_for(Format.MARKDOWN, gpu_analysis)).sections
        if s.key == "launches"
    )
    assert [t.key for t in section.tables] == ["launches_busiest"]
    for fmt in ("terminal", "md", "html"):
        text = renderer(fmt).render(gpu_analysis)
        assert "Busiest rank by kernels" in " ".join(text.split()), fmt  # a narrow table wraps its title
