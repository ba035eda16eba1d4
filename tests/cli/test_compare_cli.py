"""``tracekit compare`` end to end: outputs, and the exit codes of the CI gate (0, 1, 2)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import msgspec
import pytest

from tests.analyzers.test_compare import _steps
from tests.cli.test_cli import tracekit
from tests.factories import write_kineto
from tracekit.results.capture import CaptureSummary, StepStats, Throughput, dump_capture_summary
from tracekit.results.compare import Comparison

if TYPE_CHECKING:
    from pathlib import Path


def _run(folder: Path, *, item: bool = False, **kw: float) -> None:
    """One run of 2 gloo ranks into ``folder``."""
    folder.mkdir(parents=True)
    for rank in range(2):
        events = _steps(rank, item=item, **kw)  # type: ignore[arg-type]
        write_kineto(folder / f"rank{rank}.pt.trace.json", events, rank=rank, world_size=2, backend="gloo")


#: The capture summary of each repeat (a folder of repeats is a folder of captures).
_SUMMARY: Final = CaptureSummary(
    config={"workload": "synthetic"},
    world_size=2,
    ranks=[0, 1],
    measured_steps=20,
    step=StepStats(),
    phases=[],
    per_rank=[],
    throughput=Throughput(),
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run each (base, same, slow, sync), and folders of 3 repeats (base3, same3, slow3)."""
    tmp = tmp_path_factory.mktemp("cli-compare")
    runs = {"base": {"seed": 1}, "same": {"seed": 2}, "slow": {"seed": 3, "forward_us": 9000}, "sync": {"seed": 4}}
    out = {}
    for name, kw in runs.items():
        _run(tmp / name, item=name == "sync", **kw)
        out[name] = tmp / name
    for name, kw in runs.items():
        if name == "sync":
            continue
        for i in range(3):
            _run(tmp / f"{name}3" / f"run{i + 1}", **{**kw, "seed": 10 * kw["seed"] + i})
            (tmp / f"{name}3" / f"run{i + 1}" / "summary.json").write_bytes(dump_capture_summary(_SUMMARY))
        out[f"{name}3"] = tmp / f"{name}3"
    return out


def test_compare_writes_every_format_and_passes_without_a_gate(folders: dict[str, Path], tmp_path: Path) -> None:
    result = tracekit(
        "compare",
        folders["base"],
        folders["slow"],
        "--json",
        tmp_path / "c.json",
        "--md",
        tmp_path / "c.md",
        "--html",
        tmp_path / "c.html",
    )
    assert result.returncode == 0, result.stderr
    assert "slower by" in result.stdout
    c = msgspec.json.decode((tmp_path / "c.json").read_bytes(), type=Comparison)
    assert c.step.change.value == "slower"
    assert "forward" in (tmp_path / "c.md").read_text()
    assert "<html" in (tmp_path / "c.html").read_text()


def test_a_regression_beyond_the_limit_exits_1_with_one_line(folders: dict[str, Path]) -> None:
    result = tracekit("compare", folders["base3"], folders["slow3"], "--fail-if", "slower:1%")
    assert result.returncode == 1
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert line.startswith("tracekit: FAIL slower:1%: regressed: step time +")


def test_noise_passes_the_gate(folders: dict[str, Path]) -> None:
    result = tracekit("compare", folders["base3"], folders["same3"], "--fail-if", "slower:1%", "--fail-if", "syncs:+0")
    assert result.returncode == 0, result.stderr
    assert "PASS slower:1%" in result.stdout


@pytest.mark.parametrize("spec", ["slower:2%", "phase:forward:1ms", "throughput:5%", "exposed_comm:1%"])
@pytest.mark.parametrize(("a", "b"), [("base", "same"), ("base3", "same"), ("base", "same3")])
def test_a_time_gate_with_one_run_a_side_is_refused(folders: dict[str, Path], spec: str, a: str, b: str) -> None:
    # issue 46, item 1: with one run a side the interval holds step-to-step variation only, and A/A
    # pairs on a loaded 2-core machine failed slower:2% 2 times in 3; refused before any trace is read
    result = tracekit("compare", folders[a], folders[b], "--fail-if", "syncs:+0", "--fail-if", spec)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"tracekit: error: --fail-if '{spec}' needs run-to-run variation: A has")
    assert "--repeats 3" in line and result.stdout == ""
    counts = tracekit("compare", folders["base"], folders["same"], "--fail-if", "syncs:+0")  # counts need no repeats
    assert counts.returncode == 0, counts.stderr


def test_one_sync_per_step_fails_syncs_plus_0(folders: dict[str, Path]) -> None:
    result = tracekit("compare", folders["base"], folders["sync"], "--fail-if", "syncs:+0")
    assert result.returncode == 1
    assert "syncs per step +1" in result.stderr
    assert "aten::is_nonzero" in result.stdout  # the op that issued it, named


def test_the_terminal_prints_the_short_answer_unless_full(folders: dict[str, Path], tmp_path: Path) -> None:
    saved = tmp_path / "c.json"
    short = tracekit("compare", folders["base"], folders["sync"], "--fail-if", "syncs:+0", "--json", saved)
    full = tracekit("compare", folders["base"], folders["sync"], "--fail-if", "syncs:+0", "--full")
    assert short.returncode == full.returncode == 1  # the gate is the same either way
    more = "the whole report: --full prints every table here; --md FILE and --html FILE write the whole report"
    words = " ".join(short.stdout.split())  # as wide as the terminal (COLUMNS): a long line wraps
    assert more in words and more not in " ".join(full.stdout.split())
    for whole in ("Run-level measures", "Step time per rank", "The runs"):
        assert whole not in short.stdout and whole in full.stdout, whole
    assert "FAIL syncs:+0" in short.stdout and len(short.stdout.splitlines()) * 3 < len(full.stdout.splitlines())
    # a saved comparison drawn again: the same short answer, and --full the whole
    again = tracekit("report", saved)
    assert again.returncode == 0 and " ".join(again.stdout.split()).endswith(more)
    assert "Run-level measures" in tracekit("report", saved, "--full").stdout


def test_a_saved_analysis_compares_like_its_traces(folders: dict[str, Path], tmp_path: Path) -> None:
    saved = tmp_path / "base.json"
    assert tracekit("analyze", folders["base"], "--json", saved).returncode == 0
    result = tracekit("compare", saved, folders["slow"], "--json", tmp_path / "c.json", "--fail-if", "syncs:+0")
    assert result.returncode == 0
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["schema"] == "tracekit.comparison"
    assert doc["gate"][0]["failed"] is False
    assert doc["step"]["change"] == "slower"
    # one saved analysis is one run: a gate on time against it is refused
    refused = tracekit("compare", saved, folders["slow3"], "--fail-if", "slower:1%")
    assert refused.returncode == 2 and "A has 1 run(s), B 3" in refused.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--fail-if", "faster:1%"), "unknown metric 'faster'"),
        (("--fail-if", "memory:+1MiB"), "memory is not measured on both runs"),
    ],
)
def test_bad_input_exits_2_with_one_line(folders: dict[str, Path], args: tuple[str, ...], message: str) -> None:
    result = tracekit("compare", folders["base"], folders["same"], *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_missing_run_or_a_third_is_bad_input(folders: dict[str, Path], tmp_path: Path) -> None:
    missing = tracekit("compare", folders["base"], tmp_path / "nope")
    assert missing.returncode == 2
    assert "no such file or folder" in missing.stderr
    three = tracekit("compare", folders["base"], folders["same"], folders["slow"])
    assert three.returncode == 2
    assert "give two runs" in three.stderr
    one = tracekit("compare", folders["base"])
    assert one.returncode == 2
    assert "one A/B capture folder" in one.stderr


def test_an_ab_capture_folder_alone_is_both_runs(folders: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    shutil.copytree(folders["base"], tmp_path / "ab" / "a")
    shutil.copytree(folders["sync"], tmp_path / "ab" / "b")
    result = tracekit("compare", tmp_path / "ab", "--fail-if", "syncs:+0")
    assert result.returncode == 1


def test_a_change_of_one_run_a_side_says_what_it_cannot_rule_out(folders: dict[str, Path]) -> None:
    # issue 46, item 8: "faster by +130.2%, 95% CI ..." from one run a side, with no word of drift
    one = tracekit("compare", folders["base"], folders["slow"])
    head = " ".join(one.stdout.split()[:80])
    assert "slower by" in head and "one run a side: its interval holds step-to-step variation only" in head
    repeated = tracekit("compare", folders["base3"], folders["slow3"])
    assert "slower by" in repeated.stdout and "one run a side" not in repeated.stdout.split("Noise model")[0]
