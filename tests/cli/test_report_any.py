"""``tracekit report`` draws every record tracekit writes (issue 46, item 7): in the terminal by
default, and to ``--md`` / ``--html``; a record it does not draw is one line naming its schema."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES
from tracekit.pipeline.saved import saved_kinds

if TYPE_CHECKING:
    from pathlib import Path

CAPTURES = SAMPLES / "captures"
RECORDS = {
    "capture summary": (CAPTURES / "healthy" / "summary.json", "Phases over"),
    "doctor": (CAPTURES / "cuda-h200-doctor" / "doctor.json", "num_workers=8"),
    "A/B capture": (CAPTURES / "cuda-h200-sync-ab" / "ab.json", "A/B capture: 3 of each side"),
    "sweep": (CAPTURES / "cuda-h200-sweep" / "sweep.json", "Sweep of 2 cell(s)"),
}


@pytest.mark.parametrize("kind", sorted(RECORDS))
def test_a_record_is_drawn_in_the_terminal_and_as_markdown(tmp_path: Path, kind: str) -> None:
    path, said = RECORDS[kind]
    result = run_tracekit("report", path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert said in " ".join(result.stdout.split())
    result = run_tracekit("report", path, "--md", tmp_path / "r.md", "--html", tmp_path / "r.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r.md").read_text().startswith("#") and (tmp_path / "r.html").read_text().startswith("<!")


def test_an_analysis_and_a_comparison_are_drawn_without_an_output_option(tmp_path: Path) -> None:
    analysis, comparison = tmp_path / "a.json", tmp_path / "c.json"
    healthy, straggler = CAPTURES / "healthy", CAPTURES / "straggler"
    assert run_tracekit("compare", healthy, straggler, "--json", comparison, cwd=tmp_path).returncode in (0, 1)
    assert run_tracekit("analyze", healthy, "--json", analysis, cwd=tmp_path).returncode == 0
    result = run_tracekit("report", analysis, cwd=tmp_path)  # was: "nothing to write"
    assert result.returncode == 0 and result.stdout.startswith("tracekit verdict"), result.stderr
    result = run_tracekit("report", comparison, cwd=tmp_path)
    assert result.returncode == 0 and "tracekit comparison" in result.stdout, result.stderr


def test_a_record_tracekit_does_not_draw_is_one_line(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"schema": "tracekit.future_thing", "schema_version": "1.0"}))
    result = run_tracekit("report", other, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "a tracekit.future_thing record, which tracekit report does not draw" in result.stderr
    assert "tracekit.doctor" in result.stderr and "tracekit.analysis" in result.stderr
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": []}))  # not a record: the analysis reader says why
    result = run_tracekit("report", trace, cwd=tmp_path)
    assert result.returncode == 2 and "not a tracekit analysis" in result.stderr


def test_every_schema_tracekit_writes_is_drawn() -> None:
    from tracekit.results import ab, analysis, capture, compare, doctor, loader_probe, param_audit, sweep

    written = {
        analysis.SCHEMA,
        compare.COMPARISON_SCHEMA,
        sweep.SWEEP_SCHEMA,
        sweep.MATRIX_SCHEMA,
        doctor.DOCTOR_SCHEMA,
        capture.CAPTURE_SCHEMA,
        ab.AB_SCHEMA,
        loader_probe.LOADER_PROBE_SCHEMA,
        param_audit.PARAM_AUDIT_SCHEMA,
    }
    assert set(saved_kinds()) == written
