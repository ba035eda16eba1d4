"""Renderers on the same fixtures, including empty and CPU-only ones."""

from __future__ import annotations

import json

import msgspec
import pytest

from tests.analyzers.test_breakdown import one_step_run
from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.reports import TerminalRenderer, renderer
from tracekit.reports.sentences import evidence
from tracekit.results.analysis import Analysis, Finding
from tracekit.results.vocab import BoundKind, Confidence


def render_json(analysis: Analysis) -> str:
    return renderer("json").render(analysis)


FIXTURES = {
    "gpu": lambda: analyze(make_run(one_step_run())),
    "cpu_only": lambda: analyze(make_run([ev("step", "ProfilerStep#1", 0, 10), ev("annotation", "fwd", 1, 5)])),
    "empty": lambda: analyze(make_run([])),
}


@pytest.fixture(params=sorted(FIXTURES))
def analysis(request: pytest.FixtureRequest) -> Analysis:
    return FIXTURES[request.param]()


def test_terminal_renders_every_section_or_says_why(analysis: Analysis) -> None:
    text = TerminalRenderer(top=5).render(analysis)
    assert text.startswith("tracekit verdict")
    assert "tracekit analysis" in text
    for marker in (
        "ranks:",
        "Step time per rank",
        "No steps found" if not analysis.steps.per_step else "mean",
        "GPU time breakdown per rank" if analysis.run.has_gpu else "no GPU activity in these traces",
    ):
        assert marker in text
    if not analysis.run.has_gpu:  # a CPU-only run leaves its empty GPU sections out
        assert "GPU time breakdown per rank" not in text
        assert "GPU kernels" not in text


def test_json_is_stable_and_complete(analysis: Analysis) -> None:
    text = render_json(analysis)
    assert text == render_json(analysis)
    doc = json.loads(text)
    assert list(doc)[:8] == [
        "schema",
        "schema_version",
        "tracekit_version",
        "verdict",
        "run",
        "analysis_seconds",
        "capture",
        "steps",
    ]
    assert {"collectives", "stragglers", "dataloader", "host_syncs", "idle_causes", "host_breakdown"} <= set(doc)


def test_hostile_names_render_as_text() -> None:
    rows = [*one_step_run(), ev("kernel", "<script>alert(1)</script>[bold]x[/bold]", 91, 92)]
    text = TerminalRenderer(top=10).render(analyze(make_run(rows)))
    assert "<script>alert(1)</script>[bold]x[/bold]" in text


def test_many_ranks_show_the_worst_and_point_to_json() -> None:
    rows = [{**r, "rank": rank} for rank in range(20) for r in one_step_run()]
    text = TerminalRenderer(top=3).render(analyze(make_run(rows)))
    assert "16 of 20 ranks shown" in text
    assert "ranks: 20 (0-19)" in text


def test_a_mixed_verdict_names_no_rank_it_does_not_have() -> None:
    mixed = Finding(
        bound=BoundKind.MIXED,
        share_pct=30.7,
        confidence=Confidence.LOW,
        margin=1.2,
        components=[BoundKind.LAUNCH, BoundKind.STRAGGLER],
    )
    ranked = msgspec.structs.replace(mixed, worst_rank=3, max_rank_share_pct=41.0)
    verdict = analyze(make_run(one_step_run())).verdict
    assert "rank None" not in " ".join(evidence(mixed, verdict))
    assert "(most on rank 3: 41.0%)" in " ".join(evidence(ranked, verdict))


def test_the_idle_table_says_what_unobservable_means() -> None:
    # the first kernel has no launch in the trace and starts before its first runtime call
    rows = [
        ev("step", "ProfilerStep#1", 0, 500_000),
        ev("kernel", "k0", 300_000, 310_000, correlation=90),
        ev("runtime", "cudaLaunchKernel", 320_000, 322_000, correlation=2),
        ev("kernel", "k2", 325_000, 330_000, correlation=2),
    ]
    text = renderer("md").render(analyze(make_run(rows)))
    assert "unobservable" in text
    assert "launched before the profiler started" in text
    assert "launched before the profiler started" not in renderer("md").render(analyze(make_run(one_step_run())))


def test_a_mixed_verdict_says_why_neither_is_named() -> None:
    from tracekit.reports.sentences import evidence, title
    from tracekit.results.analysis import Evidence, Finding, Verdict
    from tracekit.results.vocab import BoundKind, Confidence, MeasuredOn

    def verdict(*parts: BoundKind) -> tuple[Finding, Verdict]:
        mixed = Finding(
            bound=BoundKind.MIXED, share_pct=12.0, confidence=Confidence.LOW, margin=1.5, components=list(parts)
        )
        return mixed, Verdict(
            measured_on=MeasuredOn.GPU, primary=mixed, secondary=[], costs=[], evidence=Evidence(steps_per_rank=3)
        )

    close, v = verdict(BoundKind.COMMS, BoundKind.DATA)
    assert title(close, v) == "Mixed: Comms-bound and Data-bound, which these steps do not tell apart"
    assert any("step-to-step variation" in line for line in evidence(close, v))
    idle, v = verdict(BoundKind.LAUNCH, BoundKind.IDLE)  # a title with no "X-bound:" is named short
    assert title(idle, v) == "Mixed: Launch-bound and GPU idle (unexplained), which these steps do not tell apart"
    small, v = verdict(BoundKind.IDLE, BoundKind.GPU_COMPUTE)
    assert title(small, v).startswith("Mixed: no bound dominates")
    assert any("no bound dominates" in line for line in evidence(small, v))
