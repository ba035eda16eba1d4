"""The Python API's doors: a str where a list is taken, None, NaN, negatives and unknown names
refused where they enter, in one line naming the argument, as the CLI refuses the same values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tracekit.arguments import number, path_list, text_list
from tracekit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "samples" / "captures" / "healthy"


def test_a_single_str_is_never_iterated_as_a_list() -> None:
    with pytest.raises(TypeError, match=r"^x: a list of paths, not a single str: write \['run'\]$"):
        path_list("run", name="x")
    with pytest.raises(TypeError, match=r"a list of paths, not a single PosixPath"):
        path_list(Path("run"), name="x")
    with pytest.raises(TypeError, match=r"^k: a list of str, not a single str: write \['\^nccl'\]$"):
        text_list("^nccl", name="k")
    with pytest.raises(TypeError, match="each path is a str or a Path, not None"):
        path_list([None], name="x")
    with pytest.raises(TypeError, match="not None"):
        path_list(None, name="x")
    with pytest.raises(InputError, match="no paths given"):
        path_list([], name="x")
    assert path_list(("a", Path("b")), name="x") == [Path("a"), Path("b")]
    assert text_list(["a"], name="k") == ("a",)


@pytest.mark.parametrize(
    ("value", "kwargs", "error"),
    [
        (math.nan, {}, "must be a finite number, got nan"),
        (math.inf, {"low": 0}, "must be a finite number, got inf"),
        (-1, {"low": 0}, "must be at least 0, got -1"),
        (0, {"low": 0, "low_open": True}, "must be above 0, got 0"),
        (2, {"low": 0.5, "high": 0.999}, "must be at least 0.5 and at most 0.999, got 2"),
        (True, {}, "a number, not a bool"),
        ("3", {}, "a number, not a str"),
        (1.5, {"integer": True}, "an integer, not a float"),
    ],
)
def test_numbers_are_finite_and_in_range(value: object, kwargs: dict[str, float], error: str) -> None:
    with pytest.raises((TypeError, InputError), match=error):
        number(value, name="n", **kwargs)  # type: ignore[arg-type]


def test_the_analysis_api_refuses_what_it_cannot_use() -> None:
    from tracekit.analyzers import analyze
    from tracekit.analyzers.compare import Noise
    from tracekit.pipeline import analyze_paths
    from tracekit.pipeline.runs import compare_paths
    from tracekit.readers import load_run
    from tracekit.reports.base import renderer

    with pytest.raises(TypeError, match=r"load_run: paths: a list of paths, not a single str"):
        load_run(str(HEALTHY))  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"load_run: paths: no paths given"):
        load_run([])
    with pytest.raises(TypeError, match=r"load_run: comm_kernels: a list of str"):
        load_run([HEALTHY], comm_kernels="^nccl")
    with pytest.raises(InputError, match=r"load_run: jobs: must be at least 1"):
        load_run([HEALTHY], jobs=0)
    with pytest.raises(TypeError, match=r"analyze: run must be a Run .*, not None"):
        analyze(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"analyze: steps is a str"):
        analyze(load_run([HEALTHY]), steps=["2"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"compare_paths: a: a list of paths"):
        compare_paths(str(HEALTHY), str(HEALTHY))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"analyze_paths: paths: a list of paths"):
        analyze_paths(HEALTHY)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"renderer: no format 'pdf' \(the formats: terminal, json, md, html\)"):
        renderer("pdf")
    with pytest.raises(InputError, match=r"Noise: level: must be at least 0.5 and at most 0.999, got 2"):
        Noise(level=2)
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(InputError, match=r"Noise: threshold_pct"):
            Noise(threshold_pct=bad)
    assert Noise(threshold_pct=0).threshold_pct == 0


def test_the_cli_refuses_a_threshold_that_is_not_a_number(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracekit.cli.main import cli

    for value in ("nan", "inf", "-1"):
        result = CliRunner().invoke(cli, ["compare", str(HEALTHY), str(HEALTHY), "--noise-threshold", value])
        assert result.exit_code == 2, result.output
        assert "--noise-threshold" in result.output
