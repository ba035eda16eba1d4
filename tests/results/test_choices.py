"""Issue 49: the analysis choices are declared once, from the command line to the map."""

from __future__ import annotations

from dataclasses import fields

import pytest
from click.testing import CliRunner

from benchmarks.many_ranks import synthetic_run
from tracekit.analyzers import analyze, run_analysis
from tracekit.analyzers.context import Options
from tracekit.cli.main import cli
from tracekit.errors import InputError
from tracekit.pipeline import AnalyzeOptions
from tracekit.pipeline.mapped import Settings
from tracekit.results.choices import CHOICES, AnalysisChoices
from tracekit.results.vocab import WindowKind


@pytest.mark.parametrize("kind", [AnalyzeOptions, Settings, Options], ids=lambda k: k.__name__)
def test_every_options_object_extends_the_choices_and_declares_none_again(kind: type) -> None:
    assert issubclass(kind, AnalysisChoices)
    assert not set(kind.__annotations__) & set(CHOICES), f"{kind.__name__} declares a choice again"
    assert [f.name for f in fields(kind)][: len(CHOICES)] == list(CHOICES)


def test_a_window_given_as_text_is_the_enum_and_a_wrong_one_names_the_choices() -> None:
    assert AnalyzeOptions(window="gpu_span").window is WindowKind.GPU_SPAN
    assert Options(window="gpu_span").window is WindowKind.GPU_SPAN
    with pytest.raises(ValueError, match="'steps', 'gpu_span'"):
        AnalyzeOptions(window="span")
    with pytest.raises(TypeError, match="not one str"):
        AnalysisChoices(comm_kernels="nccl")
    assert AnalysisChoices(comm_kernels=["a", "b"]).comm_kernels == ("a", "b")


@pytest.mark.parametrize("command", ["analyze", "compare", "sweep"])
def test_the_cli_options_are_made_from_the_choices(command: str) -> None:
    """Each field's flag and help reach every command that analyzes traces."""
    shown = " ".join(CliRunner().invoke(cli, [command, "--help"], terminal_width=400).output.split())
    for f in fields(AnalysisChoices):
        flag = f.metadata["cli"]
        assert flag.name in shown and " ".join(flag.help.split()) in shown, (command, flag.name)


def test_the_choices_reach_the_map_by_name_or_as_one_object() -> None:
    run = synthetic_run(2, steps=4, kernels=3)
    by_name = run_analysis(run, steps="2-").analysis
    assert by_name == run_analysis(run, AnalysisChoices(steps="2-")).analysis
    assert by_name.steps.selection == "2-"
    assert analyze(run, window="gpu_span").gpu_breakdown.window == "gpu_span"
    with pytest.raises(TypeError, match="no choice named windw"):
        analyze(run, windw="gpu_span")
    with pytest.raises(TypeError, match="analyze: steps is a str"):
        analyze(run, steps=3)


def test_a_wrong_value_through_the_api_is_an_input_error() -> None:
    with pytest.raises(InputError, match="run_analysis: window must be one of"):
        run_analysis(synthetic_run(1, steps=2, kernels=1), window="span")
