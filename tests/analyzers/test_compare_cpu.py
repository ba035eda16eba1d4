"""CPU time per step, compared and gated (issue 46, item 1: a gate that is right on unchanged code).

On a 2-core machine with a process spinning beside 2 gloo ranks, the wall time of the same capture
swung from 12 to 35 ms a step between launches. ``cpu`` measures the CPU time each step used: the
work it does rather than its share of the cores (how well that holds on a loaded machine is
measured by benchmarks/compare_gate.py, not here: these tests check the measure and the gate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np
import pytest

from tests.analyzers.test_compare import _run
from tracekit.analyzers.compare import compare, evaluate_gate
from tracekit.analyzers.compare.gate import check_runs
from tracekit.analyzers.compare.measures import cpu_samples
from tracekit.capture.summary import PhaseRecord, StepRecord, summarize
from tracekit.errors import InputError
from tracekit.reports import renderer
from tracekit.results.vocab import Change, GateOutcome

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis
    from tracekit.results.capture import CaptureSummary


def _summary(cpu_ms: list[list[float]]) -> CaptureSummary:
    """A capture summary whose rank r measured steps of CPU time ``cpu_ms[r]``."""
    records = [
        PhaseRecord(
            rank=r,
            world_size=len(cpu_ms),
            steps=[
                StepRecord(step=i, step_ns=10_000_000, phases_ns={"forward": 10_000_000}, cpu_ns=int(c * 1e6))
                for i, c in enumerate(steps)
            ],
        )
        for r, steps in enumerate(cpu_ms)
    ]
    return summarize(records)


def _with_cpu(run: Analysis, cpu_ms: list[list[float]]) -> Analysis:
    return msgspec.structs.replace(run, capture=_summary(cpu_ms))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> list[Analysis]:
    tmp = tmp_path_factory.mktemp("cpu")
    return [_run(tmp, f"r{i}", seed=40 + i) for i in range(6)]


def _jittered(mean_ms: float, seed: int, n: int = 20) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(mean_ms + rng.uniform(-0.1, 0.1, n)) for _ in range(2)]


def test_the_samples_are_the_mean_over_ranks_of_each_step(base: list[Analysis]) -> None:
    summary = _summary([[4.0, 6.0, 8.0], [6.0, 8.0, 10.0, 12.0]])  # rank 1 measured one more: cut to 3
    run = msgspec.structs.replace(base[0], capture=summary)
    samples = cpu_samples(run)
    assert samples is not None and samples.tolist() == [5e6, 7e6, 9e6]
    assert summary.per_rank[0].step_cpu_ns == [4_000_000, 6_000_000, 8_000_000]
    assert cpu_samples(base[0]) is None  # no capture beside the traces


def test_twenty_percent_more_cpu_is_slower_and_fails_the_gate(base: list[Analysis]) -> None:
    a = [_with_cpu(r, _jittered(10.0, i)) for i, r in enumerate(base[:3])]
    b = [_with_cpu(r, _jittered(12.0, 10 + i)) for i, r in enumerate(base[3:])]
    c = compare(a, b)
    m = next(m for m in c.measures if m.key == "cpu")
    assert m.change is Change.SLOWER and m.delta == pytest.approx(2e6, abs=0.1e6)
    assert m.delta_pct == pytest.approx(20.0, abs=1.0)
    [gate] = evaluate_gate(c, ["cpu:5%"]).gate
    assert gate.failed and gate.outcome is GateOutcome.REGRESSED
    for fmt in ("terminal", "md", "html"):
        assert "CPU time per step" in renderer(fmt).render(c), fmt


def test_the_same_cpu_passes_the_gate(base: list[Analysis]) -> None:
    a = [_with_cpu(r, _jittered(10.0, i)) for i, r in enumerate(base[:3])]
    b = [_with_cpu(r, _jittered(10.0, 10 + i)) for i, r in enumerate(base[3:])]
    [gate] = evaluate_gate(compare(a, b), ["cpu:5%"]).gate
    assert not gate.failed


def test_without_capture_cpu_there_is_no_measure_and_the_gate_says_so(base: list[Analysis]) -> None:
    plain = compare(base[:3], base[3:])
    assert all(m.key != "cpu" for m in plain.measures)
    with pytest.raises(InputError, match="cpu is not measured on both runs"):
        evaluate_gate(plain, ["cpu:5%"])
    # one side captured before 1.7: named as measured on one side
    half = compare([_with_cpu(r, _jittered(10.0, i)) for i, r in enumerate(base[:3])], base[3:])
    m = next(m for m in half.measures if m.key == "cpu")
    assert m.change is Change.NOT_MEASURED and m.a is not None and m.b is None


def test_the_other_measures_do_not_move_when_cpu_is_added(base: list[Analysis]) -> None:
    """CPU is drawn from the bootstrap's generator last: every other interval is what it was."""
    plain = compare(base[:3], base[3:])
    with_cpu = compare(
        [_with_cpu(r, _jittered(10.0, i)) for i, r in enumerate(base[:3])],
        [_with_cpu(r, _jittered(10.0, 10 + i)) for i, r in enumerate(base[3:])],
    )
    assert with_cpu.step == plain.step and with_cpu.phases == plain.phases
    assert [m for m in with_cpu.measures if m.key != "cpu"] == plain.measures


def test_a_cpu_gate_needs_three_runs_a_side() -> None:
    with pytest.raises(InputError, match="needs run-to-run variation"):
        check_runs(["cpu:5%"], 1, 1)
    check_runs(["cpu:5%"], 3, 3)
