"""The report of ``tracekit doctor``: the measured fix against its prediction, every stage."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import msgspec

from tests.reports.test_tool_reports import probe
from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.results.doctor import (
    Agreement,
    Baseline,
    CodeChange,
    Doctor,
    DoctorStage,
    Knob,
    SkipReason,
    StageRun,
    StageStatus,
    Trial,
    TrialMeasure,
)
from tracekit.results.vocab import BoundKind, Change, SyncKind

SAMPLES = Path(__file__).parents[2] / "samples" / "captures"


@cache
def doctor() -> Doctor:
    """A finished doctor run: a baseline, the probe, a knob measured, one failed, one skipped, a code change."""
    analysis = analyze(load_run([SAMPLES / "data_bound"]))
    verdict = analysis.verdict
    gain = verdict.primary.gain
    baseline = Baseline(
        folder="baseline", seconds=12.0, step_mean_ns=179e6, samples_per_s=180.0, device="cpu", verdict=verdict
    )

    def stage(key: str, status: StageStatus = StageStatus.OK, **kw: object) -> StageRun:
        which = DoctorStage(key) if key in ("capture", "loader", "audit") else DoctorStage.TRIAL
        return StageRun(stage=which, key=key, status=status, seconds=10.0, **kw)  # type: ignore[arg-type]

    measured = TrialMeasure(
        key="step", a=177e6, b=80e6, gain_pct=54.8, low_pct=40.1, high_pct=69.5, change=Change.FASTER, n_a=6, n_b=6
    )
    trials = [
        Trial(
            knob=Knob.NUM_WORKERS,
            overrides={"num_workers": "2"},
            bound=BoundKind.DATA,
            predicted=gain,
            run=stage("num_workers=2", folder="trials/num_workers=2"),
            measured=measured,
            agreement=Agreement.MISSED,
            after=verdict.primary,
        ),
        Trial(
            knob=Knob.PIN_MEMORY,
            overrides={"pin_memory": "true"},
            bound=BoundKind.DATA,
            predicted=gain,
            run=stage("pin_memory=true", StageStatus.FAILED, reason="A/B capture stopped at side B: rank 0 failed"),
        ),
        Trial(
            knob=Knob.OPTIMIZER_IMPL,
            overrides={"optimizer_impl": "fused"},
            bound=BoundKind.COMPUTE,
            run=StageRun(
                stage=DoctorStage.TRIAL, key="optimizer_impl=fused", status=StageStatus.SKIPPED, skip=SkipReason.BUDGET
            ),
        ),
    ]
    return Doctor(
        tracekit_version="test",
        config={"workload": "mlp", "nproc": 2},
        repeats=2,
        max_trials=3,
        budget_s=600.0,
        stages=[stage("capture", folder="baseline"), stage("loader", folder="baseline.dataloader")],
        baseline=baseline,
        loader=probe(loader_sps=200.0),
        trials=trials,
        code_changes=[
            CodeChange(
                bound=BoundKind.SYNC, gain=gain, op="aten::item", kind=SyncKind.SYNC, per_step=2.0, phase="forward"
            )
        ],
        finished=True,
    )


def test_the_measured_fix_leads_with_its_prediction_beside_it() -> None:
    text = renderer("terminal").render(doctor())
    head = text.splitlines()[0]
    assert head.startswith("num_workers=2: the step is 54.8% shorter (177.00 -> 80.00 ms, 2.21x as fast, measured)")
    assert "predicted" in head


def test_every_trial_says_how_it_ended() -> None:
    md = renderer("md").render(doctor())
    assert "| num_workers=2 | data-bound |" in md and r"54.8% \[40.1%, 69.5%\] faster step" in md
    assert "not as predicted" in md
    assert "failed: A/B capture stopped at side B: rank 0 failed" in md
    assert "skipped: its estimate did not fit in what was left of --budget" in md
    assert "operator aten::item (sync), 2 per step per rank; in phase forward" in md
    assert "input-bound" in md or "not input-bound" in md  # the DataLoader's ceiling


def test_no_faster_knob_leads_with_the_verdict() -> None:
    d = doctor()
    slower = [msgspec.structs.replace(t, measured=None) for t in d.trials]
    text = renderer("terminal").render(msgspec.structs.replace(d, trials=slower))
    assert text.splitlines()[0].startswith("Data-bound")


def test_an_interrupted_run_says_resume() -> None:
    d = msgspec.structs.replace(doctor(), finished=False)
    assert "tracekit doctor --resume goes on from here" in renderer("md").render(d)


def test_the_stages_table_lists_every_trial_and_the_html_carries_no_plotly_without_a_chart() -> None:
    # issue 46, item 8: the doctor's HTML had no chart and 1.22 MB (plotly.js inlined), and its
    # Stages table stopped before the trials
    d = doctor()
    stages = next(t for s in renderer("md").render(d).split("### ") if s.startswith("Stages") for t in [s])
    for trial in d.trials:
        assert f"| trial {trial.run.key} |" in stages
    html = renderer("html").render(d)
    assert len(html) < 100_000 and "plotly.js v" not in html.lower()
    analysis = renderer("html").render(analyze(load_run([SAMPLES / "straggler"])))
    assert len(analysis) > 1_000_000  # a report with charts keeps its plotly.js
