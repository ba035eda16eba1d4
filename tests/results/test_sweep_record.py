"""A ``sweep.json`` no sweep writes is one line naming the file and the field; a step timed as 0 ns
is a legitimate reading whose throughput is undefined ("-"), with no numpy warning.

Each record is the sample sweep's (two cells, batch_size=2,4, and an OOM probe) with one field
changed by hand: ``sweep --report`` read such records with a ZeroDivisionError (batch size 0), an
IndexError (no grid axis) or a KeyError (a capture's values naming another axis).
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers.sweep import build_matrix
from tracekit.errors import InputError
from tracekit.results.sweep import load_sweep

if TYPE_CHECKING:
    from collections.abc import Callable

RECORD = SAMPLES / "captures" / "cuda-h200-sweep" / "sweep.json"


def edited(edit: Callable[[dict[str, Any]], object]) -> bytes:
    data = json.loads(RECORD.read_bytes())
    edit(data)
    return json.dumps(data).encode()


def _cell_run(data: dict[str, Any], cell: str) -> dict[str, Any]:
    return next(r for r in data["runs"] if r["cell"] == cell and not r["probe"])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["runs"][0].update(batch_size=0), "field runs[0].batch_size is 0: it is at least 1"),
        (lambda d: d["runs"][1].update(world_size=0), "field runs[1].world_size is 0: it is at least 1"),
        (lambda d: d.update(grid=[]), "field grid is empty"),
        (lambda d: d.update(grid=[], cells=[]), "field grid is empty"),
        (lambda d: d["grid"][0].update(values=[]), "field grid[0].values (batch_size) is empty or repeats a value"),
        (lambda d: d.update(cells=["batch_size=2", "batch_size=3"]), "field cells holds 'batch_size=3'"),
        (lambda d: d.update(cells=["batch_size=2"]), "field cells lacks 'batch_size=4'"),
        (lambda d: d.update(grid=[{"key": "nproc", "values": ["2", "4"]}]), "field cells holds 'batch_size=2'"),
        (
            lambda d: _cell_run(d, "batch_size=4").update(values={"nproc": "4"}),
            "field runs[1].values {'nproc': '4'} does not name a grid cell (its cell: 'batch_size=4')",
        ),
        (lambda d: d["runs"][1].update(step_ns=[5, -1]), "field runs[1].step_ns[1] is -1: it cannot be negative"),
    ],
    ids=[
        "batch-0",
        "world-0",
        "empty-grid",
        "empty-grid-no-cells",
        "axis-without-values",
        "stray-cell",
        "missing-cell",
        "grid-other-axis",
        "values-of-another-axis",
        "negative-step",
    ],
)
def test_a_record_no_sweep_writes_names_the_field(edit: Callable[[dict[str, Any]], object], message: str) -> None:
    with pytest.raises(InputError) as caught:
        load_sweep(edited(edit), source="sw/sweep.json")
    assert caught.value.path == "sw/sweep.json"
    assert message in str(caught.value)


def test_the_sample_record_loads() -> None:
    assert load_sweep(RECORD.read_bytes(), source=str(RECORD)).cells == ["batch_size=2", "batch_size=4"]


@pytest.mark.parametrize("steps", [[0, 0], [0, 5_000_000]], ids=["every-step-0", "one-step-0"])
def test_a_zero_step_time_has_no_throughput_and_no_numpy_warning(steps: list[int]) -> None:
    def zero(d: dict[str, Any]) -> None:
        _cell_run(d, "batch_size=4").update(step_ns=steps, step_mean_ns=sum(steps) / len(steps))

    sweep = load_sweep(edited(zero), source="sw/sweep.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        matrix = build_matrix(sweep, source="sw")
    rows = {r.cell: r for r in matrix.rows}
    assert rows["batch_size=4"].samples_per_s is None  # rendered "-"
    assert rows["batch_size=2"].samples_per_s == pytest.approx(2 * 1e9 / 12557576.5)
    assert matrix.best is not None and matrix.best.cell == "batch_size=2" and matrix.best.runner_up is None
