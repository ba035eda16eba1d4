"""``tracekit compare`` end to end: outputs, and the exit codes of the CI gate (0, 1, 2)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import msgspec
import pytest

from tests.analyzers.test_compare import _steps
from tests.cli.test_cli import tracekit
from tests.factories import write_kineto
from tracekit.results.compare import Comparison

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cli-compare")
    runs = {"base": {"seed": 1}, "same": {"seed": 2}, "slow": {"seed": 3, "forward_us": 9000}, "sync": {"seed": 4}}
    out = {}
    for name, kw in runs.items():
        folder = tmp / name
        folder.mkdir()
        for rank in range(2):
            events = _steps(rank, item=name == "sync", **kw)  # type: ignore[arg-type]
            write_kineto(folder / f"rank{rank}.pt.trace.json", events, rank=rank, world_size=2, backend="gloo")
        out[name] = folder
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
    result = tracekit("compare", folders["base"], folders["slow"], "--fail-if", "slower:1%")
    assert result.returncode == 1
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert line.startswith("tracekit: FAIL slower:1%: regressed: step time +")


def test_noise_passes_the_gate(folders: dict[str, Path]) -> None:
    result = tracekit("compare", folders["base"], folders["same"], "--fail-if", "slower:1%", "--fail-if", "syncs:+0")
    assert result.returncode == 0, result.stderr
    assert "PASS slower:1%" in result.stdout


def test_one_sync_per_step_fails_syncs_plus_0(folders: dict[str, Path]) -> None:
    result = tracekit("compare", folders["base"], folders["sync"], "--fail-if", "syncs:+0")
    assert result.returncode == 1
    assert "syncs per step +1" in result.stderr
    assert "aten::is_nonzero" in result.stdout  # the op that issued it, named


def test_a_saved_analysis_compares_like_its_traces(folders: dict[str, Path], tmp_path: Path) -> None:
    saved = tmp_path / "base.json"
    assert tracekit("analyze", folders["base"], "--json", saved).returncode == 0
    result = tracekit("compare", saved, folders["slow"], "--json", tmp_path / "c.json", "--fail-if", "slower:1%")
    assert result.returncode == 1
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["schema"] == "tracekit.comparison"
    assert doc["gate"][0]["failed"] is True


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
