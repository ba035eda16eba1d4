"""The reports of tracekit dataloader and audit-params, and the analysis advice that links to them."""

from __future__ import annotations

import shlex
from pathlib import Path

import msgspec
import pytest

from tests.conftest import SAMPLES
from tests.results.test_capture import small_summary
from tracekit.capture.loader_stats import headroom, rank_fetches
from tracekit.errors import InputError
from tracekit.reports.markdown import MarkdownRenderer
from tracekit.reports.sentences import recommendations, write_verdict
from tracekit.reports.terminal import TerminalRenderer
from tracekit.reports.tool_reports import (
    audit_conclusion,
    audit_report,
    loader_conclusion,
    loader_report,
)
from tracekit.results.analysis import Evidence, Finding, Verdict
from tracekit.results.capture import CaptureSummary, PhaseStats, load_capture_summary
from tracekit.results.loader_probe import LoaderProbe, load_loader_probe
from tracekit.results.param_audit import ModuleParams, ParamAudit, load_param_audit
from tracekit.results.records import dump_record
from tracekit.results.vocab import BoundKind, CeilingBy, Confidence, MeasuredOn


def probe(loader_sps: float | None = None, training_sps: float = 1000.0) -> LoaderProbe:
    ranks = [
        rank_fetches(0, [10_000] * 6 + [20_000_000] * 6, 130_000_000),
        rank_fetches(1, [15_000_000] * 12, 200_000_000),
    ]
    samples = 60.0 * 32 * 2  # rank 1: 12 batches in 0.2 s
    return LoaderProbe(
        config={"num_workers": 2, "prefetch_factor": None, "pin_memory": True, "persistent_workers": False},
        world_size=2,
        batch_size=32,
        warmup_batches=2,
        per_rank=ranks,
        slowest_rank=1,
        samples_per_s=samples if loader_sps is None else loader_sps,
        samples_per_s_by=CeilingBy.SLOWEST_RANK,
        headroom=None if loader_sps is None else headroom(loader_sps, training_sps, capture="cap"),
    )


@pytest.mark.parametrize(
    ("loader", "start"),
    [
        (600.0, "input-bound: the loader alone delivers only 0.60x what training consumes (600 samples/s against"),
        (1100.0, "input-bound: the loader alone delivers 1.10x what training consumes (1,100 samples/s against"),
        (6300.0, "not input-bound: the loader alone delivers 6.3x what training consumes (6,300 samples/s against"),
    ],
)
def test_loader_conclusion(loader: float, start: str) -> None:
    assert loader_conclusion(probe(loader)).startswith(start)


@pytest.mark.parametrize(("loader", "workers"), [(600.0, 5), (1100.0, 3), (1490.0, 3)])
def test_an_input_bound_loader_is_told_the_workers_to_try(loader: float, workers: int) -> None:
    # 2 workers making 0.60x (1.10x, 1.49x) of training: 1.5x needs 2 x 1.5 / 0.6 = 5 workers (2.7 -> 3;
    # 2.01 -> 3, never fewer than one more than now); 2 ranks of them need twice as many cores
    said = loader_conclusion(probe(loader))
    assert said.endswith(
        f"; try --num_workers={workers} (now 2: the rate grows about in proportion to the workers while each has a "
        f"core, and {workers} on each of 2 rank(s) need {2 * workers} cores), then tracekit dataloader again"
    )
    assert "--num_workers" not in loader_conclusion(probe(6300.0))


def test_loader_without_a_capture_gives_its_ceiling() -> None:
    p = probe()
    assert loader_conclusion(p).startswith("the loader alone delivers 3,840 samples/s; capture this config")
    facts, ranks = loader_report(p).sections[0].tables
    assert dict(facts.rows)["ceiling"] == ("3,840 samples/s: global batch 64 x 60.0 batches/s of rank 1, the slowest")
    assert ranks.rows[0][5] == "50% fast (0.01 ms), 50% slow (20.00 ms)"
    assert ranks.rows[1][5] == "one mode"


def test_loader_probe_round_trips_and_renders() -> None:
    p = probe(1100.0)
    assert load_loader_probe(dump_record(p), source="x") == p
    text, md = TerminalRenderer(width=100).render(p), MarkdownRenderer().render(p)
    assert "1.10x: input-bound (input-bound below 1.5x)" in text
    assert md.startswith("## tracekit dataloader\n\n**input-bound")
    with pytest.raises(InputError, match="not a tracekit dataloader probe"):
        load_loader_probe(b'{"schema": "other"}', source="x")
    with pytest.raises(InputError, match=r"schema version 2\.0 is not readable"):
        load_loader_probe(b'{"schema": "tracekit.dataloader_probe", "schema_version": "2.0"}', source="x")


def audit(unused: list[ModuleParams]) -> ParamAudit:
    frozen = [ModuleParams(module="embed", parameters=["weight"], numel=100)]
    return ParamAudit(device="cpu", parameters=6, numel=1000, unused=unused, frozen=frozen, zero_grad=None)


def test_audit_conclusions() -> None:
    assert audit_conclusion(audit([])) == (
        "no unused parameters: find_unused_parameters=False is safe and saves a graph walk every step"
    )
    unused = [
        ModuleParams(module="aux_head", parameters=["weight", "bias"], numel=5130),
        ModuleParams(module="", parameters=["scale"], numel=1),
    ]
    assert audit_conclusion(audit(unused)) == (
        "3 parameter(s) (5,131 elements) in aux_head, (the model itself) get no gradient: keep "
        "find_unused_parameters=True or remove/freeze them"
    )
    a = audit(unused)
    assert load_param_audit(dump_record(a), source="x") == a
    _, groups = audit_report(a).sections[0].tables
    assert groups.rows == (
        ("unused", "aux_head", "weight, bias", "2", "5,130"),
        ("unused", "(the model itself)", "scale", "1", "1"),
        ("frozen", "embed", "weight", "1", "100"),
    )
    assert "not checked (--include-zero-grad)" in groups.caption


def verdict(bound: BoundKind) -> Verdict:
    primary = Finding(bound=bound, share_pct=55.0, confidence=Confidence.MEDIUM)
    secondary = [Finding(bound=BoundKind.COMMS, share_pct=30.0, confidence=Confidence.MEDIUM)]
    return Verdict(
        measured_on=MeasuredOn.HOST, primary=primary, secondary=secondary, costs=[], evidence=Evidence(steps_per_rank=3)
    )


def test_a_data_bound_capture_is_told_to_measure_its_loader() -> None:
    path = SAMPLES / "captures" / "data_bound" / "summary.json"
    capture = load_capture_summary(path.read_bytes(), source=str(path))
    v = verdict(BoundKind.DATA)
    recs = recommendations(v.primary, v, capture)
    assert recs[0].startswith(
        "Measure the input pipeline's ceiling without the model: tracekit dataloader "
        "--config_path samples/captures/data_bound/capture_config.json times this DataLoader alone on the same 8 "
    )
    assert recs[1:] == recommendations(v.primary, v)  # the rest as without the capture
    assert not any("tracekit" in r for r in recommendations(v.secondary[0], v, capture))  # the primary only
    written = write_verdict(v, capture=capture)
    assert written.primary.recommendations[0] == recs[0]
    compute = verdict(BoundKind.COMPUTE)
    assert not any("tracekit" in r for r in recommendations(compute.primary, compute, capture))


def ddp_capture(*, find_unused: bool | None, distributed: str = "MULTI_CPU", backward: float = 60.0) -> CaptureSummary:
    config = {"workload": "mlp", "nproc": 2, "out_dir": "runs/ddp/"}
    if find_unused is not None:
        config["find_unused_parameters"] = find_unused
    phases = [
        PhaseStats(phase="forward", mean_ns=1e6, median_ns=1e6, p95_ns=1e6, share_pct=100.0 - backward),
        PhaseStats(phase="backward", mean_ns=1e6, median_ns=1e6, p95_ns=1e6, share_pct=backward),
    ]
    env = {"distributed_type": distributed}
    return msgspec.structs.replace(small_summary(), config=config, environment=env, phases=phases)


def test_ddp_with_find_unused_parameters_and_a_heavy_backward_is_told_to_audit() -> None:
    v = verdict(BoundKind.COMMS)
    advice = recommendations(v.primary, v, ddp_capture(find_unused=True))[0]
    assert advice == (
        "DDP runs with find_unused_parameters=True and backward is the step's largest phase (60.0%): tracekit "
        "audit-params --config_path runs/ddp/capture_config.json lists the parameters that get no gradient; with "
        "none, set it to False (no graph walk after every forward)."
    )
    quiet = [
        ddp_capture(find_unused=False),
        ddp_capture(find_unused=None),  # a summary from before the setting was recorded
        ddp_capture(find_unused=True, distributed="FSDP"),
        ddp_capture(find_unused=True, backward=40.0),  # forward is the largest phase
    ]
    for capture in quiet:
        assert recommendations(v.primary, v, capture) == recommendations(v.primary, v)


def test_reports_of_a_capture_show_the_advice(tmp_path: Path) -> None:
    from tracekit.pipeline import AnalyzeOptions, analyze_paths
    from tracekit.reports import renderer

    analysis = analyze_paths([SAMPLES / "captures" / "data_bound"], AnalyzeOptions(use_cache=False)).analysis
    for fmt in ("md", "html"):
        assert "tracekit dataloader" in renderer(fmt).render(analysis), fmt


@pytest.mark.parametrize(
    "out_dir",
    ["runs/x; rm -rf ~", "runs/$(touch pwned)", "runs/`id`", "runs/a b", "runs/it's", "runs/x\nrm -rf /"],
)
def test_a_recorded_out_dir_is_quoted_in_the_printed_command(out_dir: str) -> None:
    capture = ddp_capture(find_unused=True)
    capture = msgspec.structs.replace(capture, config={**(capture.config or {}), "out_dir": out_dir})
    v = verdict(BoundKind.COMMS)
    advice = recommendations(v.primary, v, capture)[0]
    command = advice.split("tracekit ", 1)[1].split(" lists the parameters", 1)[0]
    # the shell reads back exactly two words after the subcommand: the option and the path as recorded
    assert shlex.split(command) == ["audit-params", "--config_path", f"{out_dir.rstrip('/')}/capture_config.json"]
