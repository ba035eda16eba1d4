"""The pure parts of a sweep: the grid, cell names and folders, interleaving, the OOM
probe's walk over a fake 'does this batch fit' oracle, and what a resumed sweep reruns."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from tracekit.capture.sweep import plan_sweep
from tracekit.capture.sweep_plan import (
    Cell,
    cell_folder,
    grid_cells,
    interleaved,
    next_probe,
    parse_grid,
    pending,
    probe_bracket,
    probe_folder,
)
from tracekit.errors import InputError
from tracekit.results.sweep import CellRun

if TYPE_CHECKING:
    from pathlib import Path


def test_grid_axes_and_cells_are_named_with_sorted_keys() -> None:
    axes = parse_grid(["batch_size=8,12,16", "--accelerate-config=ddp,fsdp"])
    assert [(a.key, a.values) for a in axes] == [
        ("batch_size", ["8", "12", "16"]),
        ("accelerate_config", ["ddp", "fsdp"]),
    ]
    cells = grid_cells(axes)
    assert len(cells) == 6
    assert cells[0].name == "accelerate_config=ddp,batch_size=8"
    assert [c.name for c in cells[:2]] == ["accelerate_config=ddp,batch_size=8", "accelerate_config=fsdp,batch_size=8"]
    assert cells[0].without("batch_size").name == "accelerate_config=ddp"


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["batch_size"], "key=value1,value2"),
        (["batch_size=8,,16"], "key=value1,value2"),
        (["batch_size=8", "batch_size=16"], "already a grid axis"),
        (["batch_size=8,8"], "repeated"),
        (["out_dir=a,b"], "set by the sweep"),
        ([], "at least one --grid"),
    ],
)
def test_bad_grids_are_refused(specs: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_grid(specs)


def test_repeats_interleave_every_cell_before_the_next_repeat() -> None:
    cells = grid_cells(parse_grid(["batch_size=8,16", "accelerate_config=ddp,fsdp"]))
    order = interleaved(cells, 2)
    assert [r for r, _ in order] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert [c.name for _, c in order[:4]] == [c.name for _, c in order[4:]]


def test_folders_are_readable_and_safe() -> None:
    cell = Cell({"accelerate_config": "configs/my fsdp.yaml", "batch_size": "8"})
    assert cell_folder(cell, 1, 1) == "cells/accelerate_config=configs_my_fsdp.yaml,batch_size=8"
    assert cell_folder(cell, 2, 3).endswith(",batch_size=8/run2")
    assert probe_folder(Cell({"batch_size": "64"})) == "probe/batch_size=64"


def _walk(limit: int, start: dict[int, bool], **kw: int) -> tuple[list[int], dict[int, bool]]:
    """Run the probe against the oracle 'fits when batch <= limit'; the sizes it tried."""
    known, tried = dict(start), []
    while (size := next_probe(known, **kw)) is not None:
        assert size not in known, "the walk never tries a size twice"
        tried.append(size)
        known[size] = size <= limit
        assert len(tried) < 40
    return tried, known


def test_probe_doubles_then_bisects_to_within_its_resolution() -> None:
    tried, known = _walk(100, {8: True, 16: True})
    assert tried[:3] == [32, 64, 128]  # doubling from the largest grid size that fits
    last_fit, first_oom = probe_bracket(known)
    assert last_fit is not None and first_oom is not None
    assert last_fit <= 100 < first_oom
    assert first_oom - last_fit <= max(1, last_fit // 8)  # within 12.5% of the last fit
    assert tried[3] == 96  # then halfway between the last fit and the first OOM


def test_probe_walks_by_a_given_step() -> None:
    tried, known = _walk(50, {16: True}, step=8)
    assert tried == [24, 32, 40, 48, 56]
    assert probe_bracket(known) == (48, 56)


def test_probe_starts_between_a_grid_fit_and_a_grid_oom() -> None:
    tried, known = _walk(20, {8: True, 16: True, 32: False})
    assert tried[0] == 24 and probe_bracket(known)[0] == 20
    assert probe_bracket(known)[1] == 22  # within 12.5% of 20: close enough


def test_probe_stops_when_nothing_fits_or_at_the_cap() -> None:
    assert next_probe({8: False, 16: False}) is None
    assert probe_bracket({8: False}) == (None, 8)
    tried, known = _walk(10**9, {16: True}, max_batch=256)
    assert tried == [32, 64, 128, 256]
    assert probe_bracket(known) == (256, None)


def _run(cell: str, repeat: int, *, probe: bool = False) -> CellRun:
    return CellRun(
        cell=cell,
        values={},
        repeat=repeat,
        probe=probe,
        folder="x",
        status="failed",
        started="2026-01-01T00:00:00+00:00",
        seconds=1.0,
        backend="DDP",
        batch_size=8,
        world_size=2,
    )


def test_resume_runs_only_what_no_record_covers() -> None:
    cells = grid_cells(parse_grid(["batch_size=8,16"]))
    order = interleaved(cells, 2)
    runs = [_run("batch_size=8", 1), _run("batch_size=16", 1), _run("batch_size=8", 2, probe=True)]
    left = pending(order, runs)
    assert [(r, c.name) for r, c in left] == [(2, "batch_size=8"), (2, "batch_size=16")]
    assert pending(order, []) == order


@pytest.mark.parametrize(
    ("grid", "flags", "message"),
    [
        ("trace=true,false", {"trace": False}, "--grid trace: --no-trace sets trace in every cell"),
        ("timeout=5,10", {"cell_timeout": 3.0}, "--grid timeout: --cell-timeout sets timeout in every cell"),
    ],
    ids=["trace-with-no-trace", "timeout-with-cell-timeout"],
)
def test_a_grid_axis_that_a_flag_fixes_is_refused(
    tmp_path: Path, grid: str, flags: dict[str, Any], message: str
) -> None:
    # --grid trace=true,false --no-trace compared two untraced cells (+6134% between them)
    with pytest.raises(InputError, match=re.escape(message)):
        plan_sweep(None, {"out_dir": str(tmp_path / "sw")}, [grid], **flags)
    assert not (tmp_path / "sw").exists()


def test_a_grid_axis_no_flag_fixes_is_planned(tmp_path: Path) -> None:
    plan = plan_sweep(None, {"out_dir": str(tmp_path / "sw")}, ["trace=true,false"], cell_timeout=3.0)
    assert [c.name for c in plan.cells] == ["trace=true", "trace=false"]
