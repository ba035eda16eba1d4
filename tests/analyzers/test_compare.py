"""Comparing two runs: differences worked out by hand on synthetic traces, the noise model, the gate."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, cast

import msgspec
import numpy as np
import pytest

from tests.factories import kineto_event, write_kineto
from tracekit.analyzers.compare import Noise, compare, evaluate_gate, parse_gate
from tracekit.analyzers.compare.noise import (
    Samples,
    _replicates,
    block_indices,
    block_means,
    row_means,
    row_medians,
)
from tracekit.errors import InputError
from tracekit.pipeline import analyze_paths
from tracekit.reports import compare_text as ct
from tracekit.results.compare import RunDifference
from tracekit.results.rows import CostRow
from tracekit.results.vocab import BoundKind, Change, GateOutcome, NoiseMethod, SyncMeasure, WarningKind, WorkKind

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis

US = 1000  # ns per us


def _steps(
    rank: int,
    *,
    steps: int = 20,
    forward_us: float = 4000,
    backward_us: float = 5000,
    jitter_us: float = 200,
    seed: int = 0,
    item: bool = False,
    extra_op: bool = False,
) -> list[dict[str, Any]]:
    """A CPU-only training thread: ProfilerStep#k holding forward and backward phases, each with an op."""
    rng = random.Random(seed * 1000 + rank)
    out: list[dict[str, Any]] = []
    t = 1_000_000.0
    for k in range(steps):
        fwd = forward_us + rng.uniform(-jitter_us, jitter_us)
        bwd = backward_us + rng.uniform(-jitter_us, jitter_us)
        step = fwd + bwd + 100
        out.append(kineto_event("user_annotation", f"ProfilerStep#{k}", t, step))
        out.append(kineto_event("user_annotation", "tracekit.phase/forward", t + 10, fwd))
        out.append(kineto_event("cpu_op", "aten::linear", t + 20, fwd - 200))
        if item:
            out.append(kineto_event("cpu_op", "aten::is_nonzero", t + fwd - 150, 40))
            out.append(kineto_event("cpu_op", "aten::item", t + fwd - 140, 20))
            out.append(kineto_event("cpu_op", "aten::_local_scalar_dense", t + fwd - 135, 10))
        if extra_op:
            out.append(kineto_event("cpu_op", "aten::amax", t + fwd - 100, 30))
            out.append(kineto_event("cpu_op", "aten::amax", t + fwd - 60, 30))
        out.append(kineto_event("user_annotation", "tracekit.phase/backward", t + 20 + fwd, bwd))
        out.append(kineto_event("cpu_op", "aten::mm", t + 30 + fwd, bwd - 100))
        t += step + 50
    return out


def _run(tmp: Path, name: str, ranks: int = 2, **kw: Any) -> Analysis:
    folder = tmp / name
    folder.mkdir()
    for rank in range(ranks):
        write_kineto(
            folder / f"rank{rank}.pt.trace.json", _steps(rank, **kw), rank=rank, world_size=ranks, backend="gloo"
        )
    return analyze_paths([folder]).analysis


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    tmp = tmp_path_factory.mktemp("compare")
    return {
        "a": _run(tmp, "a", seed=1),
        "a2": _run(tmp, "a2", seed=2),
        "slow": _run(tmp, "slow", seed=3, forward_us=9000),
        "sync": _run(tmp, "sync", seed=4, item=True, extra_op=True),
        "four": _run(tmp, "four", ranks=4, seed=5),
    }


def test_a_5_ms_slower_forward_is_slower_by_5_ms_within_its_interval(runs: dict[str, Analysis]) -> None:
    c = compare([runs["a"]], [runs["slow"]])
    step = c.step
    assert step.change is Change.SLOWER
    assert step.delta is not None and step.ci is not None
    assert step.delta == pytest.approx(5e6, abs=0.2e6)
    assert step.ci.low <= 5e6 <= step.ci.high
    assert step.ci.high - step.ci.low < 0.5e6  # 20 steps of +-0.2 ms jitter: a narrow interval
    forward = next(m for m in c.phases if m.key == "phase:tracekit.phase/forward")
    assert forward.change is Change.SLOWER
    assert forward.delta == pytest.approx(5e6, abs=0.2e6)
    # as a share of A's step (about 9.1 ms): about 55%
    assert forward.step_pct == pytest.approx(100 * forward.delta / step.a, rel=1e-3)
    backward = next(m for m in c.phases if m.key == "phase:tracekit.phase/backward")
    assert backward.change is Change.WITHIN_NOISE
    throughput = next(m for m in c.measures if m.key == "throughput")
    assert throughput.change is Change.SLOWER  # fewer steps per second
    assert throughput.b is not None and throughput.a is not None and throughput.b < throughput.a
    assert [m.rank for m in c.per_rank] == [0, 1]
    assert all(m.change is Change.SLOWER for m in c.per_rank)


def test_two_runs_of_the_same_program_are_within_noise(runs: dict[str, Analysis]) -> None:
    c = compare([runs["a"]], [runs["a2"]])
    assert c.step.change is Change.WITHIN_NOISE
    assert c.step.ci is not None and c.step.ci.low <= 0 <= c.step.ci.high
    assert c.step.detectable is not None and c.step.detectable > 0
    assert all(m.change is Change.WITHIN_NOISE for m in c.phases)
    assert c.warnings == []


def test_an_identical_run_differs_by_nothing(runs: dict[str, Analysis]) -> None:
    c = compare([runs["a"]], [runs["a"]])
    assert c.step.delta == 0
    assert c.step.change is Change.WITHIN_NOISE
    assert all(w.change is Change.SAME for w in c.work)


def test_the_comparison_is_deterministic(runs: dict[str, Analysis]) -> None:
    assert compare([runs["a"]], [runs["slow"]]) == compare([runs["a"]], [runs["slow"]])


def test_cost_rows_that_tie_come_in_the_vocabulary_order(runs: dict[str, Analysis]) -> None:
    """Bounds of equal share (0 on both sides, typically) are ordered by the BoundKind enum, not
    by a set's hash order (which changed from run to run)."""
    kinds = [k for k in BoundKind if k not in (BoundKind.MIXED, BoundKind.UNDETERMINED)]
    rows = [CostRow(bound=k, share_pct=0.0, max_rank_share_pct=0.0, worst_rank=None) for k in reversed(kinds)]
    rows[3] = msgspec.structs.replace(rows[3], share_pct=40.0)
    a = runs["a"]
    tied = msgspec.structs.replace(a, verdict=msgspec.structs.replace(a.verdict, costs=rows))
    costs = compare([tied], [tied]).verdicts.costs
    first = rows[3].bound
    assert [c.bound for c in costs] == [first.value, *(k.value for k in kinds if k is not first)]


def test_a_per_step_host_read_in_forward_is_found_in_b_only(runs: dict[str, Analysis]) -> None:
    c = compare([runs["a"]], [runs["sync"]])
    assert c.syncs.a_per_step == 0
    assert c.syncs.b_per_step == 1
    assert c.syncs.measure is SyncMeasure.HOST_READS
    [source] = c.syncs.sources
    assert source.name == "aten::is_nonzero"  # the outermost op: bool(tensor)
    assert source.phase == "tracekit.phase/forward"
    assert source.a_count is None and source.b_count == 1
    assert source.change is Change.APPEARED
    amax = next(w for w in c.work if w.name == "aten::amax")
    assert amax.kind is WorkKind.HOST_OP and amax.change is Change.APPEARED
    assert amax.b_count == 2  # two per step
    assert amax.b_ns == pytest.approx(60 * US)
    # the other way round: B does no sync at all
    back = compare([runs["sync"]], [runs["a"]])
    assert back.syncs.b_per_step == 0
    assert back.syncs.sources[0].change is Change.DISAPPEARED


def test_runs_that_differ_in_world_size_are_compared_with_a_warning(runs: dict[str, Analysis]) -> None:
    c = compare([runs["a"]], [runs["four"]])
    assert c.warnings == [
        RunDifference(kind=WarningKind.WORLD_SIZE, a=2, b=4),
        RunDifference(kind=WarningKind.RANKS, a_items=[0, 1], b_items=[0, 1, 2, 3]),
    ]
    assert ct.warnings(c) == [
        "world size differs: A 2, B 4",
        "ranks present differ: A 0,1, B 0,1,2,3; per-rank rows only for common ranks",
    ]
    assert [m.rank for m in c.per_rank] == [0, 1]  # only the common ranks


def test_repeats_pool_runs_and_widen_the_interval(runs: dict[str, Analysis]) -> None:
    one = compare([runs["a"]], [runs["slow"]])
    two = compare([runs["a"], runs["a2"]], [runs["slow"], runs["slow"]])
    assert two.a.runs == 2
    assert one.noise.method is NoiseMethod.STEPS
    assert two.noise.method is NoiseMethod.RUNS_THEN_STEPS
    assert "runs resampled first" in ct.noise_line(two)
    assert two.step.change is Change.SLOWER
    assert two.step.n_a == 2 * one.step.n_a


def test_block_bootstrap_indices_stay_in_range_and_keep_blocks() -> None:
    rng = np.random.default_rng(0)
    idx = block_indices(27, 100, rng)
    assert idx.shape == (100, 27)
    assert idx.min() >= 0 and idx.max() <= 26
    # blocks of 3 consecutive steps: positions 0,1,2 of a row are consecutive
    assert np.all(idx[:, 1] == idx[:, 0] + 1) and np.all(idx[:, 2] == idx[:, 0] + 2)
    assert block_indices(1, 5, rng).tolist() == [[0]] * 5


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 26, 27, 28, 64, 125])
def test_block_means_are_the_means_of_the_block_samples(n: int) -> None:
    # the same draws as block_indices, each sample summed from its blocks: the last block cut
    # at n (27 steps: 9 blocks of 3; 26: the ninth block holds 2), values of real magnitude
    x = np.random.default_rng(n).normal(2e6, 3e4, n)
    gathered = row_means(x[block_indices(n, 300, np.random.default_rng(7))])
    summed = block_means(x, 300, np.random.default_rng(7))
    assert summed.shape == (300,)
    np.testing.assert_allclose(summed, gathered, rtol=1e-12)


@pytest.mark.parametrize("stat", [row_means, row_medians])
def test_repeats_are_resampled_runs_first_then_blocks_of_steps(stat: Any) -> None:
    # three runs of one length, each constant: a resample is the runs it picked (with replacement),
    # whatever blocks of steps it drew, so each replicate is the statistic of three picked constants
    # (vectorized at once: the loop over 2000 resamples took 40 s for a 3-a-side comparison)
    runs = [np.full(20, v) for v in (10.0, 20.0, 60.0)]
    out = _replicates(Samples(runs), stat, 2000, np.random.default_rng(3))
    picks = [sorted((a, b, c)) for a in (10.0, 20.0, 60.0) for b in (10.0, 20.0, 60.0) for c in (10.0, 20.0, 60.0)]
    possible = {float(np.mean(p)) if stat is row_means else float(p[1]) for p in picks}
    assert out.shape == (2000,) and set(out.tolist()) <= possible
    if stat is row_means:
        assert abs(out.mean() - 30.0) < 1.0  # the runs' mean, each run picked alike
    # runs of several lengths take the same path one resample at a time
    uneven = _replicates(Samples([np.full(20, 10.0), np.full(21, 20.0)]), stat, 200, np.random.default_rng(3))
    assert set(uneven.tolist()) <= {10.0, 20.0, 15.0, 10.0 + 10.0 * 21 / 41, 10.0 + 10.0 * 20 / 41}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 26, 27])
def test_row_medians_are_numpys_medians(n: int) -> None:
    rng = np.random.default_rng(n)
    for m in (rng.normal(2e6, 3e4, (50, n)), rng.integers(0, 5, (50, n)).astype(float)):  # ties too
        assert row_medians(m).tolist() == np.median(m, axis=1).tolist()


def test_the_noise_threshold_keeps_a_tiny_significant_change_within_noise(runs: dict[str, Analysis]) -> None:
    strict = compare([runs["a"]], [runs["slow"]], noise=Noise(threshold_pct=80.0))
    assert strict.step.change is Change.WITHIN_NOISE  # +55% is below an 80% allowance
    assert strict.noise.threshold_pct == 80.0


@pytest.mark.parametrize(
    ("spec", "key", "pct", "amount"),
    [
        ("slower:1%", "step", 1.0, None),
        ("slower:0.5ms", "step", None, 0.5e6),
        ("slower:2", "step", None, 2e6),
        ("syncs:+0", "syncs", None, 0.0),
        ("memory:+512MiB", "peak_memory", None, 512 * 2**20),
        ("phase:forward:3%", "phase:forward", 3.0, None),
        ("phase:aten::to:10us", "phase:aten::to", None, 10e3),
        ("throughput:2%", "throughput", 2.0, None),
    ],
)
def test_gate_specs_parse(spec: str, key: str, pct: float | None, amount: float | None) -> None:
    parsed = parse_gate(spec)
    assert (parsed.key, parsed.pct, parsed.amount) == (key, pct, amount)


@pytest.mark.parametrize("spec", ["slower", "faster:1%", "slower:-1%", "slower:abc", "phase::1%", "syncs:1ms", ":1%"])
def test_bad_gate_specs_are_input_errors(spec: str) -> None:
    with pytest.raises(InputError, match="--fail-if"):
        parse_gate(spec)


def test_the_gate_fails_a_real_regression_and_passes_noise(runs: dict[str, Analysis]) -> None:
    slower = evaluate_gate(compare([runs["a"]], [runs["slow"]]), ["slower:1%", "slower:6ms", "phase:forward:1ms"])
    assert [g.failed for g in slower.gate] == [True, False, True]
    assert [g.outcome for g in slower.gate] == [GateOutcome.REGRESSED, GateOutcome.WITHIN_LIMIT, GateOutcome.REGRESSED]
    first = slower.gate[0]
    assert (first.limit_pct, first.delta) == (1.0, slower.step.delta)
    assert first.limit == pytest.approx(slower.step.a * 0.01, abs=1e-3)
    assert slower.gate[1].limit == 6e6 and slower.gate[1].limit_pct is None
    assert ct.gate_message(first).startswith("regressed: step time +")
    assert "beyond the limit 1%" in ct.gate_message(first)
    assert ct.gate_message(slower.gate[1]).endswith(", limit 6 ms")
    noise = evaluate_gate(compare([runs["a"]], [runs["a2"]]), ["slower:0%", "syncs:+0"])
    assert [g.failed for g in noise.gate] == [False, False]
    assert [g.outcome for g in noise.gate] == [GateOutcome.WITHIN_NOISE, GateOutcome.NO_REGRESSION]
    assert ct.gate_message(noise.gate[0]).startswith("within noise")
    faster = evaluate_gate(compare([runs["slow"]], [runs["a"]]), ["slower:1%", "throughput:1%"])
    assert [g.failed for g in faster.gate] == [False, False]


def test_the_gate_fails_on_one_sync_per_step(runs: dict[str, Analysis]) -> None:
    c = evaluate_gate(compare([runs["a"]], [runs["sync"]]), ["syncs:+0", "syncs:+1"])
    assert [g.failed for g in c.gate] == [True, False]
    assert "syncs per step +1" in ct.gate_message(c.gate[0])


def test_a_gate_on_what_is_not_measured_is_bad_input(runs: dict[str, Analysis]) -> None:
    with pytest.raises(InputError, match="memory is not measured on both runs"):
        evaluate_gate(compare([runs["a"]], [runs["a2"]]), ["memory:+0"])
    with pytest.raises(InputError, match=r"nope is not measured on both runs \(phases: backward, forward"):
        evaluate_gate(compare([runs["a"]], [runs["a2"]]), ["phase:nope:1%"])


def test_steps_without_a_number_are_keyed_by_their_place_on_their_rank() -> None:
    """Rank 1's steps come first in the rows but are keyed on their own rank; a numbered step
    keeps its number; ties in start keep their row order."""
    from types import SimpleNamespace

    from tracekit.analyzers.compare.samples import per_step, steps_frame

    def row(rank: int, step: int | None, start: int, duration: int) -> SimpleNamespace:
        return SimpleNamespace(rank=rank, step=step, start_ns=start, duration_ns=duration)

    rows = [row(1, None, 300, 10), row(0, None, 200, 40), row(1, None, 100, 30), row(0, None, 50, 20), row(0, 7, 50, 5)]
    steps = steps_frame(cast("Analysis", SimpleNamespace(steps=SimpleNamespace(per_step=rows))))
    assert steps.key.tolist() == [1, 2, 0, 0, 7]  # rank 0: 50 (row 3) -> 0, 50 (row 4) numbered 7, 200 -> 2
    # per key, in key order: key 0 = mean of rank 0's 20 and rank 1's 30; max likewise
    assert per_step(steps).tolist() == [25.0, 10.0, 40.0, 5.0]
    assert per_step(steps, "max").tolist() == [30.0, 10.0, 40.0, 5.0]
    assert steps.of_rank(0).duration_ns.tolist() == [40.0, 20.0, 5.0]


def test_comparing_saved_analyses_does_not_import_polars(tmp_path: Path) -> None:
    """``tracekit compare A.json B.json`` reads typed results and NumPy only: polars's import is
    a fifth of the command's time."""
    import subprocess
    import sys

    from tracekit.results.io import dump_analysis

    saved = []
    for name in ("a", "b"):
        analysis = _run(tmp_path, name)
        (tmp_path / f"{name}.json").write_text(dump_analysis(analysis))
        saved.append(str(tmp_path / f"{name}.json"))
    code = (
        "import sys; from tracekit.cli.main import main; sys.argv = ['tracekit', 'compare', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "sys.exit(3 if 'polars' in sys.modules else 0)"
    )
    out = tmp_path / "c.md"
    done = subprocess.run([sys.executable, "-c", code, *saved, "--md", str(out)], check=False, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert out.read_text().strip()


def test_a_saved_analysis_with_zero_length_steps_is_refused_not_divided_by(runs: dict[str, Analysis]) -> None:
    """An analysis written before zero-length step markers were left out (issue 47: numpy's
    'divide by zero' printed, a comparison made of it)."""
    base = runs["a"]
    zero = msgspec.structs.replace(
        base,
        steps=msgspec.structs.replace(
            base.steps, per_step=[msgspec.structs.replace(r, duration_ns=0) for r in base.steps.per_step]
        ),
    )
    n = len(base.steps.per_step)
    with pytest.raises(InputError, match=rf"^B: a run whose steps last 0 ns \({n} of {n} steps\)"):
        compare([base], [zero])
