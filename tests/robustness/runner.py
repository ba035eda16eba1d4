"""Running ``tracekit`` the way a user does: in this process (click's runner) or a subprocess with a timeout."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

from tests.robustness.sources import loads

if TYPE_CHECKING:
    from collections.abc import Sequence

REPO = Path(__file__).resolve().parents[2]
#: Seconds a CLI run in a subprocess may take before it counts as a hang (a normal one takes 1-2 s;
#: these runs share the CI machine's two cores with gloo captures, so the margin is wide).
TIMEOUT_S = 60.0
#: The same in this process (no special file runs here; SIGALRM interrupts Python code only).
TIMEOUT_HERE_S = 60.0
#: Address space of a CLI run in a subprocess, so that reading /dev/zero fails instead of eating the machine.
PROCESS_MEMORY = 2 << 30


@dataclass(frozen=True)
class Output:
    """What one CLI run left: exit code (None: it hung), streams and the reports it wrote."""

    code: int | None
    stdout: str
    stderr: str
    doc: Any = None
    md: str | None = None
    html: str | None = None
    seconds: float = 0.0

    @property
    def everything(self) -> str:
        return "\n".join(t for t in (self.stdout, self.stderr, self.md or "") if t)


class _Hang(BaseException):
    """Raised by SIGALRM in an in-process run that takes too long."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Hang


def run_cli(
    args: list[str],
    *,
    process: bool = False,
    shell: str | None = None,
    timeout: float | None = None,
    color: bool = True,
) -> Output:
    """``tracekit ARGS`` through :func:`tracekit.cli.main.main`: in this process, or a subprocess.

    ``shell`` is a bash command line run instead (``$TRACEKIT`` runs tracekit), for paths only a
    shell makes (process substitution). ``color``: in this process, keep click's escape sequences
    as on a terminal (False: strip them, as on a pipe).
    """
    started = time.perf_counter()
    if process or shell is not None:
        code, out, err = _run_process(args, shell=shell, timeout=timeout or TIMEOUT_S)
    else:
        code, out, err = _run_here(args, timeout=timeout or TIMEOUT_HERE_S, color=color)
    return Output(code, out, err, seconds=time.perf_counter() - started)


def _run_here(args: list[str], *, timeout: float, color: bool = True) -> tuple[int | None, str, str]:
    """``color``: click keeps escape sequences, as it does on a terminal (False: it strips them,
    as on a pipe)."""
    from tracekit.cli.main import main

    runner = CliRunner()
    code: int | None = 0
    with runner.isolation(color=color) as (out, err, _):
        saved_argv, sys.argv = sys.argv, ["tracekit", *args]
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except _Hang:
            code = None
        except BaseException:  # what Python would print, and its exit status
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            sys.argv = saved_argv
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode(errors="backslashreplace"), err.getvalue().decode(errors="backslashreplace")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (PROCESS_MEMORY, PROCESS_MEMORY))


def _run_process(args: list[str], *, shell: str | None, timeout: float) -> tuple[int | None, str, str]:
    tracekit = [sys.executable, "-m", "tracekit"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if shell is not None:
        env["TRACEKIT"] = " ".join(tracekit)
        command = ["bash", "-c", shell]
    else:
        command = [*tracekit, *args]
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_limit_memory,  # noqa: PLW1509  (no threads are started meanwhile)
    )
    code: int | None
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return code, out.decode(errors="backslashreplace"), err.decode(errors="backslashreplace")


def analyze(
    paths: Sequence[Path | str],
    out_dir: Path,
    *,
    process: bool = False,
    shell_paths: str | None = None,
    cache_dir: Path | None = None,
    md: bool = True,
    html: bool = False,
    timeout: float | None = None,
) -> Output:
    """``tracekit analyze PATHS --json [--md] [--html]`` into ``out_dir``; the reports read back.

    ``shell_paths`` replaces PATHS with bash text (``<(cat FILE)``); ``cache_dir`` None means ``--no-cache``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = {"json": out_dir / "out.json"}
    if md:
        reports["md"] = out_dir / "out.md"
    if html:
        reports["html"] = out_dir / "out.html"
    for path in reports.values():
        path.unlink(missing_ok=True)
    options = [x for fmt, path in reports.items() for x in (f"--{fmt}", str(path))]
    options += ["--no-cache"] if cache_dir is None else ["--cache-dir", str(cache_dir)]
    shell = None
    if shell_paths is not None:
        shell = f"$TRACEKIT analyze {' '.join(map(str, paths))} {shell_paths} " + " ".join(map(_quote, options))
    out = run_cli(["analyze", *map(str, paths), *options], process=process, shell=shell, timeout=timeout)
    doc = loads(reports["json"].read_bytes()) if reports["json"].exists() else None
    text = reports["md"].read_text(encoding="utf-8") if md and reports["md"].exists() else None
    page = reports["html"].read_text(encoding="utf-8") if html and reports["html"].exists() else None
    return Output(out.code, out.stdout, out.stderr, doc, text, page, out.seconds)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
