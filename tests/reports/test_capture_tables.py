"""The capture summary's one table builder, on a small hand-made summary."""

from __future__ import annotations

import msgspec

from tests.results.test_capture import small_summary
from tracekit.reports.capture_tables import capture_tables
from tracekit.reports.document import Format, Table, View
from tracekit.reports.layout import analysis_document
from tracekit.reports.terminal import TerminalRenderer
from tracekit.results.analysis import Analysis
from tracekit.results.capture import (
    CaptureSummary,
    Memory,
    MemorySummary,
    PhaseMemory,
    RankPhases,
    StepStats,
    Throughput,
)
from tracekit.results.vocab import WorstBy


def test_phase_rows_end_with_the_step_row() -> None:
    phases, _, _ = capture_tables(small_summary())
    assert phases.key == "capture_phases"
    assert phases.title == "Phases over 4 measured rank-steps (host ms)"
    assert phases.columns == ("phase", "mean", "median", "p95", "share")
    assert phases.rows == (
        ("forward", "25.00", "20.00", "50.00", "50.0%"),
        ("backward", "25.00", "25.00", "30.00", "50.0%"),
        ("step", "50.00", "45.00", "80.00", "100.0%"),
    )


def test_phase_rows_in_ms() -> None:
    summary = msgspec.structs.replace(
        small_summary(), step=StepStats(mean_ns=2e6, median_ns=1.5e6, p95_ns=4.25e6, count=4)
    )
    assert capture_tables(summary)[0].rows[-1] == ("step", "2.00", "1.50", "4.25", "100.0%")


def test_per_rank_rows_show_arrival_and_peak_memory() -> None:
    _, ranks, _ = capture_tables(small_summary())
    assert ranks.key == "capture_ranks"
    assert ranks.columns == ("rank", "step mean ms", "before 1st collective ms", "peak memory")
    assert ranks.rows == (
        ("0", "30.00", "10.00", "3 MiB RSS"),
        ("1", "70.00", "40.00", "1,024 MiB allocated"),
    )


def test_per_rank_limit_keeps_the_latest_to_arrive() -> None:
    _, ranks, _ = capture_tables(small_summary(), limit=1)
    assert [r[0] for r in ranks.rows] == ["1"]
    assert "1 of 2 ranks shown" in ranks.caption


def test_facts_name_throughput_slowest_rank_straggler_and_notes() -> None:
    facts = capture_tables(small_summary())[2]
    assert facts.key == "capture_facts"
    assert facts.rows == (
        ("steps/s", "14.29"),
        ("global samples/s", "114 over 2 ranks, 4 per step per rank"),
        (
            "slowest rank",
            "rank 1, the last to arrive: 40.00 ms per step of host time before the step's first collective "
            "(dataload_wait, h2d, forward), against a median of 10.00 ms on the others",
        ),
        ("straggler", "yes: rank 1 arrives 30.00 ms after the others' median, more than 5% of the 70.00 ms step"),
        ("note", "a note"),
    )


def test_no_straggler_and_single_rank_lines() -> None:
    balanced = msgspec.structs.replace(
        small_summary(), throughput=msgspec.structs.replace(small_summary().throughput, is_straggler=False)
    )
    assert capture_tables(balanced)[2].rows[3] == (
        "straggler",
        "no: no rank reaches the step's first collective later than 5% of a step after the others",
    )
    alone = Throughput(slowest_rank=0, slowest_rank_pre_collective_mean_ns=1e6, steps_per_s=2.0)
    assert capture_tables(msgspec.structs.replace(small_summary(), throughput=alone))[2].rows[1:4] == (
        ("global samples/s", "-"),
        (
            "slowest rank",
            "rank 0, the last to arrive: 1.00 ms per step of host time before the step's first collective",
        ),
        ("straggler", "no: a single rank, no other rank waits for it"),
    )


def test_a_summary_without_steps_says_so() -> None:
    empty = CaptureSummary(
        world_size=1,
        ranks=[0],
        measured_steps=0,
        step=StepStats(),
        phases=[],
        per_rank=[RankPhases(rank=0, steps=0)],
        throughput=Throughput(),
    )
    phases, ranks, facts = capture_tables(empty)
    assert phases.rows == () and phases.empty
    assert ranks.rows == (("0", "-", "0.00", "-"),)
    assert facts.rows == (("steps/s", "-"), ("global samples/s", "-"), ("slowest rank", "-"), ("straggler", "-"))


def test_analysis_reports_build_the_same_tables_from_the_analysis() -> None:
    from tests.factories import make_run
    from tracekit.analyzers import analyze

    summary = small_summary()
    analysis = msgspec.structs.replace(analyze(make_run([])), capture=summary)

    def every_table(a: Analysis) -> list[Table]:
        return [t for s in analysis_document(a, View(Format.HTML)).sections for t in s.tables]

    keys = [t.key for t in every_table(analysis)]
    shown = [(t.key, t.rows) for t in every_table(analysis) if t.key.startswith("capture")]
    assert shown == [(t.key, t.rows) for t in capture_tables(summary)]
    assert "capture_phases" in keys
    assert not [k for k in every_table(analyze(make_run([]))) if k.key.startswith("capture")]


def test_terminal_text_shows_every_table() -> None:
    text = TerminalRenderer(width=200).render(small_summary())
    for expected in (
        "Phases over 4 measured rank-steps",
        "Capture summary: per rank",
        "1,024 MiB allocated",
        "steps/s",
        "note",
        "a note",
    ):
        assert expected in text


def with_memory() -> CaptureSummary:
    """The small summary with memory per phase: rank 1 on a GPU, its forward adds 512 MiB."""
    s = small_summary()
    mib = 2**20
    gpu = Memory(device="cuda", peak_allocated_bytes=2**30, peak_reserved_bytes=2**31, rss_bytes=900 * mib)
    ranks = [
        msgspec.structs.replace(
            s.per_rank[0],
            memory=Memory(device="cuda", peak_allocated_bytes=2**29, peak_reserved_bytes=2**30, rss_bytes=800 * mib),
            phase_memory_measure="allocated_bytes",
            phase_memory_deltas={"forward": 256 * mib, "backward": -256 * mib},
            step_memory_change_bytes=0.0,
            saved_tensor_bytes_mean=200 * mib,
        ),
        msgspec.structs.replace(
            s.per_rank[1],
            memory=gpu,
            phase_memory_measure="allocated_bytes",
            phase_memory_deltas={"forward": 512 * mib, "backward": -500 * mib},
            step_memory_change_bytes=12 * mib,
            saved_tensor_bytes_mean=400 * mib,
            saved_tensor_bytes_max=410 * mib,
        ),
    ]
    return msgspec.structs.replace(
        s,
        per_rank=ranks,
        memory=MemorySummary(
            device="cuda",
            worst_rank=1,
            worst_rank_by=WorstBy.DEVICE_ALLOCATED,
            peak_allocated_bytes=2**30,
            peak_reserved_bytes=2**31,
            phase_memory_measure="allocated_bytes",
            step_memory_change_bytes_mean=6 * mib,
            saved_tensor_bytes_mean=300 * mib,
            saved_tensor_bytes_max=410 * mib,
        ),
        memory_phases=[
            PhaseMemory(phase="forward", delta_bytes_mean=384 * mib),
            PhaseMemory(phase="backward", delta_bytes_mean=-378 * mib),
        ],
    )


def test_memory_columns_and_rows_when_the_summary_has_memory() -> None:
    phases, ranks, facts = capture_tables(with_memory())
    assert phases.columns[-1] == "memory change"
    assert [(r[0], r[-1]) for r in phases.rows] == [
        ("forward", "+384.0 MiB"),
        ("backward", "-378.0 MiB"),
        ("step", "+6.0 MiB"),
    ]
    assert "device memory allocated" in phases.caption
    # the RSS at the end and its peak in columns of their own (one cell of both wrapped, issue 46, item 8),
    # and no headroom column without the device's capacity, nor its definition
    assert ranks.columns[3:] == (
        "peak memory",
        "peak reserved",
        "memory change/step",
        "forward saved",
        "RSS at end",
        "RSS peak",
    )
    assert ranks.rows[1][3:] == ("1,024 MiB allocated", "2,048.0 MiB", "+12.0 MiB", "400.0 MiB", "900.0 MiB", "-")
    assert "headroom" not in ranks.caption
    rows = dict(facts.rows)
    assert rows["peak memory"] == (
        "rank 1 has the highest peak device memory allocated in the measured steps; largest over ranks: "
        "1,024.0 MiB allocated, 2,048.0 MiB reserved"
    )
    assert rows["forward saves"] == "300.0 MiB per step, mean over ranks; at most 410.0 MiB"
    assert facts.rows[-1] == ("note", "a note")  # notes stay last


def test_headroom_column_when_capture_recorded_the_device_capacity() -> None:
    s = with_memory()
    total = 8 * 2**30  # rank 1 reserves 2 GiB of an 8 GiB device: 6 GiB (75%) left
    replace = msgspec.structs.replace
    ranks = [replace(r, memory=replace(r.memory, total_bytes=total)) for r in s.per_rank]
    _, table, _ = capture_tables(msgspec.structs.replace(s, per_rank=ranks))
    assert table.columns[3:6] == ("peak memory", "peak reserved", "headroom")
    assert [row[5] for row in table.rows] == ["7,168.0 MiB (87.5%)", "6,144.0 MiB (75.0%)"]


def test_beside_the_trace_the_capture_phases_say_why_they_differ() -> None:
    # issue 46, item 8: an analysis's report showed backward 9.10 ms in one phase table and 11.30 ms
    # in the other without a word why
    from tracekit.reports.capture_tables import BESIDE_TRACE, capture_tables

    alone, *_ = capture_tables(with_memory())
    beside, *_ = capture_tables(with_memory(), beside_trace=True)
    assert BESIDE_TRACE not in alone.caption and beside.caption.endswith(BESIDE_TRACE)
    assert "the capture's own timers over every measured step" in beside.caption
