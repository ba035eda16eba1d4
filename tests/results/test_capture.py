"""The capture summary Structs: JSON round trip, the committed samples, bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import SAMPLES
from tracekit.errors import InputError
from tracekit.pipeline import capture_summary
from tracekit.results.capture import (
    CAPTURE_SCHEMA,
    CAPTURE_SCHEMA_VERSION,
    CaptureNote,
    CaptureSummary,
    Memory,
    MemorySummary,
    PhaseStats,
    RankPhases,
    StepStats,
    Throughput,
    as_capture_summary,
    dump_capture_summary,
    load_capture_summary,
)
from tracekit.results.vocab import CaptureNoteKind, SlowestBy, WorstBy

SAMPLE_NAMES = ("data_bound", "healthy", "straggler")


def small_summary() -> CaptureSummary:
    """Two ranks, two phases; rank 1 arrives 30 ms late in a 70 ms step (a straggler)."""
    return CaptureSummary(
        config={"workload": "mlp", "nproc": 2},
        environment={"torch": "2.13.0+cpu", "backend": "gloo"},
        notes=[CaptureNote(kind=CaptureNoteKind.TEXT, text="a note")],
        world_size=2,
        ranks=[0, 1],
        measured_steps=2,
        step=StepStats(mean_ns=50e6, median_ns=45e6, p95_ns=80e6, count=4),
        phases=[
            PhaseStats(phase="forward", mean_ns=25e6, median_ns=20e6, p95_ns=50e6, share_pct=50.0),
            PhaseStats(phase="backward", mean_ns=25e6, median_ns=25e6, p95_ns=30e6, share_pct=50.0),
        ],
        per_rank=[
            RankPhases(
                rank=0,
                steps=2,
                step_mean_ns=30e6,
                phase_means_ns={"forward": 10e6, "backward": 20e6},
                memory=Memory(device="cpu", peak_rss_bytes=3 * 2**20, scope="whole process"),
                pre_collective_mean_ns=10e6,
            ),
            RankPhases(
                rank=1,
                steps=2,
                step_mean_ns=70e6,
                phase_means_ns={"forward": 40e6, "backward": 30e6},
                memory=Memory(device="cuda", peak_allocated_bytes=2**30, peak_reserved_bytes=2**31),
                pre_collective_mean_ns=40e6,
            ),
        ],
        throughput=Throughput(
            slowest_rank=1,
            slowest_rank_pre_collective_mean_ns=40e6,
            median_other_pre_collective_mean_ns=10e6,
            lateness_ns=30e6,
            is_straggler=True,
            slowest_rank_by=SlowestBy.PRE_COLLECTIVE,
            pre_collective_phases=["dataload_wait", "h2d", "forward"],
            step_mean_ns=70e6,
            steps_per_s=1e9 / 70e6,
            global_samples_per_s=1e9 / 70e6 * 8,
            samples_per_step_per_rank=4,
            straggler_min_share=0.05,
        ),
    )


def test_round_trip_through_json() -> None:
    summary = small_summary()
    text = dump_capture_summary(summary)
    assert text.endswith(b"\n")
    assert load_capture_summary(text, source="s.json") == summary
    data = json.loads(text)
    assert list(data)[:3] == ["schema", "schema_version", "config"]
    assert data["schema"] == CAPTURE_SCHEMA and data["schema_version"] == CAPTURE_SCHEMA_VERSION
    # memory keeps only what was measured, as the 1.0 files do
    assert data["per_rank"][0]["memory"] == {"device": "cpu", "peak_rss_bytes": 3 * 2**20, "scope": "whole process"}


def test_a_1_5_file_keeps_its_kinds() -> None:
    """1.5 already held kinds where 1.4 held sentences: read by 1.6, none is read as a sentence."""
    memory = MemorySummary(worst_rank=1, worst_rank_by=WorstBy.DEVICE_ALLOCATED, peak_allocated_bytes=2**30)
    notes = [CaptureNote(kind=CaptureNoteKind.CPU_MEMORY), CaptureNote(kind=CaptureNoteKind.TEXT, text="a note")]
    summary = msgspec.structs.replace(small_summary(), memory=memory, notes=notes)
    data = json.loads(dump_capture_summary(summary))
    data["schema_version"] = "1.5"
    assert load_capture_summary(json.dumps(data), source="s.json") == summary


#: A capture summary of schema 1.0, as the sample captures held it before they were captured
#: again at analysis 2.9 (samples/captures/straggler/summary.json at commit 3fef4d2).
SUMMARY_1_0 = Path(__file__).parent / "data" / "straggler-summary-1.0.json"


def test_a_summary_of_schema_1_0_loads_and_writes_back_the_same() -> None:
    summary = load_capture_summary(SUMMARY_1_0.read_bytes(), source=str(SUMMARY_1_0))
    assert summary.schema_version == CAPTURE_SCHEMA_VERSION  # a 1.0 file, read into this layout
    assert summary.world_size == 8 and summary.ranks == list(range(8)) and len(summary.per_rank) == 8
    assert sum(p.share_pct or 0 for p in summary.phases) == pytest.approx(100)
    assert summary.throughput.straggler_min_share is None  # added in 1.1
    assert summary.throughput.is_straggler
    assert summary.environment is not None and summary.environment["backend"] == "gloo"
    # every key of the 1.0 file comes back with the same value
    written = json.loads(dump_capture_summary(summary))
    written["throughput"].pop("straggler_min_share")
    assert (written.pop("memory"), written.pop("memory_phases")) == (None, [])  # added in 1.2
    added = ("phase_memory_measure", "phase_memory_deltas", "phase_reserved_deltas", "step_memory_change_bytes")
    added += ("saved_tensor_bytes_mean", "saved_tensor_bytes_max", "step_cpu_ns")  # 1.7: step_cpu_ns
    for rank in written["per_rank"]:
        assert not any(rank.pop(k) for k in added)  # None or {}
    original = json.loads(SUMMARY_1_0.read_text())
    # where 1.0 held a sentence, 1.5 holds a kind and figures
    said = original["throughput"].pop("slowest_rank_by")
    assert said == "host time before the step's first collective (dataload_wait, h2d, forward)"
    assert written["throughput"].pop("slowest_rank_by") == "pre_collective"
    assert written["throughput"].pop("pre_collective_phases") == ["dataload_wait", "h2d", "forward"]
    assert (original.pop("schema_version"), written.pop("schema_version")) == ("1.0", CAPTURE_SCHEMA_VERSION)
    assert written == original


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_committed_samples_load_and_write_back_the_same(name: str) -> None:
    # captured at 1.6: read into this layout and written back the same, but for what 1.7 added
    # (each rank's step_cpu_ns, empty: not measured) and the version
    path = SAMPLES / "captures" / name / "summary.json"
    summary = load_capture_summary(path.read_bytes(), source=str(path))
    assert summary.schema_version == CAPTURE_SCHEMA_VERSION
    assert all(r.step_cpu_ns == [] for r in summary.per_rank)
    assert summary.world_size == 8 and summary.ranks == list(range(8)) and len(summary.per_rank) == 8
    assert sum(p.share_pct or 0 for p in summary.phases) == pytest.approx(100)
    assert summary.environment is not None and summary.environment["backend"] == "gloo"
    assert isinstance(summary.environment.get("cpu_count"), int)  # "more ranks than cores" can be said
    written = json.loads(dump_capture_summary(summary))
    for rank in written["per_rank"]:
        assert rank.pop("step_cpu_ns") == []
    original = json.loads(path.read_bytes())
    assert (original.pop("schema_version"), written.pop("schema_version")) == ("1.6", CAPTURE_SCHEMA_VERSION)
    assert written == original


def test_straggler_sample_names_rank_5() -> None:
    path = SAMPLES / "captures" / "straggler" / "summary.json"
    assert load_capture_summary(path.read_bytes(), source=str(path)).throughput.slowest_rank == 5


def _dumped(**changes: Any) -> bytes:
    data = msgspec.to_builtins(small_summary())
    data.update(changes)
    return msgspec.json.encode(data)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            _dumped(schema_version="2.0"),
            "capture summary schema version 2.0 is not readable by this tracekit (reads 1.x)",
        ),
        (_dumped(schema_version=None), "capture summary schema version None is not readable"),
        (
            _dumped(schema="tracekit.analysis"),
            'not a tracekit capture summary (no "schema": "tracekit.capture_summary")',
        ),
        (b"[1, 2]", "not a tracekit capture summary"),
        (b'{"schema": "tracekit.capture_summary", "schema_ver', "not valid JSON"),
        (_dumped(world_size="eight"), "not a valid capture summary (Expected `int`, got `str` - at `$.world_size`)"),
        (_dumped(phases=None), "not a valid capture summary"),
    ],
)
def test_bad_summaries_are_one_line_input_errors(text: bytes, reason: str) -> None:
    with pytest.raises(InputError) as info:
        load_capture_summary(text, source="out/summary.json")
    assert info.value.message.startswith(f"out/summary.json: {reason}")
    assert "\n" not in info.value.message


def test_a_newer_minor_version_loads_and_ignores_unknown_fields() -> None:
    summary = load_capture_summary(_dumped(schema_version="1.9", added_later={"x": 1}), source="s.json")
    assert summary.schema_version == "1.9" and summary.ranks == [0, 1]


def test_as_capture_summary_takes_decoded_json_or_the_struct() -> None:
    summary = small_summary()
    assert as_capture_summary(msgspec.to_builtins(summary), source="x") == summary
    assert as_capture_summary(summary, source="x") is summary


def test_discover_finds_the_summary_beside_the_traces(tmp_path: Path) -> None:
    sample = SAMPLES / "captures" / "healthy"
    found = capture_summary([sample])
    assert found == load_capture_summary((sample / "summary.json").read_bytes(), source="summary.json")
    assert capture_summary([sample / "rank0.pt.trace.json.gz"]) == found
    (tmp_path / "summary.json").write_text('{"something": "else"}')
    assert capture_summary([tmp_path]) is None  # not a capture summary: not ours, ignored
    (tmp_path / "summary.json").write_bytes(_dumped(schema_version="2.0"))
    with pytest.raises(InputError, match=r"summary\.json: capture summary schema version 2\.0"):
        capture_summary([tmp_path])


def test_version_strings_that_subclass_str_are_written_as_text() -> None:
    class Version(str):  # like torch.__version__ (a TorchVersion)
        pass

    summary = msgspec.structs.replace(small_summary(), environment={"torch": Version("2.13.0+cpu")})
    loaded = load_capture_summary(dump_capture_summary(summary), source="s.json")
    assert loaded.environment == {"torch": "2.13.0+cpu"}
    with pytest.raises(TypeError, match="cannot write object values"):
        dump_capture_summary(msgspec.structs.replace(small_summary(), environment={"x": object()}))
