"""Warm-up is not the steady state (issue 45): one-time work is its own ledger entry and finding,
never host-bound with advice about CPU work, and a trace that holds little else gets no bound.

Each run is built by hand with times in microseconds: a first kernel, then one-time work the GPU
waits on (a 400 ms first launch that loads the kernel's module, a 2 s first ``cudaMalloc`` that
creates the CUDA context, 300 ms of CUDA graph recording), then a little steady work."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.reports.sentences import write_analysis
from tracekit.results.analysis import Analysis
from tracekit.results.vocab import BoundKind, LedgerEntry, NoteKind

US = 1000
Row = dict[str, Any]


def launch(start: float, correlation: int, *, dur: float = 5) -> Row:
    return ev("runtime", "cudaLaunchKernel", int(start * US), int((start + dur) * US), correlation=correlation)


def kernel(name: str, start: float, end: float, correlation: int) -> Row:
    return ev("kernel", name, int(start * US), int(end * US), correlation=correlation)


def op(name: str, start: float, end: float) -> Row:
    return ev("cpu_op", name, int(start * US), int(end * US))


def steady(first: float, n: int, *, correlation: int = 100) -> list[Row]:
    """``n`` kernels of 1 ms each launched just ahead of the GPU, back to back from ``first``."""
    rows = []
    for i in range(n):
        t = first + 1000 * i
        rows += [
            op("aten::mm", t - 20, t - 5),
            launch(t - 15, correlation + i),
            kernel("gemm", t, t + 1000, correlation + i),
        ]
    return rows


def first_launch_of_400_ms() -> list[Row]:
    # k0, then the first launch of "gemm" holds the host 400 ms (lazy module loading)
    return [
        op("aten::relu", 0, 10),
        launch(1, 1),
        kernel("k0", 6, 10, 1),
        op("aten::mm", 20, 400_030),
        launch(25, 2, dur=400_000),
        kernel("gemm", 400_030, 401_030, 2),
        *steady(401_050, 4),
    ]


def first_malloc_of_2_s() -> list[Row]:
    # the first allocation on the device creates the CUDA context inside cudaMalloc: 2 s
    return [
        op("aten::relu", 0, 10),
        launch(1, 1),
        kernel("k0", 6, 10, 1),
        op("aten::empty_strided", 20, 2_000_030),
        ev("runtime", "cudaMalloc", 25 * US, 2_000_025 * US),
        *steady(2_000_100, 4),
    ]


def graph_recording_of_300_ms() -> list[Row]:
    # torch.compile(mode="reduce-overhead") records the step into a CUDA graph: 300 ms on the host
    return [
        op("aten::relu", 0, 10),
        launch(1, 1),
        kernel("k0", 6, 10, 1),
        ev("annotation", "CUDAGraphNode.record", 20 * US, 300_020 * US),
        ev("runtime", "cudaStreamBeginCapture", 30 * US, 40 * US),
        ev("runtime", "cudaStreamEndCapture", 299_990 * US, 300_000 * US),
        *steady(300_100, 4),
    ]


CASES = {
    "first-launch": first_launch_of_400_ms,
    "first-malloc": first_malloc_of_2_s,
    "graph-record": graph_recording_of_300_ms,
}


@pytest.mark.parametrize("rows", CASES.values(), ids=CASES.keys())
def test_one_time_work_is_warm_up_not_host_bound(rows: Any) -> None:
    a: Analysis = analyze(make_run(rows()))
    assert a.ledger is not None
    run = {s.entry: s.share_pct for s in a.ledger.run}
    assert run[LedgerEntry.ONE_TIME] > 95  # the GPU waits on it: one-time work, its own entry
    verdict = a.verdict
    # most of the window is warm-up: no steady part, no bound, and it says so
    assert verdict.primary.bound is BoundKind.UNDETERMINED
    assert [f.note for f in verdict.secondary] == [NoteKind.WARMUP]
    named = [f.bound for f in (verdict.primary, *verdict.secondary)]
    assert BoundKind.HOST not in named
    assert not any(c.bound is BoundKind.HOST and c.share_pct > 5 for c in verdict.costs)
    words = write_analysis(a)
    assert "warm-up" in words.primary.title
    text = " ".join((*words.primary.recommendations, *(e for w in words.secondary for e in w.evidence)))
    assert "torch.profiler.schedule" in text
    assert "Move CPU preprocessing" not in text and "py-spy" not in text


def test_warm_up_beside_a_steady_part_is_a_note_and_the_rest_decides() -> None:
    # a 100 ms first launch, then 900 ms of kernels launched just in time: warm-up is 10% of the
    # window, the rest is the GPU computing: compute-bound, with the warm-up said
    rows = [
        op("aten::relu", 0, 10),
        launch(1, 1),
        kernel("k0", 6, 10, 1),
        op("aten::mm", 20, 100_030),
        launch(25, 2, dur=100_000),
        kernel("gemm", 100_030, 101_030, 2),
        *steady(101_050, 900),
    ]
    a = analyze(make_run(rows))
    verdict = a.verdict
    assert verdict.primary.bound is BoundKind.GPU_COMPUTE
    warm = [f for f in verdict.secondary if f.note is NoteKind.WARMUP]
    assert len(warm) == 1 and warm[0].value == pytest.approx(10.0, abs=0.5)
    assert verdict.evidence.warmup and verdict.evidence.warmup[0].name == "aten::mm"
