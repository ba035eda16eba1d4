"""benchmarks.scale_file measures every trace shape, each against its own targets.

No timing here: the benchmark itself runs by hand (see benchmarks/README.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from benchmarks.generate import SHAPES
from benchmarks.run import HERE
from benchmarks.scale_file import _targets, run_all, table

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.real


def _measure(wall: float, rss: float) -> dict[str, Any]:
    return {"wall_s": wall, "cpu_s": wall, "peak_rss_mb": rss, "returncode": 0}


def test_each_shape_is_held_to_the_memory_target_on_2_gb() -> None:
    over = _targets({"2": {"tracekit": _measure(6.0, 960.0), "floor": _measure(10.0, 6000.0)}})
    assert over["rss_2gb_mb"] == {**over["rss_2gb_mb"], "value": 960.0, "met": False}
    assert over["time_2gb_over_floor"]["value"] == pytest.approx(0.6) and over["time_2gb_over_floor"]["met"]
    under = _targets({"2": {"tracekit": _measure(6.0, 480.0)}})
    assert under["rss_2gb_mb"]["met"] and under["time_2gb_over_floor"]["met"] is None  # no floor run


def test_a_small_tile_of_a_shape_is_measured(tmp_path: Path) -> None:
    """The whole path on 3 MB of the DLRM rank: generated, analyzed in its own process, measured."""
    doc = run_all(
        (0.003,), data_dir=tmp_path, hta_max_gb=0, plain=False, log=print, shapes=("dlrm",), only=("tracekit",)
    )
    [run] = doc["results"]["dlrm"]["0.003"].values()
    assert run["returncode"] == 0 and run["peak_rss_mb"] > 50, run["stdout_tail"]
    assert list(doc["results"]) == ["dlrm"] and doc["targets"]["dlrm"]["rss_2gb_mb"]["value"] is None
    assert "dlrm   0.003 tracekit" in table(doc)
    assert not list(tmp_path.iterdir())  # the generated files are removed after their runs


def test_the_floor_decodes_every_shape() -> None:
    """The floor's typed decode takes every shape (the MI300 trace writes ``"bytes": "128"``)."""
    out = subprocess.run(
        [sys.executable, str(HERE / "floor.py"), *map(str, SHAPES.values())], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["files"] == len(SHAPES)
