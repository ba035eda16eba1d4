"""Events with impossible times are dropped, counted and named; bad ranks are named; nothing poisons a rank."""

from __future__ import annotations

import copy
import gzip
from typing import TYPE_CHECKING, Any

import msgspec
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SAMPLES
from tests.factories import kineto_event, nsys_kernel_rows, said, simple_step, write_kineto, write_nsys
from tracekit.analyzers import analyze
from tracekit.errors import InputError
from tracekit.model.input_warnings import DroppedEvent
from tracekit.readers import load_run
from tracekit.readers.kineto import read_kineto
from tracekit.readers.plausible import FAR, FAR_NS, NEGATIVE, NO_EXTENT, NO_TIME, SPREAD_FACTOR, _window, screen
from tracekit.reports.input_words import DROP_REASONS
from tracekit.results.vocab import DropReason

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis


#: Where the clock of a real trace is: microseconds since the epoch (September 2023).
EPOCH_US = 1_694_128_201_545_000.0
#: The start of the first step of :func:`steps`.
T0 = EPOCH_US + 1_000_000.0


def steps(rank: int, count: int = 3) -> list[dict[str, Any]]:
    """``count`` steps of :func:`simple_step`, 200 us apart, on an epoch clock as real traces are."""
    return [e for i in range(count) for e in simple_step(rank, offset=EPOCH_US + 200.0 * i)]


def numbers(analysis: Analysis) -> bytes:
    """What a report says about the ranks: steps, GPU breakdown, overlap, verdict."""
    return msgspec.json.encode([analysis.steps, analysis.gpu_breakdown, analysis.overlap, analysis.verdict])


def two_ranks(folder: Path, bad: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir()
    write_kineto(folder / "rank0.json", steps(0), rank=0, world_size=2)
    write_kineto(folder / "rank1.json", steps(1) + (bad or []), rank=1, world_size=2)
    return folder


BAD_EVENTS: dict[str, tuple[dict[str, Any], str]] = {
    "kernel at ts -5": (kineto_event("kernel", "sm90_gemm", -5, 10, stream=7, device=0), FAR),
    "kernel at ts true": (kineto_event("kernel", "sm90_gemm", True, 10, stream=7, device=0), NO_TIME),  # type: ignore[arg-type]
    "kernel at ts null": ({**kineto_event("kernel", "sm90_gemm", 0, 10), "ts": None}, NO_TIME),
    "kernel at ts 'soon'": ({**kineto_event("kernel", "sm90_gemm", 0, 10), "ts": "soon"}, NO_TIME),
    "kernel at ts 2**64": (kineto_event("kernel", "sm90_gemm", 2**64, 10), NO_TIME),
    "kernel with dur -3": (kineto_event("kernel", "sm90_gemm", T0 + 50, -3, stream=7, device=0), NEGATIVE),
    "kernel without dur": (
        {k: v for k, v in kineto_event("kernel", "sm90_gemm", T0 + 50, 1).items() if k != "dur"},
        NO_EXTENT,
    ),
    "step lasting 10**15 us": (kineto_event("user_annotation", "ProfilerStep#9", T0 + 700, 1e15), FAR),
    "kernel a year later": (kineto_event("kernel", "sm90_gemm", T0 + 3.2e13, 5), FAR),
}


@pytest.mark.parametrize("case", list(BAD_EVENTS))
def test_one_impossible_event_is_dropped_counted_and_named(tmp_path: Path, case: str) -> None:
    event, reason = BAD_EVENTS[case]
    clean = analyze(load_run([two_ranks(tmp_path / "clean")], use_cache=False))
    run = load_run([two_ranks(tmp_path / "bad", [event])], use_cache=False)
    [warning] = [w for w in said(run.warnings) if "dropped" in w]
    assert warning.startswith(str((tmp_path / "bad" / "rank1.json").resolve()) + ": dropped 1 event(s)")
    assert f"1 with {DROP_REASONS[DropReason(reason)]}" in warning
    assert "e.g. " in warning
    assert numbers(analyze(run)) == numbers(clean)  # the other rank and this one: as if it were never there
    device = event.get("cat") == "kernel"
    assert [w.device for w in run.warnings if w.kind == "dropped_events"] == [int(device)]


def test_the_drop_is_in_every_report_and_the_cache(tmp_path: Path) -> None:
    folder = two_ranks(tmp_path / "t", [BAD_EVENTS["step lasting 10**15 us"][0]])
    cache = tmp_path / "cache"
    first = load_run([folder], cache_dir=cache)
    again = load_run([folder], cache_dir=cache)  # from the cache: the warning is kept
    assert first.warnings == again.warnings != ()
    example = "'ProfilerStep#9' at 1694128202545700 us lasting 1000000000000000 us"
    assert any(example in w for w in said(again.warnings))


def test_relative_clocks_and_instants_are_not_dropped(tmp_path: Path) -> None:
    events = [
        kineto_event("user_annotation", "ProfilerStep#1", 0, 100),
        kineto_event("cpu_op", "aten::mm", -5, 10),  # a few us before zero: a relative clock, not a fault
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 100, "tid": 1, "ts": 50, "s": "t"},
        kineto_event("kernel", "k", 20, 0, stream=7, device=0),  # a zero duration is a duration
        *(kineto_event("kernel", "k", 30 + 10 * i, 2, stream=7, device=0) for i in range(2)),
    ]
    trace = read_kineto(write_kineto(tmp_path / "rank0.json", events))
    assert trace.warnings == ()
    assert trace.events.height == 6


def test_a_long_real_step_is_not_dropped(tmp_path: Path) -> None:
    """A 13 s step in a 0.36 s recording (a real Triton trace has one): odd, not impossible."""
    events = [*steps(0), kineto_event("user_annotation", "ProfilerStep#2", T0 + 400, 13.3e6)]
    assert read_kineto(write_kineto(tmp_path / "rank0.json", events)).warnings == ()


def test_screen_counts_each_reason_once() -> None:
    df = pl.DataFrame(
        {
            "name": ["a", "b", "c", "d", "e", "f"],
            "ts": [100.0, None, 110.0, 120.0, 130.0, -1e12],
            "dur": [5.0, 1.0, None, -1.0, 2.0, 1.0],
        }
    )
    kept, dropped, window = screen(
        df, start=pl.col("ts"), end=pl.col("ts") + pl.col("dur"), needs_extent=True, unit_ns=1000, unit="us"
    )
    assert kept["name"].to_list() == ["a", "e"]
    assert dropped.count == 4
    assert dropped.reasons == {NO_TIME: 1, NO_EXTENT: 1, NEGATIVE: 1, FAR: 1}
    assert window is not None and window.center == 100.0  # the median of the usable starts 100, 130, -1e12


def test_screen_keeps_each_row_in_place_over_many_chunks() -> None:
    """The flags are computed in batches (the streaming engine): on a frame of many chunks, the
    rows dropped are still exactly the rows whose times are wrong, and the example is the first."""
    n = 300_000
    ts = pl.int_range(n, eager=True).cast(pl.Float64) + 1e9
    bad = {7: "none", 123_457: "negative", 200_001: "far", 299_999: "none"}
    values = ts.to_list()
    durs = [2.0] * n
    for row, how in bad.items():
        if how == "none":
            values[row] = None
        elif how == "negative":
            durs[row] = -3.0
        else:
            values[row] = 1e9 + 3e13  # a year later
    full = pl.DataFrame({"name": [f"e{i}" for i in range(n)], "ts": values, "dur": durs})
    chunked = pl.concat([full.slice(o, 25_000) for o in range(0, n, 25_000)], rechunk=False)
    assert chunked["ts"].n_chunks() == 12
    kept, dropped, _ = screen(
        chunked, start=pl.col("ts"), end=pl.col("ts") + pl.col("dur"), needs_extent=True, unit_ns=1000, unit="us"
    )
    assert kept["name"].to_list() == [f"e{i}" for i in range(n) if i not in bad]
    assert dropped.reasons == {NO_TIME: 2, NEGATIVE: 1, FAR: 1}
    assert dropped.example == DroppedEvent(name="e7", reason=NO_TIME, unit="us")
    assert "e.g. 'e7' with no usable start time;" in said(dropped.warnings())[0]


def test_memory_counters_out_of_range_are_dropped(tmp_path: Path) -> None:
    from tests.factories import kineto_memory

    events = [
        *steps(0),
        kineto_memory(T0 + 10, 64, allocated=64, reserved=128),
        kineto_memory(-7e14, 8, allocated=72, reserved=128),
    ]
    trace = read_kineto(write_kineto(tmp_path / "rank0.json", events))
    assert trace.counters.height == 1
    assert "'[memory]'" in said(trace.warnings)[0]


def test_nsys_rows_that_end_before_they_start_are_dropped(tmp_path: Path) -> None:
    strings = {1: "sm90_gemm"}
    kernels = nsys_kernel_rows(5)
    kernels.append({**kernels[0], "start": 2500, "end": 1500, "correlationId": 99})
    path = write_nsys(tmp_path / "r.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": kernels}, strings=strings)
    run = load_run([path], use_cache=False)
    assert run.events.filter(pl.col("kind") == "kernel").height == 5
    assert any(
        "dropped 1 event(s) whose times cannot be right (1 with a negative duration)" in w for w in said(run.warnings)
    )
    assert [w.reasons for w in run.warnings] == [((NEGATIVE, 1),)]
    assert [w.device for w in run.warnings] == [1]  # a kernel: a device activity


@pytest.mark.parametrize(
    ("rank", "shown"),
    [
        (-1, "-1"),
        (7.9, "7.9"),
        (10**12, "1000000000000"),
        (2**64, "18446744073709551616"),
        ("3", "'3'"),
        (True, "True"),
    ],
)
def test_a_rank_that_is_not_a_rank_is_ignored_and_named(tmp_path: Path, rank: Any, shown: str) -> None:
    path = write_kineto(tmp_path / "worker2.json", steps(0), rank=None)
    doc = msgspec.json.decode(path.read_bytes())
    doc["distributedInfo"] = {"rank": rank, "world_size": 4, "backend": "nccl"}
    path.write_bytes(msgspec.json.encode(doc))
    run = load_run([path], use_cache=False)
    assert run.rank_ids == [2]  # from the file name instead
    assert any(f"distributedInfo.rank is {shown}, which is not a rank" in w for w in said(run.warnings))


def test_rank_outside_its_world_and_missing_ranks_are_named(tmp_path: Path) -> None:
    write_kineto(tmp_path / "a.json", steps(0), rank=0, world_size=8)
    write_kineto(tmp_path / "b.json", steps(8), rank=8, world_size=8)
    run = load_run([tmp_path], use_cache=False)
    assert any("rank 8 is outside the world of 8 ranks" in w for w in said(run.warnings))
    assert any("7 of the 8 ranks of this world have no trace here (ranks 1-7)" in w for w in said(run.warnings))
    assert not any("have no trace" in w for w in said(load_run([tmp_path], ranks={0}, use_cache=False).warnings))


def test_a_file_without_events_is_skipped_and_named(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", steps(0), rank=0, world_size=2)
    write_kineto(tmp_path / "rank1.json", [], rank=1, world_size=2)
    run = load_run([tmp_path], use_cache=False)
    assert run.rank_ids == [0]
    [skip] = run.skipped
    assert skip.path.endswith("rank1.json") and "no events" in skip.reason
    with pytest.raises(InputError, match="no events"):
        load_run([tmp_path / "rank1.json"], use_cache=False)


def test_a_file_whose_every_time_was_dropped_says_so_when_skipped(tmp_path: Path) -> None:
    # every time a string: not "no events with a duration", but why none is left
    write_kineto(tmp_path / "rank0.json", steps(0), rank=0, world_size=2)
    write_kineto(tmp_path / "rank1.json", [{**e, "ts": str(e["ts"])} for e in steps(1)], rank=1, world_size=2)
    [skip] = load_run([tmp_path], use_cache=False).skipped
    count = len(steps(1))
    assert skip.reason.startswith(
        f"no event with a usable time: {count} event(s) whose times cannot be right ({count} with no numeric time), "
        "e.g. "
    )
    with pytest.raises(InputError, match="no event with a usable time"):
        load_run([tmp_path / "rank1.json"], use_cache=False)


def test_huge_rank_override_is_an_input_error(tmp_path: Path) -> None:
    path = write_kineto(tmp_path / "x.json", steps(0), rank=None)
    with pytest.raises(InputError, match="not a rank"):
        load_run([path], rank=2**40, use_cache=False)
    assert load_run([tmp_path / "x.json"], use_cache=False).rank_ids == [0]


@pytest.mark.parametrize(
    "args",
    [{"correlation": {}}, {"correlation": []}, {"External id": {"a": 1}}, {"stream": "x"}, {"device": 2**70}],
)
def test_arguments_of_any_type_do_not_lose_the_file(tmp_path: Path, args: dict[str, Any]) -> None:
    events = steps(0)
    bad = copy.deepcopy(events[3])
    bad["args"] = {**bad["args"], **args}
    trace = read_kineto(write_kineto(tmp_path / "rank0.json", [*events, bad]))
    assert trace.events.height == len(events) + 1


def test_a_kernel_without_a_name_is_analyzed(tmp_path: Path) -> None:
    events = steps(0)
    nameless = {k: v for k, v in events[3].items() if k != "name"}
    path = write_kineto(tmp_path / "rank0.json", [*events, nameless])
    analysis = analyze(load_run([path], use_cache=False))
    assert "(unnamed)" in [k.name for k in analysis.kernels.top]


def test_a_huge_world_is_named_without_listing_it(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank5.json", steps(0), rank=5, world_size=2**31 - 1)
    [warning] = [w for w in said(load_run([tmp_path], use_cache=False).warnings) if "no trace here" in w]
    assert "2147483646 of the 2147483647 ranks" in warning and "(ranks 0-4, 6-2147483646)" in warning


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False), min_size=1, max_size=60))
def test_the_window_is_the_one_polars_medians_give(starts: list[float]) -> None:
    # the medians partition an array in place: the same center and spread, to the bit, as
    # polars' medians of the starts and of their distances to the center
    frame = pl.DataFrame({"ts": starts}, schema={"ts": pl.Float64})
    center = frame.get_column("ts").median()
    spread = (frame.get_column("ts") - center).abs().median()
    window = _window([(frame, pl.col("ts"), None)], 1000.0)
    assert window is not None
    assert window.center == center
    assert window.bound == max(SPREAD_FACTOR * spread, FAR_NS / 1000.0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False), st.booleans()), max_size=30),
        min_size=1,
        max_size=4,
    ),
    st.integers(min_value=1, max_value=8),
)
def test_the_window_of_several_frames_read_in_slices_is_that_of_their_kept_starts(
    frames: list[list[tuple[float, bool]]], rows: int
) -> None:
    # each frame's kept starts read a few rows at a time: the window of them all, as polars'
    # medians of the kept starts put together give it
    kept = pl.Series([s for f in frames for s, ok in f if ok], dtype=pl.Float64)
    parts = [
        (
            pl.DataFrame({"ts": [s for s, _ in f]}, schema={"ts": pl.Float64}),
            pl.col("ts"),
            pl.Series([ok for _, ok in f], dtype=pl.Boolean),
        )
        for f in frames
    ]
    window = _window(parts, 1000.0, rows=rows)
    if kept.len() == 0:
        assert window is None
        return
    center = kept.median()
    assert window is not None and window.center == center
    assert window.bound == max(SPREAD_FACTOR * (kept - center).abs().median(), FAR_NS / 1000.0)


def test_no_start_is_no_window() -> None:
    assert _window([(pl.DataFrame({"ts": [1.0]}), pl.col("ts"), pl.Series([False]))], 1000.0) is None


SMALL = SAMPLES / "captures" / "cuda-h200-small" / "rank0.pt.trace.json.gz"


@pytest.mark.real
@pytest.mark.parametrize(("scale", "how"), [(0.0, "every one of them zero"), (0.001, "the median 2 ns")])
def test_device_activities_too_short_for_a_gpu_keep_the_file_from_being_read(
    tmp_path: Path, scale: float, how: str
) -> None:
    """The H200 sample (120 kernels and 9 copies, 1 us and more each) with every duration zero,
    or written in ms and read as us (1,000 times too short): read, its device would be idle
    nearly all the time ("GPU idle 100%", "launch-bound"). Not read: alone, one line naming it;
    beside a good rank of the same run, skipped and named, the good one analysed."""
    doc: dict[str, Any] = msgspec.json.decode(gzip.decompress(SMALL.read_bytes()))
    for e in doc["traceEvents"]:
        if isinstance(e.get("dur"), (int, float)):
            e["dur"] *= scale
    bad = tmp_path / "rank0.pt.trace.json"
    bad.write_bytes(msgspec.json.encode(doc))
    with pytest.raises(InputError) as alone:
        load_run([bad], use_cache=False)
    assert str(alone.value) == (
        f"{bad}: 129 of its 129 device activities (kernels, copies, sets) last under 100 ns ({how}), "
        "shorter than any a GPU records (a microsecond or so at the least): its durations are missing or "
        "not in us, too wrong to measure its device by"
    )
    (tmp_path / "good").mkdir()
    good = tmp_path / "good" / "rank1.pt.trace.json"
    good.write_bytes(gzip.decompress(SMALL.read_bytes()).replace(b'"rank": 0', b'"rank": 1', 1))
    run = load_run([bad, good], use_cache=False)
    assert [r.rank for r in run.meta.ranks] == [1]
    assert [s.path for s in run.meta.skipped] == [str(bad)]


def test_a_trace_in_whole_microseconds_keeps_its_kernels_that_round_to_zero(tmp_path: Path) -> None:
    """Older Kineto traces write whole microseconds: a kernel under one rounds to zero (3% of
    the device activities of the TensorBoard plugin's ResNet-50 traces). Fewer than half of them
    so short is a real trace: read, the zero-length kernels with the rest."""
    events = [kineto_event("kernel", f"k{i}", T0 + 10 * i, 0 if i % 3 == 0 else 2, stream=7) for i in range(30)]
    run = load_run([write_kineto(tmp_path / "rank0.json", steps(0) + events)], use_cache=False)
    assert run.events.filter(pl.col("kind") == "kernel").height >= 30


def test_an_nsys_export_of_zero_length_kernels_is_not_read(tmp_path: Path) -> None:
    kernels = [{**k, "end": k["start"]} for k in nsys_kernel_rows(6)]
    path = write_nsys(tmp_path / "r.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": kernels}, strings={1: "sm90_gemm"})
    zero = r"6 of its 6 device activities .* last under 100 ns \(every one of them zero\)"
    with pytest.raises(InputError, match=zero):
        load_run([path], use_cache=False)
    # three of six (half) as short: not read either; two of six: read
    kernels = [{**k, "end": k["start"] + (50 if i < 3 else 1000)} for i, k in enumerate(nsys_kernel_rows(6))]
    path = write_nsys(tmp_path / "half.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": kernels}, strings={1: "sm90_gemm"})
    with pytest.raises(InputError, match=r"3 of its 6 device activities .* \(the median 525 ns\)"):
        load_run([path], use_cache=False)
    kernels = [{**k, "end": k["start"] + (50 if i < 2 else 1000)} for i, k in enumerate(nsys_kernel_rows(6))]
    path = write_nsys(tmp_path / "third.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": kernels}, strings={1: "sm90_gemm"})
    assert load_run([path], use_cache=False).events.filter(pl.col("kind") == "kernel").height == 6
