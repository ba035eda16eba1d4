"""A rank analysed in windows of its steps (:mod:`tracekit.analyzers.windows`).

The events of a window are those that reach into it (a property test against a brute force);
the windows cover all time and cut no measured frame; and every entry that folds gives, from a
rank's windows, the part the whole rank gives, table for table, on the real traces and the
samples (each cut into as many windows as its frames allow, and into two).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tests.analyzers.test_run_traits import kernel, launch, softmax_between_bmms
from tests.factories import ev, make_run, nccl_call
from tests.model.test_by_kind import frames
from tracekit.analyzers import gains, host_causes, run_facts, sections, windows
from tracekit.analyzers.annotations import UNANNOTATED
from tracekit.analyzers.context import Options, RankContext, Window
from tracekit.analyzers.mapreduce import Entry, map_ranks
from tracekit.analyzers.parts import AnnotationParts, KernelParts
from tracekit.analyzers.registry import ANALYSES
from tracekit.analyzers.run_traits import traits_map
from tracekit.model.by_kind import ROW, ByKind
from tracekit.readers import load_run
from tracekit.results.vocab import IdleCause, SyncKind

if TYPE_CHECKING:
    from tracekit.model.run import Run

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "captures"


@settings(max_examples=300, deadline=None)
@given(frames(), st.integers(-2, 40), st.integers(0, 20))
def test_a_window_holds_the_events_that_reach_into_it(frame: pl.DataFrame, lo: int, length: int) -> None:
    hi = lo + length
    got = ByKind.of(frame).within(lo, hi)
    start, end = pl.col("start_ns"), pl.col("end_ns")
    expected = frame.filter((start < hi) & ((end > lo) | (start >= lo)))
    assert got.height == expected.height
    assert_frame_equal(got.frame(), expected)
    for part in got.parts.values():  # the places renumbered: every one of 0 .. height - 1 once
        assert part.get_column(ROW).dtype == pl.UInt32
    places = sorted(v for p in got.parts.values() for v in p.get_column(ROW).to_list())
    assert places == list(range(got.height))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 120), st.integers(0, 3)), min_size=1, max_size=40))
def test_the_runs_of_the_windows_calls_give_the_rank_s_calls_and_jumps(calls: list[tuple[int, int]]) -> None:
    """Each call (a correlation id) in any of 4 windows, their ids interleaved or not: the runs
    of the windows' calls give the calls and jumps of the rank's, found by a brute force."""
    ids = sorted(i for i, _ in calls)
    expected = (len(ids) - 1, sum(b - a >= run_facts.SAMPLED_JUMP for a, b in itertools.pairwise(ids)))
    runs = [
        run_facts.call_runs(pl.DataFrame({"rank": [0] * len(mine), "correlation": sorted(mine)}))
        for window in range(4)
        if (mine := [i for i, w in calls if w == window])
    ]
    got = run_facts.runs_calls(pl.concat(runs))
    assert got.select("calls", "jumps").row(0) == expected


def _run(path: Path) -> Run:
    return load_run([path])


def _plain(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in one order of its rows (its tables' rows have none that matters), names as text."""
    if not frame.width:
        return frame
    texts = [c for c, t in frame.schema.items() if isinstance(t, (pl.Categorical, pl.Enum))]
    plain = frame.with_columns(pl.col(texts).cast(pl.String))
    return plain.sort(plain.columns, nulls_last=True)


def _check_folds(run: Run, events: int, *more: int, options: Options | None = None) -> int:
    """Each rank of ``run`` mapped whole (once) and in windows of about ``events`` events, then of
    each of ``more`` (with ``options``, by default the run's own): every entry that folds gives the
    same tables. How many windows the largest plan had."""
    most = 0
    options = options or Options(has_gpu=run.has_gpu)
    for rank in run.rank_ids:
        part = run.only([rank])
        whole = map_ranks(RankContext(part, options), ANALYSES)
        for size in (events, *more):
            plan = windows.plan(RankContext(part, options), size)
            most = max(most, len(plan))
            folded = windows.map_windows(RankContext(part, options), ANALYSES, plan)
            assert list(folded.parts) == list(whole.parts)
            for entry in windows.folding(ANALYSES):
                mine, theirs = whole.parts[entry.name], folded.parts[entry.name]
                for table in mine.names():
                    assert_frame_equal(_plain(getattr(theirs, table)), _plain(getattr(mine, table)), check_dtypes=True)
    return most


def _cases(root: Path, *patterns: str) -> list[Path]:
    return sorted(p for pattern in patterns for p in root.glob(pattern))


def test_the_windows_cover_all_time_and_cut_no_frame() -> None:
    path = SAMPLES / "healthy" / "rank0.pt.trace.json.gz"
    run = _run(path)
    ctx = RankContext(run.only([0]), Options(has_gpu=run.has_gpu))
    plan = windows.plan(ctx, events=1)
    frames_ = ctx.frames
    assert len(plan) == frames_.height > 1  # one event a window at least: a cut at every frame
    assert plan[0].lo == windows.EARLIEST
    assert plan[-1].hi == windows.LATEST
    assert all(a.hi == b.lo for a, b in itertools.pairwise(plan))
    for window in plan:
        inside = frames_.filter((pl.col("start_ns") >= window.lo) & (pl.col("start_ns") < window.hi))
        assert inside.height == 1
        assert int(inside["end_ns"].max()) <= window.hi  # type: ignore[arg-type]
    # as many events a window as the rank has: one window
    assert windows.plan(ctx, events=run.height + 1) == [windows.Window(windows.EARLIEST, windows.LATEST)]


def test_several_ranks_or_no_steps_are_one_window() -> None:
    run = _run(SAMPLES / "healthy")
    assert len(run.rank_ids) > 1
    assert windows.plan(RankContext(run, Options(has_gpu=run.has_gpu)), events=1) == [
        Window(windows.EARLIEST, windows.LATEST)
    ]


def test_an_entry_without_a_fold_is_mapped_whole() -> None:
    seen: list[Window | None] = []

    def kernels(ctx: RankContext) -> KernelParts:
        seen.append(ctx.window)
        return KernelParts()

    run = _run(SAMPLES / "healthy" / "rank0.pt.trace.json.gz")
    ctx = RankContext(run.only([0]), Options(has_gpu=run.has_gpu))
    plan = windows.plan(ctx, events=1)
    windows.map_windows(ctx, [Entry("mine", kernels)], plan)
    assert seen == [None]
    folded = Entry("mine", kernels, fold=lambda parts: parts[0])
    seen.clear()
    windows.map_windows(ctx, [folded], plan)
    assert seen == plan


@pytest.mark.parametrize(
    "path",
    _cases(SAMPLES, "*/rank0.pt.trace.json.gz"),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_folds_give_the_whole_rank_s_parts_on_the_samples(path: Path) -> None:
    run = _run(path)
    assert _check_folds(run, 1, max(1, run.height // 2)) >= 1


@pytest.mark.real
@pytest.mark.parametrize(
    "name",
    [
        "hta-misc/alexnet-a100-cuda-sync.json.gz",
        "hta-misc/amd-mi250-rocm.json.gz",
        "hta-misc/cpu-only-gloo-rank34.pt.trace.json.gz",
        "hta-misc/cuda-event-sync-multistream.json.gz",
        "hta-misc/nccl-rank0-world2.json.gz",
        "hta-sampled-2rank/sampled_rank-0.json.gz",
        "hta-trace-diff/control-rank3-a100.json.gz",
        "tbplugin-resnet50-workers0/worker0.pt.trace.json.gz",
        "tbplugin-resnet50-workers4/worker0.pt.trace.json.gz",
        "tracelens-mi300-resnet-actckpt/rank0.json.gz",
        "param-dlrm-8rank-v100/worker0_step_12.1694128201545.pt.trace.json",
    ],
)
def test_the_folds_give_the_whole_rank_s_parts_on_real_traces(kineto_dir: Path, name: str) -> None:
    run = _run(kineto_dir / name)
    _check_folds(run, 1, max(1, run.height // 2))


def test_the_traits_fold_across_the_cuts() -> None:
    """Softmaxes on either side of a cut, each with a batched matmul in the window before it and
    one in the window after, 2 to 41 operators away (attention written out where both are within
    32), and kernels replayed by a graph launched a window earlier: the folded traits are the
    whole rank's."""
    ms = 1_000_000
    rows = []
    for step in range(12):
        rows.append(ev("step", f"ProfilerStep#{step}", step * ms, (step + 1) * ms))
        rows.append(launch("cudaGraphLaunch" if step % 2 else "cudaLaunchKernel", step + 0.9, step + 1))
        rows.append(kernel("gemm", step + 1.1, step + 1.5, correlation=step + 1))
    for step, between in enumerate([1, 3, 20, 30, 31, 32, 33, 40, 31, 32, 2]):
        cut = (step + 1) * ms
        ops = softmax_between_bmms(0, between=between)  # 10 us apart: the softmax is the middle one
        shift = -(between + 1) * 10_000 + (step % 3 - 1) * (between // 2) * 10_000
        rows += [{**op, "start_ns": op["start_ns"] + cut + shift, "end_ns": op["end_ns"] + cut + shift} for op in ops]
    rows += [ev("cpu_op", "aten::add", 5 * ms + i * 1000, 5 * ms + i * 1000 + 500, tid=2) for i in range(50)]
    run = make_run(rows)
    whole = traits_map(RankContext(run, Options(has_gpu=run.has_gpu)))
    assert whole.signs["unfused"].to_list() == [7]  # the softmaxes with 1, 3, 20, 30, 31 (twice) and 2 between
    assert whole.time["graph_ns"].item() > 0
    assert _check_folds(run, 1, 40) > 5


def test_the_annotations_fold_gives_each_step_every_name_of_the_rank() -> None:
    # a window's steps have rows for the names found in it alone; the rank's, for all of its
    def rows(step: int, names: list[str]) -> pl.DataFrame:
        every = [*names, UNANNOTATED]
        return pl.DataFrame(
            {"rank": 0, "step": step, "name": every, "cpu_ns": 5, "gpu_ns": 3, "count": [1] * len(names) + [0]},
            schema_overrides={"count": pl.UInt32},
        )

    got = sections.annotations_fold(
        [AnnotationParts(per_step=rows(1, ["a"])), AnnotationParts(per_step=rows(2, ["b"]))]
    )
    absent = got.per_step.filter(pl.col("cpu_ns") == 0)
    assert absent.select("step", "name", "gpu_ns", "count").rows() == [(1, "b", 0, 0), (2, "a", 0, 0)]
    assert got.per_step.schema == rows(1, []).schema
    assert got.per_step.height == 6


def test_a_collective_is_keyed_by_the_rank_s_calls_of_every_window() -> None:
    # one step a window (steps are cut at every frame): the kernel of step 1 has no group of its
    # own and takes that of its stream's kernel in step 0; the kernels of steps 2 and 3, on
    # streams of no group, are numbered by the rank's first use of each (22 then 21), not the window's
    us = 1000
    rows = [ev("step", f"ProfilerStep#{i}", i * 100 * us, (i + 1) * 100 * us - us) for i in range(4)]
    rows += nccl_call(0, 40 * us, 60 * us, corr=1, pg="dp", seq=0)
    for step, (stream, corr) in enumerate([(20, 2), (22, 3), (21, 4)], start=1):
        call = nccl_call(0, (step * 100 + 40) * us, (step * 100 + 60) * us, corr=corr, stream=stream)
        rows += [r for r in call if r["name"] != "record_param_comms"]
    run = make_run(rows, world_size=1)
    ctx = RankContext(run, Options(has_gpu=run.has_gpu))
    assert len(windows.plan(ctx, events=1)) == 4
    found = map_ranks(ctx, ANALYSES).parts["collectives"].found.sort("start_ns")
    assert found["pg"].to_list() == ["dp", "dp", "stream#0", "stream#1"]
    assert _check_folds(run, events=1) == 4


def test_a_read_that_runs_on_from_the_window_before_is_not_the_window_s() -> None:
    """Host reads on one thread that touch at a cut (one ends where the next starts, one of no
    duration 1 ns before): the rank has one read each, of the step before the cut; a window
    that reads its own events alone would find another at its start. The work and the host
    syncs count the rank's."""
    us = 1000
    rows = []
    for step in range(4):
        rows.append(ev("step", f"ProfilerStep#{step}", step * 100 * us, (step + 1) * 100 * us))
        rows.append(launch("cudaLaunchKernel", step * 0.1 + 0.01, step + 1))
        rows.append(kernel("gemm", step * 0.1 + 0.03, step * 0.1 + 0.05, correlation=step + 1))
    rows += [ev("cpu_op", "aten::item", 195 * us, 200 * us), ev("cpu_op", "aten::item", 200 * us, 203 * us)]
    rows += [ev("cpu_op", "aten::item", 300 * us - 1, 300 * us - 1), ev("cpu_op", "aten::item", 300 * us, 301 * us)]
    run = make_run(rows)
    ctx = RankContext(run, Options(has_gpu=run.has_gpu))
    assert len(windows.plan(ctx, events=1)) == 4
    reads = map_ranks(ctx, ANALYSES).parts["work"].syncs.filter(sync_kind=SyncKind.HOST_READ)
    assert reads.get_column("count").sum() == 2
    assert _check_folds(run, events=1) == 4


def test_the_steps_fold_works_out_the_time_left_out_of_the_whole_rank() -> None:
    # host work before the first step and after the last, and steps a selection leaves out on
    # either side: each stretch lies in a window of its own, and the rank's recorded span is the
    # first window's first start to the last window's last end
    ms = 1_000_000
    rows = [ev("cpu_op", "setup", 0, 40 * ms)]
    for step in range(8):
        start = (50 + 10 * step) * ms
        rows.append(ev("step", f"ProfilerStep#{step}", start, start + 9 * ms))
        rows.append(ev("cpu_op", "aten::mm", start + ms, start + 8 * ms))
    rows.append(ev("cpu_op", "teardown", 140 * ms, 200 * ms))
    run = make_run(rows)
    options = Options(has_gpu=run.has_gpu, steps="2-5")
    whole = map_ranks(RankContext(run, options), ANALYSES).parts["steps"]
    assert set(whole.left_out["reason"]) == {"before_first_step", "unselected", "after_last_step"}
    assert whole.left_out.filter(reason="unselected")["steps"].to_list() == [4]
    assert _check_folds(run, events=1, options=options) == 4


def test_the_memory_fold_takes_what_ran_at_each_peak_from_the_window_it_lies_in() -> None:
    # the host's peak before the first step, the device's in the second: each window finds
    # what ran at its own; the counters' tables (the categorized timeline's too) are the rank's
    run = _run(SAMPLES / "cuda-h200-memory")
    ctx = RankContext(run, Options(has_gpu=run.has_gpu))
    plan = windows.plan(ctx, events=1)
    memory = map_ranks(ctx, ANALYSES).parts["memory"]
    assert memory.categories.height
    found = memory.per_device.filter(pl.col("peak_phase").is_not_null())
    holding = {i for t in found["peak_time_ns"] for i, w in enumerate(plan) if w.lo <= t < w.hi}
    assert len(holding) == found.height == 2
    assert _check_folds(run, events=1) == len(plan)


def test_the_ledger_fold_counts_a_gap_across_a_cut_in_its_steps_and_merges_the_comms() -> None:
    # four steps that touch, one a window: the device idle from step 0's kernel into step 1 and
    # from step 2's into step 3 (a gap across a cut, the first window's, whole: its time in the
    # next window's frames counted there, in their steps), and a collective across the cut of
    # steps 1 and 2 (one interval of the rank's communication, a piece in each window)
    us = 1000
    rows = [ev("step", f"ProfilerStep#{i}", i * 100 * us, (i + 1) * 100 * us) for i in range(4)]
    for step, (start, end) in enumerate([(10, 50), (0, 0), (210, 250), (330, 340)]):
        if end:
            rows.append(launch("cudaLaunchKernel", start / 1000 - 0.005, step + 1))
            rows.append(kernel("gemm", start / 1000, end / 1000, correlation=step + 1))
    rows += nccl_call(0, 190 * us, 210 * us, corr=9, pg="dp", seq=0)
    run = make_run(rows, world_size=2)
    ctx = RankContext(run, Options(has_gpu=run.has_gpu))
    assert len(windows.plan(ctx, events=1)) == 4
    ledger = map_ranks(ctx, ANALYSES).parts["ledger"]
    assert ledger.comms.select("start_ns", "end_ns").rows() == [(190 * us, 210 * us)]
    gaps = map_ranks(ctx, ANALYSES).parts["idle_causes"].intervals.select("start_ns", "end_ns").rows()
    assert (50 * us, 190 * us) in gaps
    assert _check_folds(run, events=1) == 4


def test_a_gap_after_work_across_the_window_s_start_has_the_whole_rank_s_cause() -> None:
    """A collective kernel runs across the cut at 200 us and the next kernel starts at 230,
    launched at 225: the whole rank says the gap [210, 230) waited on its launch, the host's
    pause from the collective's call (which overlaps the gap before it, a window earlier) to
    the launch being dispatch. The window that owns the gap reads that call with the gaps
    beside it (it held host work before: the call ends before the window)."""
    us = 1000
    rows = [ev("step", f"ProfilerStep#{i}", i * 100 * us, (i + 1) * 100 * us) for i in range(4)]
    for step, (start, end) in enumerate([(10, 50), (0, 0), (230, 250), (330, 340)]):
        if end:
            rows.append(launch("cudaLaunchKernel", start / 1000 - 0.005, step + 1))
            rows.append(kernel("gemm", start / 1000, end / 1000, correlation=step + 1))
    rows += nccl_call(0, 190 * us, 210 * us, corr=9, pg="dp", seq=0)
    run = make_run(rows, world_size=2)
    _check_folds(run, events=1)


_US = 1000
#: a kernel: (start, length, how long before it its launch begins), in us
_KERNELS = st.lists(st.tuples(st.integers(0, 395), st.integers(1, 30), st.integers(1, 60)), max_size=8)
#: an operator of the launching thread: (start, length), in us
_OPS = st.lists(st.tuples(st.integers(0, 395), st.integers(1, 40)), max_size=8)


@settings(max_examples=60, deadline=None)
@given(_KERNELS, _OPS)
def test_the_idle_fold_gives_the_rank_s_gaps_and_causes(
    kernels: list[tuple[int, int, int]], ops: list[tuple[int, int]]
) -> None:
    """Four steps of 100 us, kernels launched 1 to 60 us before they start and operators of
    the launching thread anywhere, cut at every step: the idle model's part folded from the
    windows is the whole rank's, table for table. A pause of the host (under
    ``DISPATCH_GAP_NS``) may run from an event of a gap in one window to one of a gap in the
    next, either way across the cut."""
    rows = [ev("step", f"ProfilerStep#{i}", i * 100 * _US, (i + 1) * 100 * _US) for i in range(4)]
    for corr, (start, length, lag) in enumerate(kernels, 1):
        at = (start - lag) * _US
        rows.append(ev("runtime", "cudaLaunchKernel", at, at + 5_000, correlation=corr))
        rows.append(ev("kernel", "gemm", start * _US, min(start + length, 400) * _US, correlation=corr))
    rows += [ev("cpu_op", "aten::add", start * _US, (start + length) * _US) for start, length in ops]
    run = make_run(rows)
    options = Options(has_gpu=run.has_gpu)
    entry = [e for e in ANALYSES if e.name == "idle_causes"]
    whole = map_ranks(RankContext(run, options), entry).parts["idle_causes"]
    plan = windows.plan(RankContext(run, options), events=1)
    folded = windows.map_windows(RankContext(run, options), entry, plan).parts["idle_causes"]
    for table in whole.names():
        assert_frame_equal(_plain(getattr(folded, table)), _plain(getattr(whole, table)), check_dtypes=True)


@pytest.mark.parametrize(
    ("piece_events", "gate"), [(host_causes.PIECE_EVENTS, None), (3_000, None), (3_000, 1.0), (3_000, "edge")]
)
def test_the_gains_fold_gives_the_rank_s_tables_in_its_order(
    monkeypatch: pytest.MonkeyPatch, piece_events: int, gate: float | str | None
) -> None:
    """The re-timing reads the gains' tasks in their order: the folded tables are the whole
    rank's row for row, cut at every frame. The host time runs across the cuts (the windows'
    joined again where they meet) and, in pieces of 3,000 events, is cut where the whole rank's
    pieces meet (those not joined); it is kept where the host's idle of all the windows' gaps
    reaches the share (set above the rank's: none kept; just under it: above any window's)."""
    monkeypatch.setattr(host_causes, "PIECE_EVENTS", piece_events)
    run = _run(SAMPLES / "cuda-h200-compile" / "rank0.pt.trace.json.gz")
    options = Options(has_gpu=run.has_gpu)
    if gate == "edge":
        ctx = RankContext(run, options)
        causes = [IdleCause.LAUNCH.value, IdleCause.HOST_WORK.value]
        held = ctx.idle.per_rank.filter(pl.col("cause").cast(pl.String).is_in(causes))["idle_ns"].sum()
        length = ctx.frames["end_ns"].max() - ctx.frames["start_ns"].min()  # type: ignore[operator]
        gate = held / length * (1 - 1e-9)
    if gate is not None:
        monkeypatch.setattr(gains, "HOST_IDLE_SHARE", gate)
    entry = [Entry("gains", gains.gains_map, fold=gains.gains_fold)]
    whole = map_ranks(RankContext(run, options), entry).parts["gains"]
    plan = windows.plan(RankContext(run, options), events=1)
    assert len(plan) > 2
    folded = windows.map_windows(RankContext(run, options), entry, plan).parts["gains"]
    assert type(folded) is gains.GainParts
    assert bool(whole.launches.height and whole.host_free.height) is (gate != 1.0)
    for table in whole.names():
        assert_frame_equal(getattr(folded, table), getattr(whole, table), check_dtypes=True)
