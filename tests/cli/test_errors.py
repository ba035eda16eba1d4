"""Every error the CLI prints is one line, never a traceback: bad input is exit code 2, a bug 3."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

import msgspec
import polars as pl
import pytest

from tests.cli.test_cli import tracekit
from tracekit.cli import commands
from tracekit.cli.main import DEBUG_ENV, EXIT_INTERNAL, main
from tracekit.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``tracekit ARGS`` in this process: the exit code and stderr."""
    monkeypatch.setattr("sys.argv", ["tracekit", *args])
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    else:
        code = 0
    return code, capsys.readouterr().err


def raising(exc: BaseException) -> object:
    def command(*args: object, **kwargs: object) -> None:
        raise exc

    return command


def panic() -> BaseException:
    panic_type = pl.exceptions.PanicException
    return panic_type("index out of bounds: the len is 0 but the index is 3\nnote: run with RUST_BACKTRACE=1")


UNEXPECTED = {
    "KeyError": KeyError("verdict"),
    "TypeError": TypeError("'NoneType' object is not subscriptable"),
    "ZeroDivisionError": ZeroDivisionError("division by zero"),
    "AssertionError": AssertionError(),
    "RecursionError": RecursionError("maximum recursion depth exceeded"),
    "ComputeError": pl.exceptions.ComputeError("cannot compare\n\nThis error occurred with the following context:\n"),
    "ValidationError": msgspec.ValidationError("Expected `int`, got `str` - at `$.x`"),
    "OSError": OSError(errno.EIO, "Input/output error"),
    "PanicException": panic(),
}


@pytest.mark.parametrize("name", sorted(UNEXPECTED))
def test_an_unexpected_error_is_one_line_saying_it_is_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    monkeypatch.setattr(commands, "run_report", raising(UNEXPECTED[name]))
    code, err = run_main(monkeypatch, capsys, "report", str(tmp_path / "a.json"), "--md", str(tmp_path / "a.md"))
    assert code == EXIT_INTERNAL == 3
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("tracekit: internal error (a bug in tracekit, not in your input): " + name)
    assert "tracekit/cli/main.py:" in err and "(report)" in err  # where: the innermost line of tracekit's code
    assert "report it on" in err and "--debug" in err and f"{DEBUG_ENV}=1" in err


@pytest.mark.parametrize("how", ["env", "option"])
def test_debug_shows_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    monkeypatch.setattr(commands, "run_report", raising(KeyError("verdict")))
    args = ["report", str(tmp_path / "a.json"), "--md", str(tmp_path / "a.md")]
    if how == "env":
        monkeypatch.setenv(DEBUG_ENV, "1")
    else:
        monkeypatch.delenv(DEBUG_ENV, raising=False)
        args.insert(0, "--debug")
    code, err = run_main(monkeypatch, capsys, *args)
    assert code == 3
    assert err.startswith("Traceback") and "KeyError: 'verdict'" in err
    assert err.splitlines()[-1].startswith("tracekit: internal error")


def test_interrupts_and_exits_are_not_caught_as_bugs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("report", str(tmp_path / "a.json"), "--md", str(tmp_path / "a.md"))
    monkeypatch.setattr(commands, "run_report", raising(KeyboardInterrupt()))
    code, err = run_main(monkeypatch, capsys, *args)
    assert code == 130 and err.strip() == "tracekit: aborted"
    monkeypatch.setattr(commands, "run_report", raising(SystemExit(7)))
    assert run_main(monkeypatch, capsys, *args)[0] == 7


def test_input_errors_are_one_line_even_with_newlines_and_controls(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = InputError("bad\nthing\x1b[2J", path="/tmp/evil\n\x1b]8;;http://x\x07name.json")
    monkeypatch.setattr(commands, "run_report", raising(error))
    code, err = run_main(monkeypatch, capsys, "report", "x.json", "--md", "y.md")
    assert code == 2
    assert err == "tracekit: error: /tmp/evil \\x1b]8;;http://x\\x07name.json: bad thing\\x1b[2J\n"


def test_an_os_error_naming_a_file_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = PermissionError(errno.EACCES, "Permission denied", "/cache/events/x.parquet")
    monkeypatch.setattr(commands, "run_report", raising(error))
    code, err = run_main(monkeypatch, capsys, "report", "x.json", "--md", "y.md")
    assert (code, err) == (2, "tracekit: error: /cache/events/x.parquet: Permission denied\n")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["analyze"], "Missing argument 'PATHS...'"),
        (["analyze", ".", "--top", "0"], "Invalid value for '--top'"),
        (["analyze", ".", "--jsn", "x"], "No such option '--jsn'"),
        (["report", "x.json", "--md"], "Option '--md' requires an argument"),
        (["nonsense"], "No such command 'nonsense'"),
    ],
)
def test_usage_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, err = run_main(monkeypatch, capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("tracekit: error: ") and says in err, err
    assert "--help" in err


def test_help_and_version_still_exit_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["tracekit", "--help"])
    main()  # returns: exit code 0
    assert "--debug" in capsys.readouterr().out
    assert run_main(monkeypatch, capsys, "--version")[0] == 0


def test_a_polars_panic_in_a_real_process_is_one_line(tmp_path: Path) -> None:
    code = (
        "import polars as pl\n"
        "import tracekit.cli.commands as c\n"
        "def boom(*a, **k):\n"
        "    raise pl.exceptions.PanicException('assertion failed: offset <= len')\n"
        "c.run_report = boom"
    )
    result = tracekit("report", tmp_path / "a.json", "--md", tmp_path / "a.md", env_code=code)
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "PanicException: assertion failed: offset <= len" in result.stderr
