"""Verdict rules on hand-made ledgers (worked out by hand), and on real traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import analysis_of
from tracekit.analyzers.collectives import CollectiveResult
from tracekit.analyzers.ledger import LedgerResult, reduce_ledger
from tracekit.analyzers.stragglers import StragglerResult
from tracekit.analyzers.verdict import MATERIAL_SHARE, decide, step_noise
from tracekit.results.analysis import Finding
from tracekit.results.vocab import Confidence, LedgerEntry, MeasuredOn, NoteKind

NO_STRAGGLERS = StragglerResult(per_rank=pl.DataFrame(), matrix=pl.DataFrame(), stragglers=())
NO_COLLECTIVES = CollectiveResult(per_rank=pl.DataFrame(), instances=pl.DataFrame())


def ledger(*steps: dict[str, float], ranks: int = 1, lengths: list[int] | None = None) -> LedgerResult:
    """A ledger of 1000 ns steps (or of ``lengths``): each dict gives the entries' shares of its
    step (the rest of the step is compute unless given), on every rank alike."""
    rows = []
    sizes = lengths or [1000] * len(steps)
    for rank in range(ranks):
        for step, shares in enumerate(steps):
            given = {"compute": 1 - sum(shares.values()), **shares}
            rows += [
                {"rank": rank, "step": step, "phase": None, "entry": e, "ns": round(v * sizes[step])}
                for e, v in given.items()
            ]
    entries = pl.DataFrame(
        rows, schema={"rank": pl.Int32, "step": pl.Int64, "phase": pl.String, "entry": pl.String, "ns": pl.Int64}
    )
    return reduce_ledger(entries, pl.DataFrame(), pl.DataFrame(), collectives=NO_COLLECTIVES, stragglers=NO_STRAGGLERS)


def decided(
    *steps: dict[str, float],
    undetermined: tuple[Finding, ...] = (),
    worth: dict[str, float | None] | None = None,
) -> object:
    return decide(
        ledger(*steps), measured_on=MeasuredOn.GPU, stragglers=NO_STRAGGLERS, undetermined=undetermined, worth=worth
    )


# -- one story per finding: a bound must be worth fixing (issue 45) ----------------------------


def test_a_waste_whose_removal_gains_little_is_a_symptom_not_the_bound() -> None:
    # comms 40% of the step, but hiding the collectives gains 1% (their time waits for the late
    # rank); the straggler's 20% re-timed is worth 18%: straggler-bound, comms passed over
    steps = [{"comms": 0.40, "straggler": 0.20}] * 3
    verdict = decided(*steps, worth={"comms-bound": 1.0, "straggler-bound": 18.0})
    assert verdict.primary.bound == "straggler-bound"
    assert verdict.primary.passed_over == ["comms-bound"]
    assert [f.bound for f in verdict.secondary] == ["comms-bound"]
    # the ledger alone (no what-if) named comms: the re-timing is what moved it
    assert decided(*steps).primary.bound == "comms-bound"


def test_no_waste_worth_fixing_leaves_compute_with_the_symptom_passed_over() -> None:
    # a CPU gloo run's exposed collectives: 18% of the time, worth 1.08x (7.5%): compute-bound
    verdict = decided(*[{"comms": 0.18}] * 3, worth={"comms-bound": 7.5})
    assert verdict.primary.bound == "gpu-compute-bound"
    assert verdict.primary.passed_over == ["comms-bound"]
    assert [f.bound for f in verdict.secondary] == ["comms-bound"]


def test_a_gain_over_the_material_speed_up_names_a_small_waste() -> None:
    # a sync holds 6% of the step, but its removal lets the host run ahead: worth 20%
    verdict = decided(*[{"host_sync": 0.06, "launch": 0.08}] * 3, worth={"sync-bound": 20.0, "launch-bound": 6.0})
    assert verdict.primary.bound == "sync-bound"
    assert verdict.primary.share_pct == pytest.approx(6.0)


def test_the_ledger_orders_the_wastes_worth_fixing() -> None:
    # the TensorBoard tutorial's shape: data 20% worth 19.9%, launch 7% worth 25%: data-bound
    verdict = decided(*[{"data": 0.20, "launch": 0.07}] * 3, worth={"data-bound": 19.9, "launch-bound": 25.0})
    assert verdict.primary.bound == "data-bound"
    assert [f.bound for f in verdict.secondary] == ["launch-bound"]


def test_a_waste_no_what_if_models_decides_by_its_share_one_level_lower() -> None:
    steps = [{"comms": 0.64}] * 3
    assert decided(*steps).primary.confidence == "high"
    verdict = decided(*steps, worth={"comms-bound": None})  # not modeled: ranks of the world absent
    assert (verdict.primary.bound, verdict.primary.confidence) == ("comms-bound", "medium")


def test_the_step_s_noise_is_its_spread_over_its_mean() -> None:
    # steps of 1000 ns each: compute and a waste vary, the step does not
    assert step_noise(ledger({"data": 0.2}, {"data": 0.3})) == pytest.approx(0.0)
    led = ledger({"data": 0.2})
    assert step_noise(led) is None  # one step: no spread


def test_a_material_waste_beats_a_larger_compute_share() -> None:
    # GPU idle waiting for data 20% beside compute 80%: removing it gives 1.25x: data-bound
    verdict = decided({"data": 0.20}, {"data": 0.21}, {"data": 0.19})
    assert verdict.primary.bound == "data-bound"
    assert verdict.primary.share_pct == pytest.approx(20.0)
    assert verdict.primary.threshold_pct == 100 * MATERIAL_SHARE
    assert verdict.primary.confidence == "medium"  # under twice the material share


def test_a_waste_that_would_not_make_the_step_materially_faster_is_secondary() -> None:
    # launch gaps 11% beside compute 85% (removing them: 1.12x): compute-bound, launch secondary
    verdict = decided({"launch": 0.11}, {"launch": 0.10}, {"launch": 0.12})
    assert verdict.primary.bound == "gpu-compute-bound"
    assert verdict.primary.confidence == "high"  # compute 89%, over the 85% of a GPU busy nearly all the time
    assert [f.bound for f in verdict.secondary] == ["launch-bound"]


def test_small_wastes_under_the_secondary_share_are_no_finding() -> None:
    verdict = decided({"launch": 0.03, "host_work": 0.02}, {"launch": 0.03, "host_work": 0.02})
    assert verdict.primary.bound == "gpu-compute-bound" and verdict.secondary == ()


def test_wastes_whose_difference_is_within_the_step_to_step_variation_are_mixed() -> None:
    # comms 30/40/35 and straggler 35/25/31 per step: differences -5, +15, +4 ns per 100, an
    # interval (t, 2 degrees of freedom) around their mean 4.7 that holds zero
    verdict = decided(
        {"comms": 0.30, "straggler": 0.35}, {"comms": 0.40, "straggler": 0.25}, {"comms": 0.35, "straggler": 0.31}
    )
    assert verdict.primary.bound == "mixed"
    assert verdict.primary.confidence == "low"
    assert verdict.primary.components == ["comms-bound", "straggler-bound"]
    assert [f.bound for f in verdict.secondary] == ["comms-bound", "straggler-bound"]


def test_a_difference_every_step_shows_names_one_bound() -> None:
    # comms 40/41/39, straggler 20/21/19: a difference of 20 +- 0 in every step
    verdict = decided(
        {"comms": 0.40, "straggler": 0.20}, {"comms": 0.41, "straggler": 0.21}, {"comms": 0.39, "straggler": 0.19}
    )
    assert verdict.primary.bound == "comms-bound"
    assert verdict.primary.margin == pytest.approx(2.0)  # 40 / 20
    assert verdict.primary.confidence == "high"  # 40% is over twice the material share
    assert [f.bound for f in verdict.secondary] == ["straggler-bound"]


def test_a_step_holding_neither_waste_counts_as_no_difference() -> None:
    # comms 40/40/0, straggler 25/25/0: the third step is all compute. Its difference is 0,
    # not missing: differences 15, 15, 0 (mean 10, sd 8.7) leave a lower bound under zero
    verdict = decided({"comms": 0.40, "straggler": 0.25}, {"comms": 0.40, "straggler": 0.25}, {})
    assert verdict.primary.bound == "mixed"
    assert verdict.primary.components == ["comms-bound", "straggler-bound"]


def test_the_steps_weigh_in_the_test_as_they_do_in_the_shares() -> None:
    # long steps (3000 ns) data 50% and host 15%; short ones (500 ns) data 10% and host 60%. The
    # run's shares: data 4650 / 10500 ns = 44.3%, host 2250 / 10500 = 21.4%, both worth fixing.
    # Unweighted, the steps' differences +35, -50 (three each) have mean -7.5: host would look
    # the larger. Weighted by the steps' time: mean 80000 / 3500 = 22.86 points; each step's
    # w (d - 22.86) is +-36429, so se = sqrt(6/5 * 6 * 36429^2) / 10500 = 9.31 and the one-sided
    # 95% bound (t 2.015, 5 degrees of freedom) 22.86 - 18.75 = 4.1 > 0: data-bound, named alone
    long, short = {"data": 0.50, "host_work": 0.15}, {"data": 0.10, "host_work": 0.60}
    led = ledger(*[long, short] * 3, lengths=[3000, 500] * 3)
    assert led.share(LedgerEntry.DATA) == pytest.approx(100 * 4650 / 10500)
    assert led.share(LedgerEntry.HOST_WORK) == pytest.approx(100 * 2250 / 10500)
    verdict = decide(led, measured_on=MeasuredOn.GPU, stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "data-bound"
    assert [f.bound for f in verdict.secondary] == ["host-bound"]
    # the same steps all of one length: data 30%, host 37.5% of the run, by turns +35 and -50
    assert decided(*[long, short] * 3).primary.bound == "mixed"


def test_one_step_decides_by_the_margin_with_low_confidence() -> None:
    assert decided({"comms": 0.40, "straggler": 0.35}).primary.bound == "mixed"  # 1.14x
    one = decided({"comms": 0.40, "straggler": 0.20})
    assert (one.primary.bound, one.primary.confidence) == ("comms-bound", "low")


def test_copies_between_host_and_device_make_a_run_transfer_bound() -> None:
    verdict = decided({"transfer": 0.97}, {"transfer": 0.97})
    assert verdict.primary.bound == "transfer-bound"


def test_a_waste_larger_than_compute_but_not_material_is_mixed() -> None:
    # unexplained idle 12% and switch/memory time that bounds nothing: compute only 10%
    verdict = decided({"unexplained": 0.12, "memory": 0.78}, {"unexplained": 0.12, "memory": 0.78})
    assert verdict.primary.bound == "mixed"
    assert verdict.primary.components == ["gpu-idle", "gpu-compute-bound"]


def test_unexplained_idle_is_not_compute_bound() -> None:
    verdict = decided({"unexplained": 0.95}, {"unexplained": 0.95})
    assert verdict.primary.bound == "gpu-idle"


def test_the_verdict_share_is_its_ledger_entry_and_warm_up_is_no_bound() -> None:
    # host work is evidence of host-bound; one-time work (warm-up) of no bound: host-bound's share
    # is the 20 of host work alone, not 20 + 10 (before analysis 2.9 one-time work was host-bound)
    led = ledger({"host_work": 0.2, "one_time": 0.1}, {"host_work": 0.2, "one_time": 0.1})
    verdict = decide(led, measured_on=MeasuredOn.GPU, stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "host-bound"
    assert verdict.primary.share_pct == pytest.approx(led.share(LedgerEntry.HOST_WORK))
    assert led.share(LedgerEntry.ONE_TIME) == pytest.approx(10.0)


def test_nothing_measured() -> None:
    verdict = decide(ledger(), measured_on=MeasuredOn.GPU, stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "undetermined"


def test_a_reason_for_no_verdict_overrides_the_ledger() -> None:
    note = Finding(note=NoteKind.TOO_LITTLE_WORK, confidence=Confidence.HIGH, value=5.0)
    verdict = decided({"launch": 0.9}, undetermined=(note,))
    assert verdict.primary.bound == "undetermined"
    assert verdict.secondary == (note,)


@pytest.mark.real
def test_dataloader_starved_pair(kineto_dir: Path) -> None:
    starved = analysis_of([kineto_dir / "tbplugin-resnet50-workers0"]).frames.verdict
    control = analysis_of([kineto_dir / "tbplugin-resnet50-workers4"]).frames.verdict
    assert starved.primary.bound == "data-bound"
    assert control.primary.bound != "data-bound"
    assert "data-bound" not in {f.bound for f in control.secondary}


@pytest.mark.real
def test_dlrm_stragglers(kineto_dir: Path) -> None:
    result = analysis_of([kineto_dir / "param-dlrm-8rank-v100"]).frames
    inst = result.collectives.instances
    first_all_to_all = inst.filter(op="SendRecv", k=0).row(0, named=True)
    assert first_all_to_all["last_rank"] == 7
    assert first_all_to_all["ranks"] == 8
    all_reduce = inst.filter(op="AllReduce", k=2).row(0, named=True)
    assert set(all_reduce["last_ranks"]) == {4, 5}
    waits = result.collectives.per_rank.filter(op="SendRecv", k=0).sort("rank")
    assert waits.filter(rank=7)["wait_ns"].item() < 20_000  # rank 7 waits ~10 us ...
    assert waits.filter(rank=1)["wait_ns"].item() > 7_000_000  # ... while rank 1 waits ~7.6 ms
    assert result.stragglers.stragglers[0].rank == 7
    # rank 7's lateness is named as a finding, whether or not it is the largest cost (the host
    # dispatch gaps on the slowest rank are as large: see tests/truth)
    findings = {f.bound: f for f in (result.verdict.primary, *result.verdict.secondary)}
    assert findings["straggler-bound"].straggler_rank == 7
