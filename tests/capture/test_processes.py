"""Stopping every process of a run, and the rank supervisor (small Python processes, no torch)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tracekit.capture import files, processes
from tracekit.capture.supervisor import PARENT_ENV

ROOT = str(Path(__file__).resolve().parents[2])

# a launcher that starts, like torchrun, a "rank" in a session of its own (out of the launcher's
# process group) that ignores SIGTERM, and that rank a worker of its own
TREE = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    rank = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); print('up', flush=True); "
        "time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", rank], start_new_session=True, stdout=subprocess.PIPE)
    child.stdout.readline()
    print("ready", flush=True)
    time.sleep(60)
    """
)


def test_stop_ends_every_process_of_the_run_even_outside_its_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "TERM_GRACE_S", 0.5)
    run_id = uuid.uuid4().hex
    env = {**os.environ, processes.RUN_ENV: run_id}
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE], env=env, start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    assert len(processes.find(run_id)) == 3  # the launcher, the rank and its worker: not this process
    assert processes.stop(proc, run_id) is True
    assert processes.find(run_id) == [] and proc.returncode is not None
    assert processes.stop(proc, run_id) is False  # nothing left to stop


def test_sigterm_raises_while_waiting_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with processes.interrupts_raise(), pytest.raises(processes.Interrupted) as caught:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, before os.kill returns
    assert caught.value.signum == signal.SIGTERM and isinstance(caught.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) == before


def supervised(folder: Path, body: str) -> list[str]:
    """The command running ``body`` as rank 2 under its supervisor."""
    head = "from pathlib import Path\nfrom tracekit.capture import supervisor\n"
    head += f"supervisor.fork(Path({str(folder)!r}), 2)\n"
    return [sys.executable, "-c", head + body]


def run_supervised(folder: Path, body: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(supervised(folder, body), env=env, capture_output=True, text=True, timeout=60, check=False)


def exit_record(folder: Path) -> dict[str, object]:
    record: dict[str, object] = json.loads((folder / files.exit_name(2)).read_text())
    return record


def test_the_supervisor_records_a_silent_exit_and_exits_alike(tmp_path: Path) -> None:
    before = time.time_ns()
    assert run_supervised(tmp_path, "import os\nos._exit(3)").returncode == 3
    record = exit_record(tmp_path)
    assert record["exit_code"] == 3 and record["signal"] is None and record["rank"] == 2
    assert isinstance(record["time_ns"], int) and record["time_ns"] >= before


def test_the_supervisor_records_a_signal_and_ends_by_it(tmp_path: Path) -> None:
    result = run_supervised(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGUSR1)")
    assert result.returncode == -signal.SIGUSR1
    assert exit_record(tmp_path)["signal"] == signal.SIGUSR1


def test_the_supervisor_stops_its_rank_when_tracekit_is_gone(tmp_path: Path) -> None:
    tracekit = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    marker = tmp_path / "started"
    body = f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(60)"
    env = {**os.environ, "PYTHONPATH": ROOT, PARENT_ENV: str(tracekit.pid)}
    rank = subprocess.Popen(supervised(tmp_path, body), env=env)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    tracekit.kill()  # SIGKILL: tracekit cannot stop anything itself
    tracekit.wait()
    started = time.monotonic()
    assert rank.wait(timeout=30) == -signal.SIGTERM
    assert time.monotonic() - started < 5
    assert exit_record(tmp_path)["signal"] == signal.SIGTERM
