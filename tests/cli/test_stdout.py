"""``-`` as the file of ``--json`` / ``--md`` is stdout: that report alone, everything else on stderr."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

HEALTHY = SAMPLES / "captures" / "healthy"
STRAGGLER = SAMPLES / "captures" / "straggler"


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m tracekit ARGS`` in ``cwd`` (where a file named ``-`` would land)."""
    return run_tracekit(*args, cwd=cwd)


@pytest.mark.parametrize(
    ("command", "schema"),
    [
        (["analyze", HEALTHY, "--no-cache"], "tracekit.analysis"),
        (["compare", HEALTHY, STRAGGLER, "--no-cache"], "tracekit.comparison"),
    ],
)
@pytest.mark.parametrize("stdout", ["-", "/dev/stdout"])
def test_json_dash_is_json_alone_on_stdout(tmp_path: Path, command: list[str | Path], schema: str, stdout: str) -> None:
    result = run(*command, "--json", stdout, "--md", tmp_path / "report.md", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["schema"] == schema  # nothing else on stdout
    assert not (tmp_path / "-").exists()
    assert "verdict" in result.stderr.lower() or "step" in result.stderr.lower()  # the terminal report moved
    assert f"wrote {tmp_path / 'report.md'}" in result.stderr
    assert (tmp_path / "report.md").read_text().startswith("## ")


def test_md_dash_and_report(tmp_path: Path) -> None:
    saved = tmp_path / "a.json"
    assert run("analyze", HEALTHY, "--no-cache", "--json", saved, cwd=tmp_path).returncode == 0
    result = run("report", saved, "--md", "-", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("## tracekit verdict")
    assert not (tmp_path / "-").exists()
    assert result.stderr == ""


def test_two_outputs_on_stdout_are_refused(tmp_path: Path) -> None:
    result = run("analyze", HEALTHY, "--json", "-", "--md", "-", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "tracekit: error: --json and --md both write to stdout (-): give all but one of them a file"
    ]
    result = run("analyze", HEALTHY, "--details", "-", cwd=tmp_path)
    assert result.returncode == 2
    assert "--details -" in result.stderr


def test_a_tool_report_on_stdout(tmp_path: Path) -> None:
    """``audit-params`` (one process, one batch): its JSON record alone on stdout."""
    result = run("audit-params", "--json", "-", "--md", tmp_path / "audit.md", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["schema"] == "tracekit.param_audit"
    assert f"wrote {tmp_path / 'audit.md'}" in result.stderr
    assert not (tmp_path / "-").exists()


def test_an_output_that_is_a_stream_is_written_to_it(tmp_path: Path) -> None:
    """``--json /dev/stderr``: a stream, not a file to rename over (once refused: 'No such file')."""
    result = run("analyze", HEALTHY, "--json", "/dev/stderr", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    body = result.stderr[result.stderr.index("{") :]
    assert json.loads(body[: body.rindex("}") + 1])["schema"] == "tracekit.analysis"
