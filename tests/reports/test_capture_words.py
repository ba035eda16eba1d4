"""The words of the capture summary, the DataLoader probe and the parameter audit: every kind of
note, and how ranks were chosen, is one sentence (the one the capture wrote into the file before
those files held kinds), and the sentences of older files are read back into the same kinds."""

from __future__ import annotations

import json

import msgspec
import pytest

from tests.reports.test_tool_reports import audit, probe
from tests.results.test_capture import small_summary
from tracekit.reports import capture_words as cw
from tracekit.reports import tool_reports as tr
from tracekit.results.capture import CaptureNote, MemorySummary, dump_capture_summary, load_capture_summary
from tracekit.results.loader_probe import ConfigChange, LoaderNote, load_loader_probe
from tracekit.results.param_audit import load_param_audit
from tracekit.results.records import dump_record
from tracekit.results.vocab import AuditNote, CaptureNoteKind, LoaderNoteKind, SlowestBy, WorstBy

_ON_CPU = ", applied by tracekit on CPU (accelerate applies FSDP on accelerators only)"
#: Each kind of capture note, and its sentence.
CAPTURE_NOTES = [
    (
        CaptureNote(kind=CaptureNoteKind.MEMORY_TIMELINE_OPTIONS, items=("record_shapes", "with_stack")),
        "memory_timeline turned on record_shapes, with_stack (export_memory_timeline needs them): "
        "the traced steps carry their host overhead",
    ),
    (
        CaptureNote(kind=CaptureNoteKind.CPU_MEMORY),
        "memory on CPU: device memory allocated/reserved, their peaks and the allocator snapshot are CUDA-only "
        "and not recorded; phase memory deltas are of the process's resident host memory (RSS), "
        "peak RSS is of the whole process",
    ),
    (
        CaptureNote(kind=CaptureNoteKind.CPU_SNAPSHOT),
        "memory_snapshot: the allocator snapshot is CUDA-only; none was written on CPU",
    ),
    (
        CaptureNote(kind=CaptureNoteKind.NO_SNAPSHOT, rank=3, error="RuntimeError: disk full (errno 28)"),
        "rank 3: no memory snapshot (RuntimeError: disk full (errno 28))",
    ),
    (
        CaptureNote(kind=CaptureNoteKind.NO_TIMELINE, rank=1, error="AssertionError: "),
        "rank 1: no memory timeline (AssertionError: )",
    ),
    (
        CaptureNote(kind=CaptureNoteKind.FSDP_ON_CPU, value="FULL_SHARD"),
        "FSDP FULL_SHARD (FullyShardedDataParallel)" + _ON_CPU,
    ),
    (
        CaptureNote(kind=CaptureNoteKind.FSDP2_ON_CPU, value="False"),
        "FSDP2 (fully_shard, reshard_after_forward=False)" + _ON_CPU,
    ),
    (
        CaptureNote(kind=CaptureNoteKind.DEEPSPEED_OPTIMIZER),
        "DeepSpeed runs the optimizer inside backward hooks: only total step time compares across backends",
    ),
    (CaptureNote(kind=CaptureNoteKind.TEXT, text="my own note (rank 0)"), "my own note (rank 0)"),
]
#: Kinds of capture note since 1.6 (no older file holds their sentence), and their sentences.
CAPTURE_NOTES_1_6 = [
    (
        CaptureNote(kind=CaptureNoteKind.DDP_OPTIONS_NO_EFFECT, items=("ddp_bucket_cap_mb",), value="FSDP"),
        "ddp_bucket_cap_mb had no effect: DDP did not wrap the model (FSDP wraps it)",
    ),
    (
        CaptureNote(
            kind=CaptureNoteKind.DDP_OPTIONS_NO_EFFECT,
            items=("find_unused_parameters", "ddp_gradient_as_bucket_view"),
            value="NO",
        ),
        "find_unused_parameters, ddp_gradient_as_bucket_view had no effect: DDP did not wrap the model "
        "(one rank without a process group; a backend named for one rank runs DDP)",
    ),
    (
        CaptureNote(kind=CaptureNoteKind.DDP_OPTIONS_NO_EFFECT, items=("ddp_bucket_cap_mb",), value="XLA"),
        "ddp_bucket_cap_mb had no effect: DDP did not wrap the model (distributed type XLA)",
    ),
]


def _old_summary(**changes: object) -> bytes:
    """The small summary as a file of schema 1.4 would hold it."""
    doc = json.loads(dump_capture_summary(small_summary()))
    doc["schema_version"] = "1.4"
    doc["throughput"].pop("pre_collective_phases")
    doc["throughput"]["slowest_rank_by"] = "host time before the step's first collective (dataload_wait, h2d, forward)"
    doc.update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(("note", "sentence"), CAPTURE_NOTES)
def test_each_capture_note_is_its_sentence_and_an_older_file_reads_back_the_kind(
    note: CaptureNote, sentence: str
) -> None:
    assert cw.capture_note(note) == sentence
    loaded = load_capture_summary(_old_summary(notes=[sentence]), source="summary.json")
    assert loaded.notes == [note]


@pytest.mark.parametrize(("note", "sentence"), CAPTURE_NOTES_1_6)
def test_each_capture_note_since_1_6_is_its_sentence(note: CaptureNote, sentence: str) -> None:
    assert cw.capture_note(note) == sentence


def test_every_capture_note_kind_has_its_words() -> None:
    kinds = {n.kind for n, _ in [*CAPTURE_NOTES, *CAPTURE_NOTES_1_6]}
    assert kinds == set(CaptureNoteKind) == set(cw.CAPTURE_NOTES)
    assert set(cw.SLOWEST_BY) == set(SlowestBy) and set(cw.WORST_BY) == set(WorstBy)


def test_every_kind_of_capture_note_round_trips_through_json() -> None:
    summary = msgspec.structs.replace(small_summary(), notes=[n for n, _ in [*CAPTURE_NOTES, *CAPTURE_NOTES_1_6]])
    assert load_capture_summary(dump_capture_summary(summary), source="s.json") == summary


def test_how_the_slowest_rank_was_chosen() -> None:
    t = small_summary().throughput
    words = "host time before the step's first collective"
    assert cw.slowest_by(t) == f"{words} (dataload_wait, h2d, forward)"
    assert cw.slowest_by(msgspec.structs.replace(t, slowest_rank_by=None, pre_collective_phases=[])) == words
    old = load_capture_summary(_old_summary(), source="summary.json")
    assert old.throughput == t


@pytest.mark.parametrize(
    ("by", "words"),
    [
        (WorstBy.DEVICE_ALLOCATED, "peak device memory allocated in the measured steps"),
        (WorstBy.RSS, "peak RSS (whole process)"),
        (None, "peak"),
    ],
)
def test_how_the_worst_rank_was_chosen(by: WorstBy | None, words: str) -> None:
    assert cw.worst_by(MemorySummary(worst_rank=1, worst_rank_by=by)) == words
    said = words if by is not None else None
    old = load_capture_summary(_old_summary(memory={"worst_rank": 1, "worst_rank_by": said}), source="s.json")
    assert old.memory is not None and old.memory.worst_rank_by is by


#: Each kind of the DataLoader probe's notes, and its sentence.
LOADER_NOTES = [
    (
        LoaderNote(kind=LoaderNoteKind.NO_THROUGHPUT, capture="runs/cap"),
        "the capture in runs/cap measured no throughput: no headroom",
    ),
    (
        LoaderNote(
            kind=LoaderNoteKind.OTHER_CONFIG,
            capture="runs/cap",
            differences=[
                ConfigChange(key="num_workers", captured=0, probed=2),
                ConfigChange(key="workload_args", captured={"hidden": 64, "seq": [1, 2]}, probed={"hidden": 32}),
            ],
        ),
        'the capture in runs/cap ran another config (num_workers 0 there, 2 here; workload_args {"hidden": 64, '
        '"seq": [1, 2]} there, {"hidden": 32} here): the headroom compares this loader with that training',
    ),
    (LoaderNote(kind=LoaderNoteKind.TEXT, text="the capture in x ran (oddly)"), "the capture in x ran (oddly)"),
]


@pytest.mark.parametrize(("note", "sentence"), LOADER_NOTES)
def test_each_loader_note_is_its_sentence_and_an_older_file_reads_back_the_kind(
    note: LoaderNote, sentence: str
) -> None:
    assert tr.loader_note(note) == sentence
    doc = json.loads(dump_record(probe(500.0)))
    doc.update(schema_version="1.0", samples_per_s_by="global batch x batches/s of the slowest rank", notes=[sentence])
    loaded = load_loader_probe(json.dumps(doc), source="dataloader.json")
    assert loaded.notes == [note]
    assert loaded == msgspec.structs.replace(probe(500.0), notes=[note])
    with_notes = msgspec.structs.replace(probe(500.0), notes=[note])
    assert load_loader_probe(dump_record(with_notes), source="x") == with_notes


def test_every_loader_and_audit_note_kind_has_its_words() -> None:
    assert {n.kind for n, _ in LOADER_NOTES} == set(LoaderNoteKind) == set(tr.LOADER_NOTES)
    assert set(tr.AUDIT_NOTES) == set(AuditNote)


@pytest.mark.parametrize("note", list(AuditNote))
def test_each_audit_note_is_its_sentence_and_an_older_file_reads_back_the_kind(note: AuditNote) -> None:
    sentence = tr.AUDIT_NOTES[note]
    a = msgspec.structs.replace(audit([]), notes=[note])
    assert f"note: {sentence}" in tr.audit_report(a).sections[-1].lines[0].text
    assert load_param_audit(dump_record(a), source="x") == a
    doc = json.loads(dump_record(a))
    doc.update(schema_version="1.0", notes=[sentence, "a note this tracekit never wrote"])
    assert load_param_audit(json.dumps(doc), source="audit.json") == a
