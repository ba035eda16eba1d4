"""Markdown, HTML and the JSON document: every fixture renders, goldens, escaping, sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.analyzers.test_cross_rank import three_ranks
from tests.conftest import SAMPLES
from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.errors import InputError
from tracekit.reports import renderer
from tracekit.reports.markdown import MAX_CHARS
from tracekit.results.analysis import Analysis
from tracekit.results.io import decode_analysis, dump_analysis


def render_markdown(analysis: Analysis) -> str:
    return renderer("md").render(analysis)


def render_html(analysis: Analysis) -> str:
    return renderer("html").render(analysis)


GOLDEN = Path(__file__).parent / "golden"
HOSTILE = "<script>alert(1)</script> | [x](y)"


def doc_of(rows: list[dict[str, Any]], world_size: int | None = None) -> Analysis:
    analysis = analyze(make_run(rows, world_size=world_size))
    return msgspec.structs.replace(analysis, tracekit_version="X.Y.Z")  # goldens do not change with the version


def repeated(rows: list[dict[str, Any]], steps: int, length: int) -> list[dict[str, Any]]:
    """``rows`` (one step, ``ProfilerStep#1``) repeated ``steps`` times, ``length`` ns apart."""
    out = []
    for i in range(steps):
        for r in rows:
            row = {**r, "start_ns": r["start_ns"] + i * length, "end_ns": r["end_ns"] + i * length}
            if row.get("correlation") is not None:
                row["correlation"] = row["correlation"] + 1000 * i
            if row.get("external_id") is not None:
                row["external_id"] = row["external_id"] + 1000 * i
            if row["kind"] == "step":
                row["name"] = f"ProfilerStep#{1 + i}"
            out.append(row)
    return out


FIXTURES = {
    # the cross-rank fixture with times in ms rather than us, two steps of it: a run, not a snippet
    "multi_rank_gpu": lambda: doc_of(
        repeated(
            [{**r, "start_ns": r["start_ns"] * 1000, "end_ns": r["end_ns"] * 1000} for r in three_ranks()],
            2,
            300_000_000,
        ),
        world_size=3,
    ),
    "cpu_only": lambda: doc_of(
        [ev("step", "ProfilerStep#1", 0, 10_000), ev("annotation", "fwd", 1, 5_000), ev("cpu_op", "aten::mm", 1, 4_000)]
    ),
    "single_rank_no_collectives": lambda: doc_of(
        [
            ev("step", "ProfilerStep#1", 0, 100),
            ev("runtime", "cudaLaunchKernel", 1, 2, correlation=1),
            ev("kernel", HOSTILE, 10, 60, correlation=1),
        ]
    ),
    "empty": lambda: doc_of([]),
}
#: each analyzed once per session (an Analysis is frozen): the tests render and round-trip the same one
FIXTURES = {name: cache(make) for name, make in FIXTURES.items()}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_fixture_renders_every_section_or_says_why(name: str) -> None:
    doc = FIXTURES[name]()
    md = render_markdown(doc)
    html = render_html(doc)
    assert md.startswith("## tracekit verdict")
    assert len(md) < MAX_CHARS
    for section in (
        "verdict",
        "facts",
        "steps",
        "phases",
        "gpu",
        "stragglers",
        "dataloader",
        *(("idle", "kernels") if doc.run.has_gpu else ()),
        "capture",
        "files",
    ):
        assert f'<section id="{section}"' in html or f'id="{section}"' in html, section
    if not doc.run.has_gpu:  # a CPU-only run leaves its empty GPU sections out
        assert 'id="idle"' not in html
        assert 'id="kernels"' not in html
    # a section with nothing to show says why instead of showing an empty table
    assert "<tbody></tbody>" not in html
    if name in ("cpu_only", "empty"):
        assert "cpu-only run" in md.lower() or "no gpu activity" in md.lower()  # said, not shown as empty tables


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_golden(fmt: str, update_golden: bool) -> None:
    doc = FIXTURES["multi_rank_gpu"]()
    text = render_markdown(doc) if fmt == "md" else dump_analysis(doc)
    path = GOLDEN / f"multi_rank_gpu.{fmt}"
    if update_golden:
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"run pytest --update-golden to accept changes to {path}"


def test_hostile_names_are_text_everywhere() -> None:
    doc = FIXTURES["single_rank_no_collectives"]()
    html = render_html(doc)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = render_markdown(doc)
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt; \\| \\[x\\](y)" in md


def test_markdown_stays_under_the_comment_limit_for_512_ranks() -> None:
    rows = [{**r, "rank": rank} for rank in range(512) for r in three_ranks()[:1] + three_ranks()[3:5]]
    doc = doc_of(rows, world_size=512)
    md = render_markdown(doc)
    assert len(md) < MAX_CHARS
    assert "16 of 512 ranks shown" in md
    html = render_html(doc)
    assert "ranks 0-7" in html  # 512 ranks binned into 64 bars


def test_html_of_8_ranks_is_under_5_mb() -> None:
    from tracekit.readers import load_run

    html = render_html(analyze(load_run([SAMPLES / "captures" / "straggler"])))
    assert len(html.encode()) < 5 * 1024 * 1024
    assert html.count("Plotly.newPlot") == 1  # plotly.js inlined once, one render loop


def test_report_command_renders_saved_json_again(tmp_path: Path) -> None:
    sample = SAMPLES / "captures" / "data_bound"
    run = [sys.executable, "-m", "tracekit"]
    first = subprocess.run(
        [
            *run,
            "analyze",
            sample,
            "--json",
            tmp_path / "r.json",
            "--md",
            tmp_path / "a.md",
            "--html",
            tmp_path / "a.html",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    again = subprocess.run(
        [*run, "report", tmp_path / "r.json", "--md", tmp_path / "b.md", "--html", tmp_path / "b.html"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "a.md").read_text() == (tmp_path / "b.md").read_text()
    assert (tmp_path / "a.html").read_text() == (tmp_path / "b.html").read_text()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["capture"]["schema"] == "tracekit.capture_summary"  # the folder's summary.json
    assert decode_analysis((tmp_path / "r.json").read_bytes(), source="r.json").capture is not None
    assert "Capture summary" in (tmp_path / "a.md").read_text()


def test_report_of_something_else_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a tracekit analysis"):
        decode_analysis(bad.read_bytes(), source=str(bad))
    result = subprocess.run(
        [sys.executable, "-m", "tracekit", "report", bad, "--md", tmp_path / "y.md"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a tracekit analysis" in result.stderr


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_analysis_round_trips_through_json(name: str) -> None:
    analysis = FIXTURES[name]()
    text = dump_analysis(analysis)
    assert decode_analysis(text, source="x") == analysis
    assert dump_analysis(decode_analysis(text, source="x")) == text


def test_a_newer_major_version_is_one_clear_error(tmp_path: Path) -> None:
    doc = json.loads(dump_analysis(FIXTURES["empty"]()))
    doc["schema_version"] = "99.0"
    with pytest.raises(InputError, match=r"schema version 99.0 is not readable"):
        decode_analysis(json.dumps(doc), source="new.json")


def test_every_registered_renderer_renders_every_fixture() -> None:
    from tracekit.reports import RENDERERS

    for name in RENDERERS:
        for fixture in FIXTURES.values():
            assert renderer(name).render(fixture()).strip(), name
