"""A process of the run that left both its session and tracekit's environment marker (``setsid`` with
an empty environment, then its parent gone) is still stopped with the run: found by the process tree
(it survived the capture before, issue 33)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.test_pools import alive
from tracekit.capture import processes

#: A launcher whose "rank" starts a process that calls setsid with an empty environment, then the
#: rank ends (the escaped process is an orphan): it prints the escaped process's pid.
ESCAPING = textwrap.dedent(
    """
    import os, subprocess, sys, time
    rank = (
        "import subprocess, sys; "
        "p = subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(600)'], env={}, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid, flush=True)"
    )
    out = subprocess.run([sys.executable, "-c", rank], capture_output=True, text=True, check=True).stdout
    print(out.strip(), flush=True)
    time.sleep(float(sys.argv[1]))
    """
)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the process tree is read from /proc")
@pytest.mark.parametrize("launcher_s", [0.0, 60.0], ids=["launcher-ended", "launcher-running"])
def test_a_process_that_left_the_session_and_the_environment_is_stopped(
    monkeypatch: pytest.MonkeyPatch, launcher_s: float
) -> None:
    monkeypatch.setattr(processes, "TERM_GRACE_S", 2.0)
    run_id = uuid.uuid4().hex
    env = {**os.environ, processes.RUN_ENV: run_id}
    escaped = 0
    with processes.Orphans() as orphans:
        proc = subprocess.Popen(
            [sys.executable, "-c", ESCAPING, str(launcher_s)],
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            escaped = int(proc.stdout.readline())
            if launcher_s == 0:
                proc.wait(timeout=60)
            assert alive(escaped) and escaped not in processes.find(run_id)  # no marker: find() misses it
            assert processes.stop(proc, run_id, orphans) is True
            deadline = time.monotonic() + 20
            while alive(escaped) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(escaped)
        finally:
            proc.kill()
            if escaped and alive(escaped):
                os.kill(escaped, signal.SIGKILL)


ESCAPING_FACTORY = """
import os, subprocess, sys
from tracekit.capture.workloads import mlp

def make(ctx, **kwargs):
    child = subprocess.Popen(
        ["setsid", sys.executable, "-c", "import time; time.sleep(600)"],
        env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    with open(os.path.join(os.environ["TK_ESCAPED_DIR"], f"{child.pid}.pid"), "w"):
        pass
    return mlp(ctx, hidden=16, depth=1, samples=256)
"""


@pytest.mark.e2e
def test_a_capture_leaves_no_process_that_escaped_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real capture of 2 gloo ranks whose factory starts such a process on each rank."""
    pytest.importorskip("torch")
    from tracekit.capture.config import load_config
    from tracekit.capture.launcher import capture

    (tmp_path / "tkescape.py").write_text(ESCAPING_FACTORY)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("TK_ESCAPED_DIR", str(pids))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = {"warmup_steps": "1", "measured_steps": "2", "profiler.wait": "0", "profiler.warmup": "0"}
    settings |= {"profiler.active": "2", "batch_size": "8"}
    config = load_config(
        None, {**settings, "nproc": "2", "out_dir": str(tmp_path / "out"), "workload": "tkescape:make"}
    )
    seen: list[tuple[int, int, str]] = []  # the progress a terminal shows (issue 46, item 8)
    capture(config, progress=lambda done, total, where: seen.append((done, total, where)))
    # polled every 0.5 s while the ranks start (importing torch alone takes seconds), step and finish;
    # "starting up" before any rank has begun (the launcher imports torch for them first)
    assert seen and all(total == 3 and 0 <= done <= 3 for done, total, _ in seen), seen
    assert seen[0] == (0, 3, "starting up")
    escaped = [int(p.stem) for p in pids.glob("*.pid")]
    try:
        assert len(escaped) == 2
        deadline = time.monotonic() + 20
        while any(alive(p) for p in escaped) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in escaped if alive(p)]
    finally:
        for pid in escaped:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
