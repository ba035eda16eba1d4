"""An output option that names an input (or another output) is refused before anything is read."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from tests.cli.test_cli import tracekit
from tests.factories import simple_step, write_kineto
from tracekit.cli.paths import check_outputs
from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def one_line_error(result: object, *needles: str) -> str:
    """The single stderr line of a refused command (exit code 2), checked to hold ``needles``."""
    assert getattr(result, "returncode", None) == 2
    stderr: str = getattr(result, "stderr", "")
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("option", ["--json", "--html", "--md", "--details"])
def test_an_output_naming_the_input_trace_is_refused_before_reading(
    tmp_path: Path, cache_dir: Path, option: str
) -> None:
    trace = tmp_path / "rank0.json"
    trace.write_bytes(b"not a trace at all")  # were it read, the error would say so
    result = tracekit("analyze", trace, option, trace)
    one_line_error(result, str(trace), option, "input", "overwritten")
    assert trace.read_bytes() == b"not a trace at all"
    assert list(cache_dir.rglob("*.parquet")) == []  # nothing decoded


def _same_file(tmp_path: Path, trace: Path) -> dict[str, Callable[[], Path]]:
    def symlink() -> Path:
        link = tmp_path / "out" / "link.json"
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(trace)
        return link

    def hardlink() -> Path:
        link = tmp_path / "hard.json"
        os.link(trace, link)
        return link

    return {
        "same spelling": lambda: trace,
        "another spelling": lambda: tmp_path / "traces" / ".." / "traces" / "." / "nested" / trace.name,
        "symlink to it": symlink,
        "hard link": hardlink,
    }


@pytest.mark.parametrize("how", ["same spelling", "another spelling", "symlink to it", "hard link"])
@pytest.mark.parametrize("given", ["file", "folder"])
def test_every_spelling_of_an_input_is_refused(tmp_path: Path, how: str, given: str) -> None:
    folder = tmp_path / "traces"
    (folder / "nested").mkdir(parents=True)
    trace = write_kineto(folder / "nested" / "rank1.json", simple_step(), rank=1)
    write_kineto(folder / "rank0.json", simple_step(), rank=0)
    output = _same_file(tmp_path, trace)[how]()
    with pytest.raises(InputError, match=r"--json names .* which this command reads") as error:
        check_outputs({"--json": output}, [trace if given == "file" else folder])
    assert "\n" not in error.value.message and str(output) in error.value.message


def test_a_trace_a_symlink_in_the_folder_points_to_is_an_input(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    elsewhere = write_kineto(tmp_path / "elsewhere" / "rank3.json", simple_step(), rank=3)
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "rank3.json").symlink_to(elsewhere)
    with pytest.raises(InputError, match="a trace file in an input folder"):
        check_outputs({"--md": elsewhere}, [folder])


@pytest.mark.parametrize("given", ["file", "folder"])
def test_the_capture_summary_beside_the_traces_is_an_input(tmp_path: Path, given: str) -> None:
    trace = write_kineto(tmp_path / "rank0.json", simple_step())
    summary = tmp_path / "summary.json"
    summary.write_text("{}")
    with pytest.raises(InputError, match="capture summary"):
        check_outputs({"--json": summary}, [trace if given == "file" else tmp_path])


def test_other_files_in_an_input_folder_are_fine(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step())
    (tmp_path / "notes.md").write_text("mine")
    check_outputs({"--md": tmp_path / "notes.md", "--json": tmp_path / "new.json", "--html": None}, [tmp_path])


@pytest.mark.parametrize("alias", ["same", "symlink"])
def test_two_outputs_naming_one_file_are_refused(tmp_path: Path, alias: str) -> None:
    trace = write_kineto(tmp_path / "rank0.json", simple_step())
    out = tmp_path / "report.out"
    other = out
    if alias == "symlink":
        out.write_text("old")
        other = tmp_path / "alias.out"
        other.symlink_to(out)
    result = tracekit("analyze", trace, "--md", out, "--html", other)
    one_line_error(result, "--html and --md name the same file")
    with pytest.raises(InputError, match="--json and --details name the same file"):
        check_outputs({"--json": tmp_path / "x", "--details": tmp_path / "x"}, [trace])


def test_report_refuses_to_overwrite_the_saved_analysis(tmp_path: Path) -> None:
    trace = write_kineto(tmp_path / "rank0.json", simple_step())
    saved = tmp_path / "saved.analysis"
    assert tracekit("analyze", trace, "--json", saved).returncode == 0
    before = saved.read_bytes()
    one_line_error(tracekit("report", saved, "--md", saved), "--md names an input file")
    one_line_error(tracekit("report", saved, "--md", tmp_path / "a", "--html", tmp_path / "a"), "the same file")
    assert saved.read_bytes() == before
    assert not (tmp_path / "a").exists()
