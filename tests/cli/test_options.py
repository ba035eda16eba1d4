"""The options several commands share are declared once, and reach a command as one argument."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from tracekit.cli.commands import analyze_options
from tracekit.cli.main import cli
from tracekit.cli.options import analysis_options, output_options
from tracekit.pipeline import AnalyzeOptions


def _given(*args: str) -> tuple[dict[str, Any], dict[str, Path | None]]:
    """What a command decorated with both groups receives for the command line ``args``."""
    seen: list[Any] = []

    @click.command()
    @output_options(json="J", md="M", html="H")
    @click.option("--top", type=int, default=3)
    @analysis_options
    def command(outputs: dict[str, Path | None], top: int, analysis: dict[str, Any]) -> None:
        seen.extend([analysis, outputs, top])

    result = CliRunner().invoke(command, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen[2] == 3
    return seen[0], seen[1]


def test_the_analysis_options_are_analyze_options_fields_and_their_defaults() -> None:
    analysis, outputs = _given()
    assert analyze_options(analysis) == AnalyzeOptions()
    assert set(analysis) <= {f.name for f in dataclasses.fields(AnalyzeOptions)}
    assert outputs == {"json": None, "md": None, "html": None}


def test_given_options_arrive_by_field_name() -> None:
    analysis, outputs = _given("--html", "h.html", "--ranks", "0-2,5", "--no-cache", "--json", "j.json", "--jobs", "3")
    options = analyze_options(analysis)
    assert (options.ranks, options.use_cache, options.jobs, options.window) == ({0, 1, 2, 5}, False, 3, "steps")
    # in the order the command declares them, whatever the order given
    assert list(outputs.items()) == [("json", Path("j.json")), ("md", None), ("html", Path("h.html"))]


def test_analyze_compare_and_sweep_share_one_declaration() -> None:
    def names(command: str) -> list[str]:
        return [p.name for p in cli.commands[command].params if p.name is not None]

    shared = names("analyze")[names("analyze").index("window") :]
    choices = ["window", "steps", "include_warmup", "comm_kernels"]  # AnalysisChoices' fields, in order
    assert shared == [*choices, "ranks", "rank", "jobs", "cache_dir", "use_cache", "executor", "scheduler"]
    for command in ("compare", "sweep"):
        assert names(command)[-len(shared) :] == shared
