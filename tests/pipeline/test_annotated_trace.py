"""The annotated trace (``tracekit analyze --annotated-trace``): the Chrome Trace Event rules that
Perfetto and chrome://tracing need, the findings tracks, and reading it back with the same numbers."""

from __future__ import annotations

import gzip
import itertools
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.cli.test_cli import tracekit
from tracekit.analyzers.analysis import Outcome
from tracekit.errors import InputError
from tracekit.pipeline import AnalyzeOptions, analyze_paths, write_annotated_trace
from tracekit.pipeline.annotated_trace import _lanes
from tracekit.pipeline.finding_tracks import finding_tracks
from tracekit.readers.compressed import read_bytes
from tracekit.readers.kineto import read_kineto
from tracekit.readers.kineto_normalize import FINDINGS_CATEGORY
from tracekit.reports import renderer
from tracekit.reports.finding_times import IDLE_LISTED_NS, IDLE_ROWS, at

STRAGGLER = Path(__file__).resolve().parents[2] / "samples" / "captures" / "straggler"
#: Slack for microsecond floats of nanosecond times (a float64 of ~4e12 us holds ~1e-3 us).
SLACK_US = 2e-3


def _analyze(*paths: Path) -> Outcome:
    return analyze_paths(list(paths), AnalyzeOptions(executor="local", jobs=1, use_cache=False))


def _load(path: Path) -> dict[str, Any]:
    document = msgspec.json.decode(read_bytes(path))
    assert isinstance(document, dict)
    return document


def _is_id(value: object) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def check_structure(document: dict[str, Any]) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    """Assert the rules of the Chrome Trace Event Format that the viewers need; the findings'
    slices by (pid, tid)."""
    assert document["displayTimeUnit"] in ("ms", "ns")
    events = document["traceEvents"]
    named_threads = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    named_processes = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    tracks: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    original_threads = set()
    for e in events:
        if e.get("ph") != "X":
            continue
        assert isinstance(e.get("name"), str)
        assert isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float) and e["dur"] >= 0
        assert _is_id(e["pid"]) and _is_id(e["tid"])
        assert (e["pid"], e["tid"]) in named_threads, f"unnamed thread {e['pid']}/{e['tid']}"
        assert e["pid"] in named_processes, f"unnamed process {e['pid']}"
        if e.get("cat") == FINDINGS_CATEGORY:
            tracks[(e["pid"], e["tid"])].append(e)
        else:
            original_threads.add((e["pid"], e["tid"]))
    assert tracks, "no findings tracks"
    assert not set(tracks) & original_threads, "a findings track shares a thread with the original events"
    for key, slices in tracks.items():
        starts = [s["ts"] for s in slices]
        assert starts == sorted(starts), f"track {key} not in time order"
        for before, after in itertools.pairwise(slices):  # disjoint: each lane holds no overlap
            assert before["ts"] + before["dur"] <= after["ts"] + SLACK_US, f"overlap on {key}"
        for s in slices:
            assert s["args"]["end_ns"] - s["args"]["start_ns"] >= 0
            assert abs(s["ts"] - s["args"]["start_ns"] / 1000) <= SLACK_US
    return tracks


def _tracks_of(tracks: dict[tuple[Any, Any], list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for slices in tracks.values():
        for s in slices:
            out[s["args"]["track"]].append(s)
    return out


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, Path]:
    outcome = _analyze(STRAGGLER)
    path = tmp_path_factory.mktemp("annotated") / "straggler.json"
    write_annotated_trace(outcome, path)
    return outcome, path


def test_straggler_capture_follows_the_format_and_carries_the_findings(straggler: tuple[Outcome, Path]) -> None:
    outcome, path = straggler
    document = _load(path)
    by_track = _tracks_of(check_structure(document))
    assert {"steps", "phases", "idle", "straggler_waits"} <= set(by_track)
    # every rank is its own process, named, and its findings sit in it
    names = {e["pid"]: e["args"]["name"] for e in document["traceEvents"] if e.get("name") == "process_name"}
    assert names == {r: f"rank {r}" for r in range(8)}
    assert {s["pid"] for s in by_track["straggler_waits"]} == set(range(8))
    # the waits are the matched collectives' waits, each naming the rank it waited for
    per_rank = outcome.frames.collectives.per_rank
    assert len(by_track["straggler_waits"]) == per_rank.filter(per_rank["wait_ns"] > 0).height
    assert sum(s["args"]["wait_ns"] for s in by_track["straggler_waits"]) == per_rank["wait_ns"].sum()
    assert all(0 <= s["args"]["waited_for_rank"] < 8 for s in by_track["straggler_waits"])
    waited_for = {s["args"]["waited_for_rank"] for s in by_track["straggler_waits"]}
    assert {s.rank for s in outcome.analysis.stragglers.stragglers} <= waited_for
    # the host-blocked (idle) track of this CPU run carries its causes
    assert {s["args"]["cause"] for s in by_track["idle"]} == {"collective wait"}
    # steps: as many as the step analysis found, each warm-up or steady
    assert len(by_track["steps"]) == outcome.frames.steps.all_steps.height
    assert {s["args"]["status"] for s in by_track["steps"]} <= {"warm-up", "steady", "not measured"}


def test_original_events_are_kept(straggler: tuple[Outcome, Path]) -> None:
    """Each rank's events, in its file's order, with pid = rank; only its process metadata replaced."""
    _, path = straggler
    events = _load(path)["traceEvents"]
    process = ("process_name", "process_labels", "process_sort_index")
    for rank in (0, 7):
        original = _load(STRAGGLER / f"rank{rank}.pt.trace.json.gz")["traceEvents"]
        expected = [{**e, "pid": rank} for e in original if not (e.get("ph") == "M" and e.get("name") in process)]
        at = events.index(expected[0])
        assert events[at : at + len(expected)] == expected


def test_reader_skips_the_findings_of_a_multi_rank_trace(straggler: tuple[Outcome, Path]) -> None:
    """Read as one file, the annotated trace holds exactly the events of the ranks' files."""
    _, path = straggler
    read = read_kineto(path).events
    originals = [read_kineto(STRAGGLER / f"rank{r}.pt.trace.json.gz").events for r in range(8)]
    assert read.height == sum(o.height for o in originals)
    assert read["end_ns"].sum() - read["start_ns"].sum() == sum(
        o["end_ns"].sum() - o["start_ns"].sum() for o in originals
    )


#: The sections compared between an analysis and that of its annotated trace (all but the run's
#: files and the time the analysis took).
SECTIONS = (
    *("verdict", "steps", "gpu_breakdown", "host_breakdown", "overlap", "kernels", "annotations"),
    *("collectives", "stragglers", "dataloader", "host_syncs", "idle_causes", "ledger", "work"),
)


def _key_figures(outcome: Outcome) -> dict[str, Any]:
    return {name: msgspec.to_builtins(getattr(outcome.analysis, name)) for name in SECTIONS}


def test_one_rank_reads_back_with_the_same_numbers(tmp_path: Path) -> None:
    source = STRAGGLER / "rank3.pt.trace.json.gz"
    outcome = _analyze(source)
    # the capture's summary beside it, as beside the source (its cores: 8 ranks on 2 lower the confidence)
    shutil.copy(STRAGGLER / "summary.json", tmp_path / "summary.json")
    path = tmp_path / "rank3.annotated.json.gz"
    write_annotated_trace(outcome, path)
    with gzip.open(path) as f:
        document = msgspec.json.decode(f.read())
    tracks = check_structure(document)
    original = _load(source)
    steps = {e["pid"] for e in original["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert {pid for pid, _ in tracks} == steps and len(steps) == 1  # the rank's own process (its steps' pid)
    # one rank: the events and the other fields as they were
    assert document["traceEvents"][: len(original["traceEvents"])] == original["traceEvents"]
    assert document["distributedInfo"] == original["distributedInfo"]
    again = _analyze(path)
    facts = [(r.rank, r.world_size, r.backend, r.events, r.gpu_events) for r in again.analysis.run.ranks]
    assert facts == [(r.rank, r.world_size, r.backend, r.events, r.gpu_events) for r in outcome.analysis.run.ranks]
    assert _key_figures(again) == _key_figures(outcome)


def test_lanes_split_overlaps_and_nest() -> None:
    assert _lanes([0, 5, 10, 12, 30], [10, 8, 20, 15, 40]) == [0, 1, 0, 1, 0]


def test_a_track_keeps_its_longest_slices_and_says_so(tmp_path: Path, straggler: tuple[Outcome, Path]) -> None:
    outcome, _ = straggler
    tracks = {t.key: t for t in finding_tracks(outcome.frames, kept=2)}
    waits = tracks["straggler_waits"]
    assert waits.slices.group_by("rank").len()["len"].max() == 2
    assert waits.totals.filter(rank=0)["total"].item() > 2
    from tracekit.pipeline import annotated_trace

    path = tmp_path / "capped.json"
    original = annotated_trace.finding_tracks
    annotated_trace.finding_tracks = lambda red: finding_tracks(red, kept=2)  # type: ignore[assignment]
    try:
        write_annotated_trace(outcome, path)
    finally:
        annotated_trace.finding_tracks = original
    document = _load(path)
    check_structure(document)
    capped = document["tracekitFindings"]["capped"]
    assert {"track": "straggler_waits", "rank": 0, "kept": 2, "total": waits.totals["total"][0]} in capped
    names = [e["args"]["name"] for e in document["traceEvents"] if e.get("name") == "thread_name"]
    assert any(n.startswith("tracekit: straggler waits (longest 2 of ") for n in names)


def test_cli_writes_it_and_refuses_nsight(tmp_path: Path, shared_traces: Path) -> None:
    out = tmp_path / "annotated.json"
    result = tracekit("analyze", STRAGGLER / "rank0.pt.trace.json.gz", "--annotated-trace", out)
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout
    check_structure(_load(out))
    nsys = shared_traces / "nsys" / "nsysai-mock-rtx3080.sqlite"
    result = tracekit("analyze", nsys, "--annotated-trace", tmp_path / "n.json")
    assert result.returncode == 2
    assert result.stdout == ""  # refused before the analysis
    assert result.stderr.count("\n") == 1 and "Kineto" in result.stderr and str(nsys) in result.stderr
    assert not (tmp_path / "n.json").exists()


def test_nsight_input_is_refused_by_the_api(shared_traces: Path, tmp_path: Path) -> None:
    outcome = _analyze(shared_traces / "nsys" / "nsysai-mock-rtx3080.sqlite")
    with pytest.raises(InputError, match="Kineto"):
        write_annotated_trace(outcome, tmp_path / "n.json")


@pytest.mark.real
def test_real_gpu_traces(kineto_dir: Path, tmp_path: Path) -> None:
    """8 real NCCL ranks: GPU idle by cause and straggler waits; one real rank with cuda syncs
    reads back with the same numbers."""
    outcome = _analyze(kineto_dir / "param-dlrm-8rank-v100")
    path = tmp_path / "dlrm.json.gz"
    write_annotated_trace(outcome, path)
    by_track = _tracks_of(check_structure(_load(path)))
    assert {"steps", "idle", "straggler_waits"} <= set(by_track)
    idle = outcome.frames.idle
    assert idle is not None
    assert sum(s["args"]["length_ns"] for s in by_track["idle"]) == idle.intervals["length_ns"].sum()
    assert {s["args"]["cause"] for s in by_track["idle"]} == set(idle.intervals["cause"].cast(str).unique())
    # the reports name where each longest idle interval is, and it is a slice of the annotated trace
    assert outcome.analysis.idle_causes is not None
    markdown, html = renderer("md").render(outcome.analysis), renderer("html").render(outcome.analysis)
    longest = outcome.analysis.idle_causes.longest
    assert at(longest[0].start_ns, longest[0].end_ns) in markdown  # Markdown shows the first rows
    listed = [i for i in longest if i.length_ns >= IDLE_LISTED_NS][:IDLE_ROWS]  # what every format lists
    assert listed
    for interval in listed:
        assert at(interval.start_ns, interval.end_ns) in html
        assert any(
            (s["pid"], s["args"]["start_ns"], s["args"]["end_ns"])
            == (interval.rank, interval.start_ns, interval.end_ns)
            for s in by_track["idle"]
        )

    source = kineto_dir / "hta-misc" / "alexnet-a100-cuda-sync.json.gz"
    one = _analyze(source)
    path = tmp_path / "alexnet.json"
    write_annotated_trace(one, path)
    by_track = _tracks_of(check_structure(_load(path)))
    assert "host_syncs" in by_track
    assert _key_figures(_analyze(path)) == _key_figures(one)


def test_opens_in_perfetto_trace_processor(straggler: tuple[Outcome, Path]) -> None:
    """Perfetto's own importer, where its trace processor can run (it downloads its binary at
    first use; set TRACE_PROCESSOR_BIN to a local ``trace_processor_shell`` where there is no network)."""
    tp = pytest.importorskip("perfetto.trace_processor", reason="the perfetto package is not installed")
    _, path = straggler
    binary = os.environ.get("TRACE_PROCESSOR_BIN")
    try:
        config = tp.TraceProcessorConfig(bin_path=binary) if binary else tp.TraceProcessorConfig()
        processor = tp.TraceProcessor(trace=str(path), config=config)
    except Exception as exc:
        pytest.skip(f"Perfetto's trace processor cannot run here: {exc}"[:300])
    try:
        rows = processor.query(
            "select count(*) as n from slice join thread_track on slice.track_id = thread_track.id "
            "join thread using (utid) where thread.name like 'tracekit:%'"
        ).as_pandas_dataframe()
        assert int(rows["n"][0]) == sum(len(v) for v in _tracks_of(check_structure(_load(path))).values())
    finally:
        processor.close()
