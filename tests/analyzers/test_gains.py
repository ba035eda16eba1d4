"""What a fix is worth, on real traces: every finding carries its gain, and the re-timed gains
agree with what the raw events and the injected bottlenecks say."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, analysis_of, case_paths
from tests.truth.corpus import CASES, Case
from tracekit.analyzers import gains as g
from tracekit.analyzers.gains_plan import GainRun
from tracekit.analyzers.retime import Scenario, simulate
from tracekit.results.vocab import BoundKind
from tracekit.results.worth import GainLimit

pytestmark = pytest.mark.real

CAPTURES = SAMPLES / "captures"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_finding_carries_its_gain(case: Case, request: pytest.FixtureRequest) -> None:
    verdict = analysis_of(case_paths(case, request)).analysis.verdict
    if verdict.primary.bound is BoundKind.UNDETERMINED:
        assert verdict.gains == []
        return
    by_bound = {x.bound: x for x in verdict.gains}
    findings = [verdict.primary, *verdict.secondary]
    for f in findings:
        if f.bound is BoundKind.MIXED:
            assert all(c in by_bound for c in f.components), f
        elif f.bound in (BoundKind.COMPUTE, BoundKind.GPU_COMPUTE):  # worth: every waste removed at once
            assert f.gain is not None and f.gain.bound is f.bound, f
            wastes = sum(c.share_pct for c in verdict.costs if c.bound is not f.bound)
            assert f.gain.share_pct == pytest.approx(wastes, abs=1e-3)
        elif f.bound is not None:
            assert f.gain is not None and f.gain.bound is f.bound, f
            assert f.gain.share_pct == pytest.approx(f.share_pct)  # the ledger's share: one number
    for x in verdict.gains:
        assert x.step_ns > 0 and 0 <= x.share_pct <= 100
        assert x.limits, x
        if x.gain_pct is None:  # not re-timed: no what-if (or ranks absent), or a waste too small to be a finding
            assert x.limits in ([GainLimit.NOT_MODELED], [GainLimit.BELOW_FINDING], [GainLimit.PARTIAL_RANKS])
            assert x.limits != [GainLimit.BELOW_FINDING] or x.share_pct < 5
        else:
            assert 0 <= x.gain_pct <= 100


def _plans(paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The re-timing plans of a fresh analysis of ``paths``."""
    from tracekit.analyzers import run_analysis
    from tracekit.readers import load_run

    seen: list[object] = []
    real = g.plans

    def spy(red: object, parts: object) -> GainRun | None:
        run = real(red, parts)  # type: ignore[arg-type]
        seen.extend(run.plans if run is not None else [])
        return run

    monkeypatch.setattr(g, "plans", spy)
    run_analysis(load_run(paths, use_cache=False))
    return seen


@pytest.mark.parametrize(
    "sample", ["cuda-h200-small", "cuda-h200-gloo2-straggler", "cuda-h200-data-bound-pinned", "straggler"]
)
def test_the_model_explains_each_trace_before_it_predicts(sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # nothing removed: every rank ends when it did (launches, streams, dependencies, syncs and
    # collectives across ranks reproduce the trace's own times)
    plans = _plans([CAPTURES / sample], monkeypatch)
    assert plans
    gains = simulate(plans, Scenario())  # type: ignore[arg-type]
    assert all(abs(v) < 1_000 for v in gains.values()), gains  # under 1 us


def _steps_ns(trace: Path) -> list[float]:
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    return [1e3 * e["dur"] for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]


def test_removing_an_injected_straggler_gives_back_its_delay() -> None:
    # rank 1 sleeps 30 ms in its forward every step (capture_config.json); the other rank waits for it
    # at the gradient all-reduce: without the sleep both ranks' steps are 30 ms shorter
    folder = CAPTURES / "cuda-h200-gloo2-straggler"
    delay_ns = 1e6 * json.loads((folder / "capture_config.json").read_text())["workload_args"]["straggler_delay_ms"]
    verdict = analysis_of([folder]).analysis.verdict
    gain = verdict.primary.gain
    assert verdict.primary.bound is BoundKind.STRAGGLER and gain is not None and gain.gain_pct is not None
    steps = _steps_ns(folder / "rank0.pt.trace.json.gz")
    step = sum(steps[-3:]) / 3  # the measured (active) steps
    assert gain.step_ns == pytest.approx(step, rel=0.03)
    saved = gain.step_ns * gain.gain_pct / 100
    assert saved == pytest.approx(delay_ns, rel=0.05)


def test_a_last_rank_with_others_close_behind_gains_only_the_gap_to_the_next(
    shared_traces: Path,
) -> None:
    # PARAM DLRM, 8 V100 ranks, one step: rank 7 arrives last at the collectives, but ranks 2 and 6
    # arrive about 0.5 ms before it; removing rank 7's lateness alone lets the collectives start when
    # the next-latest rank arrives: a gain of that gap, not of the ledger's straggler share
    folder = shared_traces / "kineto" / "param-dlrm-8rank-v100"
    first = {}
    for trace in sorted(folder.glob("*.json")):
        doc = json.loads(trace.read_text())
        kernels = [
            e
            for e in doc["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower()
        ]
        first[doc["distributedInfo"]["rank"]] = 1e3 * min(e["ts"] for e in kernels)
    others = sorted(v for r, v in first.items() if r != 7)
    gap = first[7] - others[-1]
    assert first[7] > others[-1]
    verdict = analysis_of([folder]).analysis.verdict
    straggler = next(x for x in verdict.gains if x.bound is BoundKind.STRAGGLER)
    assert straggler.gain_pct is not None
    saved = straggler.step_ns * straggler.gain_pct / 100
    assert saved == pytest.approx(gap, abs=150_000)  # 0.15 ms: the later collectives' own gaps differ
    assert straggler.gain_pct < straggler.share_pct / 5


def test_a_runs_what_ifs_work_each_ranks_shape_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict's gains, then their explanation, re-time the same ranks: each rank's shape
    (streams, delays, dependencies, blocks) is worked out once for both calls."""
    from tracekit.analyzers import retime, retime_shape, run_analysis
    from tracekit.readers import load_run

    built: list[int] = []
    calls: list[int] = []
    shape, each = retime_shape.RankShape.__init__, retime.simulate_each

    def counted_shape(self: retime_shape.RankShape, plan: retime.RankPlan) -> None:
        built.append(plan.rank)
        shape(self, plan)

    def counted_call(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return each(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(retime_shape.RankShape, "__init__", counted_shape)
    monkeypatch.setattr(retime, "simulate_each", counted_call)
    outcome = run_analysis(load_run([SAMPLES / "captures" / "straggler"], use_cache=False))
    ranks = [r.rank for r in outcome.analysis.run.ranks]
    assert len(calls) >= 2  # the gains and their explanation
    assert sorted(built) == sorted(ranks)


def test_a_kernel_launched_as_a_graph_starts_a_graph_gap_after_the_last() -> None:
    """The launch what-if: kernels launched inside the removed dispatch start GRAPH_GAP_NS after
    their stream's last, not their launch latency after their launch; a kernel queued behind its
    stream, a collective, one launched outside the dispatch and a wait beyond the switch time
    keep theirs (worked by hand: 1 us kernels, 9 us latencies)."""
    from types import SimpleNamespace

    import numpy as np

    from tests.analyzers.test_retime import plan
    from tracekit.analyzers.gains_scenarios import GRAPH_GAP_NS, _graph_launched
    from tracekit.analyzers.retime_plan import Removal

    tasks = [
        (0.0, 9_000.0, 10_000.0),  # launched at 0, started 9 us later: cut to 1 us
        (10_500.0, 19_500.0, 20_500.0),  # the same after the first: cut
        (15_000.0, 21_000.0, 22_000.0),  # queued: launched before its predecessor ended
        (30_000.0, 39_000.0, 40_000.0),  # a collective: kept
        (60_000.0, 69_000.0, 70_000.0),  # launched outside the removed dispatch: kept
        (80_000.0, 110_000.0, 111_000.0),  # 30 us after its launch: a wait, kept
    ]
    p = plan(tasks=tasks, instances=[-1, -1, -1, 0, -1, -1])
    removal = Removal(start=np.array([0.0, 75_000.0]), end=np.array([50_000.0, 90_000.0]), rate=np.ones(2))
    run = SimpleNamespace(plans=[p])
    durations = _graph_launched(run, {0: removal})  # type: ignore[arg-type]
    cut = 1_000.0 - (9_000.0 - GRAPH_GAP_NS)
    assert durations[0].index.tolist() == [0, 1]  # the others keep theirs
    assert durations[0].value.tolist() == [cut, cut]
