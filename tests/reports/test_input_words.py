"""The run's warnings about its input, and how each rank was found: each kind is words from its
figures (the words the analysis held before schema 2.5), and an analysis of 2.0 to 2.4 reads its
words back as kinds."""

from __future__ import annotations

import json
import typing

import msgspec
import pytest

from tests.results.test_io import saved
from tracekit.model.input_warnings import DropReasonName, InputWarningKind
from tracekit.model.run import RankSourceName
from tracekit.reports import input_words as iw
from tracekit.reports.tables import input_problems, trace_files
from tracekit.results.analysis import SCHEMA_VERSION, DroppedEvent, RankFound, RunWarning
from tracekit.results.io import decode_analysis
from tracekit.results.vocab import DropReason, RankSource, RunWarningKind

P = "runs/rank1.pt.trace.json"
_DROPPED = "event(s) whose times cannot be right"
#: Each kind of warning with its figures, and its sentence.
WARNINGS = [
    (
        RunWarning(kind=RunWarningKind.BAD_DISTRIBUTED_INFO, path=P, key="rank", value="'3'"),
        f"{P}: distributedInfo.rank is '3', which is not a rank; it was ignored",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_DISTRIBUTED_INFO, path=P, key="world_size", value="0"),
        f"{P}: distributedInfo.world_size is 0, which is not a world size; it was ignored",
    ),
    (
        RunWarning(kind=RunWarningKind.NOT_EVENTS, path=P, count=3),
        f"{P}: 3 entries of traceEvents are not events (not JSON objects); they were left out",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_ARGS, path=P, count=2),
        f"{P}: 2 event(s) have args that are not a JSON object; they were read without their args",
    ),
    (
        RunWarning(
            kind=RunWarningKind.DROPPED_EVENTS,
            path=P,
            count=3,
            reasons={DropReason.NO_TIME: 2, DropReason.FAR: 1},
            example=DroppedEvent(name="ProfilerStep#9", reason=DropReason.FAR, unit="us", start=1.7e15, duration=1e15),
        ),
        f"{P}: dropped 3 {_DROPPED} (2 with no numeric time, 1 with a time far outside the rest of the rank), "
        "e.g. 'ProfilerStep#9' at 1700000000000000 us lasting 1000000000000000 us; the analysis does not use them",
    ),
    (
        RunWarning(
            kind=RunWarningKind.DROPPED_EVENTS,
            path=P,
            count=1,
            reasons={DropReason.NEGATIVE: 1},
            example=DroppedEvent(name="it's", reason=DropReason.NEGATIVE, unit="ns", start=5e20, duration=-3.0),
        ),
        f'{P}: dropped 1 {_DROPPED} (1 with a negative duration), e.g. "it\'s" at 5e+20 ns lasting -3 ns; '
        "the analysis does not use them",
    ),
    (
        RunWarning(
            kind=RunWarningKind.DROPPED_EVENTS,
            path=P,
            count=1,
            reasons={DropReason.NO_EXTENT: 1},
            example=DroppedEvent(name=None, reason=DropReason.NO_EXTENT, unit="us", start=12.0),
        ),
        f"{P}: dropped 1 {_DROPPED} (1 with no duration), e.g. an unnamed event at 12 us without a duration; "
        "the analysis does not use them",
    ),
    (
        RunWarning(
            kind=RunWarningKind.DROPPED_EVENTS,
            path=P,
            count=1,
            reasons={DropReason.NO_TIME: 1},
            example=DroppedEvent(name="mm", reason=DropReason.NO_TIME, unit="us"),
        ),
        f"{P}: dropped 1 {_DROPPED} (1 with no numeric time), e.g. 'mm' with no usable start time; "
        "the analysis does not use them",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_SESSION_START, path="r.sqlite", value="'-5'"),
        "r.sqlite: the session start time (utcEpochNs) is '-5', not a time: it was ignored, so this file's clock "
        "is not aligned with other files",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_RANK_ENV, path="r.sqlite", key="RANK", value="'x'"),
        "r.sqlite: the recorded RANK='x' is not a rank number; it was ignored",
    ),
    (
        RunWarning(kind=RunWarningKind.RANK_OUTSIDE_WORLD, path=P, rank=8, world_size=8),
        f"{P}: rank 8 is outside the world of 8 ranks its file records",
    ),
    (
        RunWarning(kind=RunWarningKind.MISSING_RANKS, count=1, world_size=2, ranges=[(1, 1)]),
        "1 of the 2 ranks of this world have no trace here (rank 1): cross-rank figures cover only the ranks present",
    ),
    (
        RunWarning(kind=RunWarningKind.MISSING_RANKS, count=16, world_size=40, ranges=[(0, 4), (6, 6)], more=3),
        "16 of the 40 ranks of this world have no trace here (ranks 0-4, 6 and 3 more ranges): cross-rank "
        "figures cover only the ranks present",
    ),
    (
        RunWarning(kind=RunWarningKind.NO_COMM_KERNELS, rank=3, world_size=8, count=12),
        "rank 3: distributed run (world size 8, 12 host-side collective ops) but no GPU kernel was recognized as "
        "communication; communication time will read as zero (name its kernels with --comm-kernel REGEX)",
    ),
    (
        RunWarning(kind=RunWarningKind.NO_COMM_KERNELS, rank=0, count=4),
        "rank 0: distributed run (world size None, 4 host-side collective ops) but no GPU kernel was recognized "
        "as communication; communication time will read as zero (name its kernels with --comm-kernel REGEX)",
    ),
    (
        RunWarning(kind=RunWarningKind.MEMORY_ONLY),
        "memory timelines only: no trace events, so no time breakdown or verdict; memory is reported",
    ),
    (
        RunWarning(kind=RunWarningKind.DEVICE_EVENTS_UNREAD, path=P, key="mtia", value="mtia_insight", count=20),
        f"{P}: 20 MTIA device event(s) (mtia_insight) are in this trace, but tracekit does not read them as device "
        "work: the MTIA's time is not analyzed, only the host's",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_STEPS, path=P, key="nested", count=3),
        f"{P}: 3 step marker(s) inside another step marker (a step marked twice); they were left out",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_STEPS, path=P, key="zero_length", count=2),
        f"{P}: 2 step marker(s) of zero length; they were left out (the steps come from the rest, or are inferred)",
    ),
    (
        RunWarning(kind=RunWarningKind.UNEVEN_RANKS, path=P, rank=3, key="collectives", count=12, value="24"),
        f"{P}: rank 3 recorded 12 collectives where the ranks recorded 24 (their median): its trace was cut short, "
        "or it ran other work; collectives are matched across ranks only where every rank recorded them, so waits "
        "and stragglers cover that part",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_MEMORY, path=P, count=4),
        f"{P}: 4 memory row(s) hold totals no allocator reports (negative, beyond 64 bits, or less reserved than "
        "allocated); they were left out of the memory figures",
    ),
    (
        RunWarning(kind=RunWarningKind.BAD_MEMORY, path=P, key="frees", count=1),
        f"{P}: in 1 memory categories, more was freed than the timeline saw allocated before; the difference is "
        "counted as memory that existed before profiling",
    ),
    (
        RunWarning(kind=RunWarningKind.CPU_ONLY),
        "no GPU activity in these traces: a CPU-only run; the GPU sections (breakdown, idle, kernels) are left "
        "out, the host's steps, phases and time breakdown are reported",
    ),
    (
        RunWarning(kind=RunWarningKind.TEXT, text="a: b (older words)"),
        "a: b (older words)",
    ),
]


def _old(warnings: list[str]) -> bytes:
    """The saved analysis as schema 2.4 held it, with these warnings."""
    doc = json.loads(saved())
    doc["schema_version"] = "2.4"
    doc["run"]["warnings"] = warnings
    return json.dumps(doc).encode()


@pytest.mark.parametrize(("warning", "sentence"), WARNINGS)
def test_each_warning_is_its_sentence(warning: RunWarning, sentence: str) -> None:
    assert iw.run_warning(warning) == sentence


#: The words of a warning in a 2.4 analysis, where they differ from today's.
LEGACY = {
    RunWarningKind.CPU_ONLY: "no GPU activity in these traces: a CPU-only run; GPU breakdown, overlap and kernel "
    "tables are empty, host-side steps and phases are reported",
}


#: Kinds an analysis of 2.4 cannot hold: they came later.
LATER = {
    RunWarningKind.DEVICE_EVENTS_UNREAD,
    RunWarningKind.BAD_STEPS,
    RunWarningKind.UNEVEN_RANKS,
    RunWarningKind.BAD_MEMORY,
}


@pytest.mark.parametrize(("warning", "sentence"), [(w, s) for w, s in WARNINGS if w.kind not in LATER])
def test_an_analysis_of_2_4_reads_its_warning_back_as_the_kind(warning: RunWarning, sentence: str) -> None:
    analysis = decode_analysis(_old([LEGACY.get(warning.kind, sentence)]), source="old.json")
    assert analysis.run.warnings == [warning]
    assert analysis.schema_version == SCHEMA_VERSION  # in this version's layout now
    problems = input_problems(analysis)
    assert problems is not None and ("warning", "", sentence) in problems.rows


def test_every_kind_has_its_words_and_the_model_names_the_same_kinds() -> None:
    assert {w.kind for w, _ in WARNINGS} == set(RunWarningKind) == set(iw.RUN_WARNINGS)
    assert set(iw.DROP_REASONS) == set(DropReason)
    assert set(typing.get_args(InputWarningKind)) == {k.value for k in RunWarningKind} - {RunWarningKind.TEXT}
    assert set(typing.get_args(DropReasonName)) == {r.value for r in DropReason}


def test_warnings_round_trip_through_json() -> None:
    warnings = [w for w, _ in WARNINGS]
    assert msgspec.json.decode(msgspec.json.encode(warnings), type=list[RunWarning]) == warnings


#: Each way a rank is found, with its figures, and its words (what analyses before 2.5 held).
RANK_SOURCES = [
    (RankFound(kind=RankSource.DISTRIBUTED_INFO), "distributedInfo"),
    (RankFound(kind=RankSource.ENV, key="OMPI_COMM_WORLD_RANK"), "OMPI_COMM_WORLD_RANK env"),
    (RankFound(kind=RankSource.ARGUMENT, key="--local_rank"), "--local_rank argument"),
    (
        RankFound(kind=RankSource.PROCESS_ORDER, processes=2, pid=149),
        "process order by GPU (one file, 2 processes; pid 149)",
    ),
    (RankFound(kind=RankSource.FILE_NAME), "file name"),
    (RankFound(kind=RankSource.OVERRIDE), "--rank"),
    (RankFound(kind=RankSource.ASSUMED_ZERO), "assumed 0 (a single file without a rank; set it with --rank)"),
    (RankFound(kind=RankSource.NONE), "none recorded"),
    (RankFound(kind=RankSource.TEXT, text="by hand"), "by hand"),
]


@pytest.mark.parametrize(("found", "words"), RANK_SOURCES)
def test_each_way_a_rank_is_found_is_its_words_and_reads_back_from_2_4(found: RankFound, words: str) -> None:
    assert iw.rank_found(found) == words
    doc = json.loads(_old([]))
    doc["run"]["ranks"][0]["rank_source"] = words
    analysis = decode_analysis(json.dumps(doc).encode(), source="old.json")
    assert analysis.run.ranks[0].rank_source == found
    assert trace_files(analysis).rows[0][2] == words


def test_every_way_a_rank_is_found_has_its_words_and_the_model_names_the_same() -> None:
    assert {f.kind for f, _ in RANK_SOURCES} == set(RankSource) == set(iw.RANK_SOURCES)
    assert set(typing.get_args(RankSourceName)) == {k.value for k in RankSource} - {RankSource.TEXT}
