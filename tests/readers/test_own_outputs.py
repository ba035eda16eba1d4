"""tracekit's own outputs in an analyzed folder (an annotated trace, an analysis, other records)
are told by their first bytes, left out and named; never read as a rank."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import msgspec
import pytest

from tests.cli.test_cli import tracekit
from tests.factories import simple_step, write_kineto
from tracekit.errors import InputError
from tracekit.pipeline import AnalyzeOptions, analyze_paths, write_annotated_trace
from tracekit.readers import load_run
from tracekit.readers.discover import discover_files
from tracekit.readers.own_outputs import FINDINGS_FIELD, own_output

STRAGGLER = Path(__file__).resolve().parents[2] / "samples" / "captures" / "straggler"
#: The sections of an analysis that the files beside the traces must not change.
SECTIONS = ("verdict", "steps", "gpu_breakdown", "host_breakdown", "overlap", "collectives", "stragglers", "ledger")
OWN = "tracekit's own output"


def _figures(path: Path) -> dict[str, object]:
    document = json.loads(path.read_text())
    return {name: document[name] for name in SECTIONS}


def test_a_folder_analyzed_again_leaves_out_its_annotated_trace_and_analysis(tmp_path: Path) -> None:
    folder = tmp_path / "straggler"
    shutil.copytree(STRAGGLER, folder)
    annotated, first = folder / "annotated.json.gz", folder / "analysis.json"
    result = tracekit("analyze", folder, "--annotated-trace", annotated, "--json", first)
    assert result.returncode == 0, result.stderr
    again = tmp_path / "again.json"
    result = tracekit("analyze", folder, "--json", again)
    assert result.returncode == 0, result.stderr
    document = json.loads(again.read_text())
    assert [r["rank"] for r in document["run"]["ranks"]] == list(range(8))
    assert _figures(again) == _figures(first)
    skipped = {s["path"]: s["reason"] for s in document["run"]["skipped"]}
    assert set(skipped) == {str(annotated), str(first)}
    assert skipped[str(annotated)].startswith(f"{OWN} (an annotated trace of several ranks")
    assert skipped[str(first)] == f"{OWN} (a tracekit.analysis record), not a trace of the run"
    assert f"skipped annotated.json.gz: {OWN}" in result.stdout
    assert f"skipped analysis.json: {OWN}" in result.stdout
    # the same command again writes its outputs over the previous ones: they are not inputs
    result = tracekit("analyze", folder, "--annotated-trace", annotated, "--json", first)
    assert result.returncode == 0, result.stderr
    assert _figures(first) == _figures(again)


def test_the_annotated_trace_of_one_rank_is_left_out_of_a_folder_and_read_when_named(tmp_path: Path) -> None:
    source = tmp_path / "rank3.pt.trace.json.gz"
    shutil.copy(STRAGGLER / source.name, source)
    outcome = analyze_paths([source], AnalyzeOptions(executor="local", jobs=1, use_cache=False))
    annotated = tmp_path / "rank3.annotated.json"  # a rank in its name too: it would claim rank 3 twice
    write_annotated_trace(outcome, annotated)
    run = load_run([tmp_path], use_cache=False)
    assert run.rank_ids == [3]
    [skip] = run.skipped
    assert skip.path == str(annotated)
    assert skip.reason.startswith(f"{OWN} (the annotated trace of one rank)")
    assert "name the file itself" in skip.reason
    named = load_run([annotated], use_cache=False)  # named itself: it reads back as its rank
    assert named.rank_ids == [3] and not named.skipped


def test_an_annotated_trace_of_several_ranks_named_alone_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    for rank in range(2):
        write_kineto(folder / f"rank{rank}.json", simple_step(rank, offset=rank * 3.0), rank=rank)
    outcome = analyze_paths([folder], AnalyzeOptions(executor="local", jobs=1, use_cache=False))
    annotated = tmp_path / "annotated.json.gz"
    write_annotated_trace(outcome, annotated)
    with pytest.raises(InputError, match="annotated trace of several ranks") as err:
        load_run([annotated], use_cache=False)
    assert str(annotated) in str(err.value)
    result = tracekit("analyze", annotated)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and str(annotated) in result.stderr and OWN in result.stderr
    run = load_run([folder / "rank0.json", annotated, folder / "rank1.json"], use_cache=False)
    assert run.rank_ids == [0, 1] and [s.path for s in run.skipped] == [str(annotated)]


def _record(path: Path, schema: str, *, indent: int | None = 2) -> Path:
    path.write_text(json.dumps({"schema": schema, "schema_version": "1.0", "rows": []}, indent=indent))
    return path


@pytest.mark.parametrize(
    "schema",
    ["tracekit.analysis", "tracekit.comparison", "tracekit.sweep", "tracekit.doctor", "tracekit.param_audit"],
)
def test_records_are_told_by_their_schema(tmp_path: Path, schema: str) -> None:
    own = own_output(_record(tmp_path / "x.json", schema))
    assert own is not None and own.what == f"a {schema} record" and not own.one_rank
    assert own_output(_record(tmp_path / "y.json", schema, indent=None)) == own


def test_traces_and_other_files_are_not_tracekits(tmp_path: Path) -> None:
    trace = write_kineto(tmp_path / "rank0.json", simple_step(0), rank=0)
    assert own_output(trace) is None
    packed = tmp_path / "rank0.json.gz"
    packed.write_bytes(gzip.compress(trace.read_bytes()))
    assert own_output(packed) is None
    mentions = tmp_path / "mentions.json"  # the marker inside an event, not the document's first field
    events = {"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": FINDINGS_FIELD, "schema": "tracekit.analysis"}]}
    mentions.write_text(json.dumps(events))
    assert own_output(mentions) is None
    _record(tmp_path / "other.json", "someone.else")
    assert own_output(tmp_path / "other.json") is None
    (tmp_path / "damaged.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    assert own_output(tmp_path / "damaged.json.gz") is None  # its reader says what is wrong
    (tmp_path / "empty.json").write_bytes(b"")
    assert own_output(tmp_path / "empty.json") is None


def test_the_annotated_marker_is_found_in_a_gzip_head(tmp_path: Path) -> None:
    head = {"displayTimeUnit": "ms", FINDINGS_FIELD: {"category": "tracekit", "layout": "x"}}
    body = msgspec.json.encode({**head, "traceEvents": [{"ph": "X", "name": "k" * 50, "ts": i} for i in range(9999)]})
    path = tmp_path / "a.json.gz"
    path.write_bytes(gzip.compress(body))
    own = own_output(path)
    assert own is not None and own.what.startswith("an annotated trace of several ranks")


def test_reports_and_details_are_not_discovered(tmp_path: Path) -> None:
    trace = write_kineto(tmp_path / "rank0.json", simple_step(0), rank=0)
    for name in ("report.md", "report.html", "details.parquet", "summary.json", "phases.rank0.json"):
        (tmp_path / name).write_text("{}")
    _record(tmp_path / "doctor.json", "tracekit.doctor")
    files, skipped = discover_files([tmp_path])
    assert files == [trace.absolute()]
    assert [(Path(s.path).name, s.reason) for s in skipped] == [
        ("doctor.json", f"{OWN} (a tracekit.doctor record), not a trace of the run")
    ]


def test_memory_timelines_beside_an_analysis_are_analyzed(tmp_path: Path) -> None:
    timeline = tmp_path / "memory_timeline.rank2.raw.json.gz"
    timeline.write_bytes(gzip.compress(json.dumps([[-1, 1, 1000, 6], [5, 2, 3000, 4]]).encode()))
    analysis = _record(tmp_path / "analysis.json", "tracekit.analysis")
    run = load_run([tmp_path], use_cache=False)
    assert run.rank_ids == [2] and [s.path for s in run.skipped] == [str(analysis)]
