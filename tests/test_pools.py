"""Worker pools never outlive tracekit: killed at once on SIGTERM or Ctrl-C, and ending on their own
when tracekit is killed outright (a SIGTERM to ``analyze`` left its workers for over 5 minutes, issue 33)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tracekit.pools import apart_map

ROOT = Path(__file__).resolve().parents[1]

#: A pool of 2 workers, each on an item that takes 10 minutes; prints their pids, then waits for
#: them inside the command line's signal handling.
BUSY_POOL = textwrap.dedent(
    """
    import signal, sys, time
    from tracekit.cli.signals import Terminated, termination_raises
    from tracekit.pools import WorkerPool

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (a background job ignores it)
    with termination_raises():
        try:
            with WorkerPool(2) as pool:
                futures = [pool.submit(time.sleep, 600) for _ in range(2)]
                while len(pool._processes) < 2:
                    time.sleep(0.05)
                time.sleep(1)  # the items are running
                print(*pool._processes, flush=True)
                futures[0].result()
        except Terminated as exc:
            sys.exit(128 + exc.signum)
    """
)


def _start(code: str) -> tuple[subprocess.Popen[str], list[int]]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    workers = [int(pid) for pid in proc.stdout.readline().split()]
    assert len(workers) == 2
    return proc, workers


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def gone_within(pids: list[int], seconds: float) -> bool:
    """Whether every process of ``pids`` is gone (or a zombie) within ``seconds``: a process
    sent SIGKILL dies when the kernel next schedules it, which on a loaded machine is not at once."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_kills_the_busy_workers_at_once(sig: signal.Signals) -> None:
    proc, workers = _start(BUSY_POOL)
    try:
        started = time.monotonic()
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        assert time.monotonic() - started < 30  # not the 10 minutes of the items
        assert code == (128 + sig if sig == signal.SIGTERM else -sig)  # Ctrl-C: Python ends by SIGINT itself
        assert gone_within(workers, 10)
    finally:
        proc.kill()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_workers_end_when_tracekit_is_killed_outright() -> None:
    """SIGKILL (or SIGTERM's default action) runs no cleanup: the workers see their parent gone."""
    proc, workers = _start(BUSY_POOL)
    try:
        proc.kill()
        proc.wait(timeout=30)
        assert gone_within(workers, 20)
    finally:
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def _doubled_here_only(item: tuple[int, int, str]) -> int:
    """``2 x``, in the process ``parent``; elsewhere (a child) it fails or hangs as told."""
    parent, x, elsewhere = item
    if os.getpid() != parent:
        if elsewhere == "fails":
            raise RuntimeError("a child's failure")
        if elsewhere == "hangs":
            time.sleep(600)
        if elsewhere == "pid":
            return os.getpid()
    return 2 * x


@pytest.mark.parametrize("elsewhere", ["fails", "hangs"])
def test_apart_map_runs_here_what_a_child_could_not(elsewhere: str) -> None:
    items = [(os.getpid(), x, elsewhere) for x in range(4)]
    clock = time.monotonic()
    assert apart_map(_doubled_here_only, items, min_wait_s=0.5) == [0, 2, 4, 6]
    assert time.monotonic() - clock < 60  # a hung child is killed at the deadline, not waited for


def test_apart_map_runs_each_item_after_the_first_in_a_child_of_its_own() -> None:
    pids = apart_map(_doubled_here_only, [(os.getpid(), 0, "pid"), (os.getpid(), 1, "pid"), (os.getpid(), 2, "pid")])
    assert pids[0] == 0 and len(set(pids[1:])) == 2 and os.getpid() not in pids
    assert not any(alive(p) for p in pids[1:])  # each child has ended


def test_apart_map_runs_here_what_does_not_pickle() -> None:
    assert apart_map(lambda x: x + 1, [1, 2]) == [2, 3]  # a lambda cannot be sent: both run here
