"""Capture failures, through the CLI and the API: a rank that crashes, exits without a word,
hangs past the timeout, or fails to build its workload; a workload that does not import; an
interrupted run; a bad ``out_dir``. Each is one line naming the rank at fault (no traceback),
the previous capture stays byte for byte, and no process of the run is left behind."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.capture.test_outdir import make_capture
from tracekit.capture.config import load_config
from tracekit.capture.launcher import CaptureError, capture
from tracekit.capture.outdir import FAILED_SUFFIX, TMP_INFIX
from tracekit.capture.processes import find_by_env
from tracekit.errors import InputError

pytest.importorskip("torch")
pytest.importorskip("accelerate")

FEW_STEPS = {
    "warmup_steps": "1",
    "measured_steps": "2",
    "profiler.wait": "0",
    "profiler.warmup": "0",
    "profiler.active": "2",
    "batch_size": "8",
}
TINY = '{"hidden": 16, "depth": 1, "samples": 256}'
#: Set in the test's environment, so inherited by every process a capture starts.
MARK = "TRACEKIT_TEST_RUN"

FAULTY = """
import os
import sys
import time
from pathlib import Path

import torch

from tracekit.capture.workloads import mlp


def _with_fault(ctx, rank, call, fault):
    w = mlp(ctx, hidden=16, depth=1, samples=256)
    calls = {"n": 0}

    def loss_fn(out, target):
        calls["n"] += 1
        if ctx.rank == rank and calls["n"] == call:  # call 2: the first measured step (step 1)
            fault()
        return torch.nn.functional.cross_entropy(out, target)

    w.loss_fn = loss_fn
    return w


def crash(ctx, rank=1, call=2):
    def fault():
        raise RuntimeError("loss exploded on purpose")

    return _with_fault(ctx, rank, call, fault)


def silent(ctx, rank=1, call=2, code=3):
    return _with_fault(ctx, rank, call, lambda: os._exit(code))


def early_exit(ctx, rank=1, call=2):
    return _with_fault(ctx, rank, call, lambda: sys.exit(0))


def hang(ctx, rank=1, call=2, flag=""):
    def fault():
        if flag:
            Path(flag).write_text("hanging")
        time.sleep(3600)

    return _with_fault(ctx, rank, call, fault)


def factory_fails(ctx, rank=3):
    if ctx.rank == rank:
        raise ValueError(f"no shard for rank {ctx.rank}")
    return mlp(ctx, hidden=16, depth=1, samples=256)
"""
BAD_SYNTAX = "from tracekit.capture.workloads import mlp\n\ndef make(ctx:\n    return mlp(ctx)\n"
RAISES_AT_IMPORT = "import os\n\nDATA = os.environ['TK_NO_SUCH_VARIABLE']\n\ndef make(ctx):\n    pass\n"


@pytest.fixture(scope="module")
def workloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("workloads")
    (folder / "tkfaulty.py").write_text(FAULTY)
    (folder / "tkbadsyntax.py").write_text(BAD_SYNTAX)
    (folder / "tkbadimport.py").write_text(RAISES_AT_IMPORT)
    return folder


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good capture, made once: each test copies it where its failing run will go."""
    out = tmp_path_factory.mktemp("previous") / "capture"
    capture(load_config(None, {**FEW_STEPS, "nproc": "2", "out_dir": str(out), "workload_args": TINY}))
    return out


@pytest.fixture
def out(previous: Path, tmp_path: Path) -> Path:
    target = tmp_path / "out"
    shutil.copytree(previous, target)
    return target


@pytest.fixture
def mark(workloads: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's marker in the environment of every process it starts; the workloads importable."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARK, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(workloads), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(workloads))
    return value


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*")}


def assert_kept(out: Path, before: dict[str, str], mark: str) -> Path:
    """The previous capture is untouched, nothing of the run is left running or half-written;
    returns the failed run's folder."""
    assert snapshot(out) == before
    assert "summary.json" in before and any(name.startswith("rank1.pt.trace") for name in before)
    assert find_by_env(MARK, mark) == []
    assert not [p for p in out.parent.iterdir() if TMP_INFIX in p.name]
    failed = out.with_name(out.name + FAILED_SUFFIX)
    assert (failed / "capture.log").exists()
    return failed


def tracekit(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tracekit", "capture", *map(str, args)]
    cmd += [f"--{key}={value}" for key, value in FEW_STEPS.items()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line of the error: stderr holds only the start line and it, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) == 2, result.stderr
    assert lines[0].startswith("capturing ")
    return lines[1]


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_crashing_rank_is_named_and_the_previous_capture_kept(out: Path, mark: str) -> None:
    before = snapshot(out)
    result = tracekit("--workload=tkfaulty:crash", "--nproc", "2", "--out_dir", out)
    assert result.returncode == 1
    line = error_line(result)
    failed = assert_kept(out, before, mark)
    assert line.startswith("tracekit: error: rank 1 failed first")
    assert "RuntimeError: loss exploded on purpose" in line and "tkfaulty.py" in line
    assert f"(all of it: {failed / '.rank1.error.txt'})" in line and (failed / ".rank1.error.txt").exists()
    assert line.endswith(f"; {out} keeps the previous capture")


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_rank_that_calls_os_exit_is_named(out: Path, mark: str) -> None:
    before = snapshot(out)
    settings = {**FEW_STEPS, "nproc": "3", "out_dir": str(out), "workload": "tkfaulty:silent"}
    config = load_config(None, {**settings, "workload_args": '{"rank": 2}'})
    with pytest.raises(CaptureError) as caught:
        capture(config)
    message = caught.value.message
    assert message.startswith("rank 2 failed first") and "exited with code 3 without a Python error" in message
    assert "\n" not in message
    assert_kept(out, before, mark)


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_rank_that_calls_sys_exit_0_early_is_named(out: Path, mark: str) -> None:
    before = snapshot(out)
    result = tracekit("--workload=tkfaulty:early_exit", "--nproc", "2", "--out_dir", out)
    assert result.returncode == 1
    line = error_line(result)
    assert line.startswith("tracekit: error: rank 1 failed first")
    assert "the workload called sys.exit(0) before the capture finished" in line
    assert_kept(out, before, mark)


def start_hanging(out: Path, flag: Path, *extra: str) -> tuple[subprocess.Popen[str], float]:
    """``tracekit capture`` of 2 ranks, rank 1 hanging in its first measured step; returns the
    process and when the hang began (seen from here: its flag file written)."""
    cmd = [sys.executable, "-m", "tracekit", "capture", "--workload=tkfaulty:hang", "--nproc", "2", *extra]
    cmd += ["--out_dir", str(out), f'--workload_args={{"flag": "{flag}"}}']
    cmd += [f"--{key}={value}" for key, value in FEW_STEPS.items()]
    # SIGINT as at a terminal: a process started in the background (nohup, `&` in a script)
    # inherits SIGINT ignored, and Python then keeps ignoring it, as it should
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509  (no threads here)
    )
    deadline = time.monotonic() + 120
    while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert flag.exists(), proc.communicate()
    return proc, time.monotonic()


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_hung_rank_times_out_is_named_and_every_process_stopped(out: Path, mark: str, tmp_path: Path) -> None:
    before = snapshot(out)
    proc, hung = start_hanging(out, tmp_path / "hanging", "--timeout", "30")
    stdout, stderr = proc.communicate(timeout=300)
    # the timeout counts from the launch, before the hang: the run ends within 20 s of it (the
    # stop's grace periods are 5 + 5 s), however long a loaded machine took to start the ranks
    assert time.monotonic() - hung < 30 + 20
    result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert result.returncode == 1
    line = error_line(result)
    assert line.startswith("tracekit: error: timed out after 30 s (the timeout setting): rank 1 did not finish: ")
    assert "it was still in forward of step 1, behind every other rank (rank 0 was still in backward of step 1" in line
    assert "every process of the run was stopped" in line
    assert_kept(out, before, mark)


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_stops_every_process_and_keeps_the_previous_capture(
    out: Path, mark: str, tmp_path: Path, sig: signal.Signals
) -> None:
    before = snapshot(out)
    proc, _ = start_hanging(out, tmp_path / "hanging")
    proc.send_signal(sig)  # a Ctrl-C reaches tracekit only: the launcher runs in its own session
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert stderr.strip().splitlines()[-1].startswith(f"tracekit: error: interrupted by {sig.name}: every process")
    assert "Traceback" not in stderr
    assert_kept(out, before, mark)


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_factory_failing_on_rank_3_only_names_rank_3(out: Path, mark: str) -> None:
    before = snapshot(out)
    config = load_config(None, {**FEW_STEPS, "nproc": "4", "out_dir": str(out), "workload": "tkfaulty:factory_fails"})
    with pytest.raises(InputError) as caught:  # bad input (exit 2), known on rank 3 only: named
        capture(config)
    message = caught.value.message
    assert message.startswith("rank 3 failed first")
    assert "workload 'tkfaulty:factory_fails' raised ValueError: no shard for rank 3" in message
    assert "tkfaulty.py" in message  # the user's frame, not tracekit's re-raise
    assert_kept(out, before, mark)


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        ("tkbadsyntax:make", r"tkbadsyntax has a syntax error \(.*; .*tkbadsyntax\.py, line 3\)"),
        (
            "tkbadimport:make",
            r"importing tkbadimport raised KeyError: 'TK_NO_SUCH_VARIABLE' \(.*tkbadimport\.py, line 3\)",
        ),
    ],
)
def test_a_workload_that_does_not_import_is_one_line(tmp_path: Path, mark: str, workload: str, expected: str) -> None:
    out = tmp_path / "out"
    make_capture(out, "previous")  # stands for an earlier capture: no rank starts, so none is made
    before = snapshot(out)
    result = tracekit(f"--workload={workload}", "--nproc", "2", "--out_dir", out)
    assert result.returncode == 2
    assert re.fullmatch(f"tracekit: error: workload '{workload}': {expected}", error_line(result))
    with pytest.raises(InputError, match=expected):
        capture(load_config(None, {"nproc": "2", "out_dir": str(out), "workload": workload}))
    assert snapshot(out) == before and sorted(p.name for p in out.parent.iterdir()) == ["out"]  # nothing started
    assert find_by_env(MARK, mark) == []


def test_an_out_dir_that_cannot_be_one_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    cases = {
        tmp_path / "file": "out_dir is an existing file, not a folder",
        tmp_path / "file" / "sub": f"out_dir cannot be created: {tmp_path / 'file'} is a file",
        tmp_path / "mine": "out_dir holds files that are not a tracekit capture (thesis.tex)",
    }
    for path, reason in cases.items():
        result = tracekit("--nproc", "2", "--out_dir", path)
        assert result.returncode == 2
        assert error_line(result).startswith(f"tracekit: error: {path}: {reason}")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == '["file", "mine"]'
