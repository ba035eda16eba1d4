"""tracekit's launcher of the ranks (:mod:`tracekit.capture.spawn`), on tiny Python "ranks" (no torch)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracekit.capture.spawn import exit_status, in_this_interpreter, rank_variables


def spawn(
    nproc: int, code: str, *, timeout: float = 60, preload: str = "", fork: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tracekit.capture.spawn"]
    cmd += ["--preload", preload] if preload else []
    cmd += [str(nproc), "127.0.0.1", "29511", "-c", code]
    env = {**os.environ, "TRACEKIT_SPAWN_FORK": "1" if fork else "0"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "own-process"])
def test_every_rank_gets_torchruns_variables(tmp_path: Path, fork: bool) -> None:
    code = (
        "import json, os, sys; "
        f"open(os.path.join({str(tmp_path)!r}, os.environ['RANK'] + '.json'), 'w').write(json.dumps(dict(os.environ)))"
    )
    done = spawn(3, code, fork=fork)
    assert done.returncode == 0, done.stderr
    seen = {r: json.loads((tmp_path / f"{r}.json").read_text()) for r in range(3)}
    for r, env in seen.items():
        assert env["RANK"] == env["LOCAL_RANK"] == env["ROLE_RANK"] == str(r)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["ROLE_WORLD_SIZE"] == "3"
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["GROUP_RANK"]) == ("127.0.0.1", "29511", "0")
    assert len({env["TORCHELASTIC_RUN_ID"] for env in seen.values()}) == 1  # one run


def test_one_rank_gets_none(tmp_path: Path) -> None:
    """As under accelerate's launcher of one process: no ``LOCAL_RANK``, so no process group."""
    code = f"import os, pathlib; pathlib.Path({str(tmp_path / 'seen')!r}).write_text(os.environ.get('LOCAL_RANK', '-'))"
    assert spawn(1, code).returncode == 0
    assert (tmp_path / "seen").read_text() == "-"


def test_the_variables_are_torchruns() -> None:
    """The names torchrun's agent sets for a worker (torch 2.13's ``LocalElasticAgent``)."""
    names = set(rank_variables(1, 2, "127.0.0.1", 1, "x"))
    assert names == {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_WORLD_SIZE",
        "ROLE_NAME",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS",
        "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_USE_AGENT_STORE",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    }


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "own-process"])
def test_a_failed_rank_stops_the_others_and_its_code_is_the_launchers(fork: bool) -> None:
    """Rank 1 exits 3 at once; rank 0 would sleep a minute (waiting for it in a collective)."""
    code = "import os, sys, time; sys.exit(3) if os.environ['RANK'] == '1' else time.sleep(60)"
    began = time.monotonic()
    done = spawn(2, code, timeout=30, fork=fork)
    assert done.returncode == 3
    assert time.monotonic() - began < 20  # stopped by SIGTERM, not waited for


def test_a_rank_killed_by_a_signal_is_128_plus_it() -> None:
    assert exit_status(-signal.SIGKILL) == 128 + signal.SIGKILL
    assert exit_status(0) == 0 and exit_status(2) == 2
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL) if os.environ['RANK'] == '0' else None"
    assert spawn(2, code).returncode == 128 + signal.SIGKILL


def test_sigterm_reaches_the_ranks(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = f"import os, time, pathlib; pathlib.Path({str(ready)!r} + os.environ['RANK']).touch(); time.sleep(60)"
    cmd = [sys.executable, "-m", "tracekit.capture.spawn", "2", "127.0.0.1", "1", "-c", code]
    proc = subprocess.Popen(cmd)
    try:
        deadline = time.monotonic() + 30
        while not all(Path(f"{ready}{r}").exists() for r in range(2)) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM  # the ranks ended by it, the first one's status
    finally:
        proc.kill()


def test_a_forked_rank_ends_as_python_ends_a_program(tmp_path: Path) -> None:
    """An exception: its traceback on stderr and exit 1 (the launcher's status); the rank's
    threads are joined and its atexit functions run, as at the end of any program."""
    code = (
        "import atexit, os, pathlib, threading, time\n"
        f"out = pathlib.Path({str(tmp_path)!r})\n"
        "atexit.register(lambda: (out / ('atexit' + os.environ['RANK'])).touch())\n"
        "def late(): time.sleep(0.3); (out / ('thread' + os.environ['RANK'])).touch()\n"
        "threading.Thread(target=late).start()\n"
        "if os.environ['RANK'] == '1': raise ValueError('rank one failed')\n"
    )
    done = spawn(2, code)
    assert done.returncode == 1
    assert "ValueError: rank one failed" in done.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"atexit0", "atexit1", "thread0", "thread1"}


def test_the_preloaded_modules_are_there_before_the_ranks_import_them(tmp_path: Path) -> None:
    """``--preload``: each rank is forked with them imported; one that does not exist is left to
    the ranks (which would fail on it themselves)."""
    code = f"import sys, pathlib; pathlib.Path({str(tmp_path / 'seen')!r}).write_text(str('json.tool' in sys.modules))"
    assert spawn(1, code, preload="json.tool,no_such_module_here").returncode == 0
    assert (tmp_path / "seen").read_text() == "True"
    assert spawn(1, code, fork=False, preload="json.tool").returncode == 0
    assert (tmp_path / "seen").read_text() == "False"  # a process of its own imports what it imports


def test_a_forked_rank_runs_a_module_as_python_m_does(tmp_path: Path) -> None:
    """``-m MODULE ARGS``: ``__name__`` is ``__main__``, ``sys.argv`` the module's file and ARGS."""
    (tmp_path / "rankmod.py").write_text(
        "import os, sys, pathlib, json\n"
        "if __name__ == '__main__':\n"
        "    pathlib.Path(sys.argv[1], 'argv' + os.environ['RANK']).write_text(json.dumps(sys.argv))\n"
    )
    cmd = [sys.executable, "-m", "tracekit.capture.spawn", "2", "127.0.0.1", "1", "-m", "rankmod", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 0, done.stderr
    for r in range(2):
        argv = json.loads((tmp_path / f"argv{r}").read_text())
        assert argv == [str(tmp_path / "rankmod.py"), str(tmp_path)]


def test_only_a_module_or_code_runs_in_a_fork() -> None:
    """A script, or an option of the interpreter first: a process of its own, as ``python`` runs it."""
    assert in_this_interpreter(["-m", "x.y", "a"]) is not None
    assert in_this_interpreter(["-c", "pass"]) is not None
    assert in_this_interpreter(["train.py", "-m", "x"]) is None
    assert in_this_interpreter(["-X", "importtime", "-m", "x"]) is None
    assert in_this_interpreter(["-m"]) is None


def test_the_fork_s_warning_of_threads_is_not_every_capture_s_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.12+ warns (DeprecationWarning) at a fork from a process with several threads:
    numpy's import leaves one, so every capture's log would say it."""
    import warnings

    from tracekit.capture import spawn as launcher

    def fork() -> int:
        warnings.warn("This process is multi-threaded, use of fork() may lead to deadlocks", DeprecationWarning, 2)
        return 4321  # the parent's side: the "child" is not run

    monkeypatch.setattr(launcher.os, "fork", fork)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        forked = launcher._fork({}, lambda: None)
    assert forked.pid == 4321 and forked.returncode is None


def test_a_fork_reaped_meanwhile_is_ended_not_an_error() -> None:
    """The launcher's signal handler polls the ranks between two bytecodes of its loop's poll:
    a rank reaped there is gone for the loop's ``waitpid`` (ECHILD), which must not raise."""
    from tracekit.capture.spawn import _Forked

    pid = os.fork()
    if pid == 0:
        os._exit(3)
    forked = _Forked(pid)
    os.waitpid(pid, 0)  # reaped elsewhere, its status lost to this handle
    assert forked.poll() == 0
    assert forked.returncode == 0  # ended: the launcher's loop stops waiting for it
