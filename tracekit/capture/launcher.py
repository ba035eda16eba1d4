"""Start N ranks of the runner through tracekit's launcher (:mod:`tracekit.capture.spawn`: torchrun's
work on one node without importing torch), or accelerate's for an accelerate config.

``capture(config)`` is the whole ``tracekit capture``: check the config and ``out_dir``,
start the ranks in a fresh folder beside ``out_dir``, wait for them at most ``timeout``
seconds, and on success put the new capture in place of the previous one
(:mod:`tracekit.capture.outdir`). On failure, timeout or interruption every process of the
run is stopped (:mod:`tracekit.capture.processes`), the previous capture is left as it was,
and the error names the rank at fault (:mod:`tracekit.capture.ranks`) and the failed
run's folder, kept as ``<out_dir>.tracekit-failed``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.capture import accelerate_configs, files, outdir, processes, ranks
from tracekit.capture.config import CaptureConfig, to_dict
from tracekit.capture.deadline import deadline
from tracekit.capture.extras import require_capture
from tracekit.capture.plausible import ConfigWarning, implausible
from tracekit.capture.ranks import CaptureError
from tracekit.capture.summary import write_summary
from tracekit.capture.supervisor import PARENT_ENV
from tracekit.capture.workloads import names_file, resolve, workload_folder
from tracekit.errors import InputError, TracekitError
from tracekit.locks import folder_lock
from tracekit.results.capture import load_capture_summary

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.capture.outdir import FolderKind
    from tracekit.results.capture import CaptureSummary

__all__ = [
    "CaptureError",
    "CaptureInterrupted",
    "CaptureTimeout",
    "build_command",
    "capture",
    "check_nsys",
    "free_port",
    "rank_env",
    "run_ranks",
]

#: The module every rank of a capture runs.
RUNNER = "tracekit.capture.runner"
#: tracekit's launcher of the ranks.
SPAWN: Final = "tracekit.capture.spawn"
#: What tracekit's launcher imports before it forks two ranks or more (:mod:`tracekit.capture.spawn`):
#: torch and accelerate, and torch._dynamo, which every rank imported (2.4 s of CPU each).
PRELOAD: Final = ("torch", "accelerate", "torch._dynamo")


class CaptureTimeout(CaptureError):
    """The run took longer than its ``timeout`` and was stopped."""


class CaptureInterrupted(CaptureError):
    """``tracekit`` was interrupted (Ctrl-C, SIGTERM) while the ranks ran; exit 128 + signal."""

    exit_code = 130


def free_port() -> int:
    """A TCP port free on this machine now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def nsys_prefix(out_dir: Path) -> list[str]:
    """The Nsight Systems wrapper: trace CUDA, NVTX and OS runtime in the profiled steps."""
    return [
        "nsys",
        "profile",
        "-t",
        "cuda,nvtx,osrt",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--trace-fork-before-exec=true",
        "--force-overwrite=true",
        "-o",
        str(out_dir / "capture"),
    ]


def build_command(
    config: CaptureConfig,
    config_file: Path,
    *,
    port: int,
    out_dir: Path | None = None,
    launcher: str | None = None,
    module: str = RUNNER,
    args: Sequence[str] = (),
) -> list[str]:
    """The command that starts every rank, writing into ``out_dir`` (default: the config's),
    through ``launcher`` ("accelerate" or "tracekit"; default: :func:`default_launcher`);
    each rank runs ``python -m module CONFIG FOLDER *args``."""
    if launcher is None:
        launcher = default_launcher(config)
    folder = Path(config.out_dir) if out_dir is None else out_dir
    target = ["-m", module, str(config_file), str(folder), *args]
    if launcher == "accelerate":
        if config.accelerate_config:  # a file, or the name of a shipped config (ddp, fsdp, ...)
            setup = ["--config_file", str(accelerate_configs.resolve(config.accelerate_config))]
        else:
            setup = ["--num_machines", "1", "--mixed_precision", config.mixed_precision, "--dynamo_backend", "no"]
            setup += ["--multi_gpu"] if config.nproc > 1 else []
        cmd = [sys.executable, "-m", "accelerate.commands.launch", *setup]
        cmd += ["--num_processes", str(config.nproc), "--main_process_port", str(port), *target]
    else:
        # ranks forked from the launcher, which imports torch, accelerate and torch._dynamo once for them all
        preload = ["--preload", ",".join(PRELOAD)] if config.nproc > 1 else []
        cmd = [sys.executable, "-m", SPAWN, *preload, str(config.nproc), "127.0.0.1", str(port), *target]
    return [*nsys_prefix(folder), *cmd] if config.nsys else cmd


def default_launcher(config: CaptureConfig) -> str:
    """accelerate's launcher where it does what tracekit's does not: an ``accelerate_config`` to
    apply (FSDP, DeepSpeed, its DDP settings). Else tracekit's (:mod:`tracekit.capture.spawn`),
    which gives several ranks the variables torchrun does, as accelerate's launcher itself runs
    torchrun for them, and one rank none, as accelerate's does: mixed precision and DDP's options
    reach the ranks through the ``Accelerator`` each makes. It saves importing accelerate's
    launcher and torch in the launcher, about 4 s of every capture on this 2-core machine."""
    return "accelerate" if config.accelerate_config else "tracekit"


def check_nsys(config: CaptureConfig) -> None:
    """``--nsys`` needs the nsys command and a GPU."""
    if not config.nsys:
        return
    if shutil.which("nsys") is None:
        raise InputError("--nsys needs Nsight Systems: no `nsys` on PATH")
    require_capture("--nsys", nvtx=True)
    import torch

    if not torch.cuda.is_available():
        raise InputError("--nsys needs a CUDA GPU: torch sees none")


@dataclass(frozen=True)
class _Outcome:
    """How the launcher's wait ended: its exit code, the timeout, or a signal to tracekit."""

    returncode: int | None = None
    timed_out: bool = False
    interrupted_by: int | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


#: How often a capture with a ``progress`` callback reads where its ranks are (seconds).
PROGRESS_POLL_S: Final = 0.5
#: A capture's progress: the steps the slowest rank has begun, of how many, and where it is.
Progress = Callable[[int, int, str], None]


def capture(config: CaptureConfig, progress: Progress | None = None) -> CaptureSummary:
    """Run the capture described by ``config``; returns the summary written to summary.json.

    ``out_dir`` is replaced only when the run succeeds; otherwise it keeps the previous capture
    and the error (a :class:`~tracekit.errors.TracekitError`) names the failed run's folder.
    ``progress`` is told, every :data:`PROGRESS_POLL_S`, how far the slowest rank is.
    """
    require_capture("capture")  # torch and accelerate, before any rank starts
    check_nsys(config)
    accelerate_configs.check(config.accelerate_config)  # a missing file, DeepSpeed not installed
    target = outdir.check(config.out_dir)
    with deadline("capture", config.timeout):  # importing the workload's module runs its code here
        resolve(config.workload)  # an import error fails here, before N ranks start
    for sentence in implausible(config):  # one line each, and the capture goes on as configured
        warnings.warn(sentence, ConfigWarning, stacklevel=2)
    with folder_lock(target):  # a second capture into the same folder is refused, naming this one
        return _capture_into(config, target, progress)


def _capture_into(config: CaptureConfig, target: Path, progress: Progress | None = None) -> CaptureSummary:
    """The capture of ``config`` into ``target`` (checked, and locked by this process)."""
    had_capture = outdir.is_capture(target)
    outdir.clear_stale(target)  # the folders of a run killed before it could remove them
    folder = outdir.staging(target)
    try:
        outcome = _launch(config, folder, progress=progress)
        if outcome.ok and all(state.done for state in ranks.read_states(folder, config.nproc)):
            with processes.interrupts_ignored():  # a late Ctrl-C does not cut the swap in half
                summary = _summary(folder, config)
                for rank in range(config.nproc):
                    for name in files.status_names(rank):
                        (folder / name).unlink(missing_ok=True)
                outdir.commit(folder, target)
            return summary
    except BaseException:
        with processes.interrupts_ignored():
            outdir.keep_failed(folder, target)
        raise
    with processes.interrupts_ignored():
        kept = outdir.keep_failed(folder, target)
    error = _error(outcome, config, kept)
    if had_capture:
        error.reason += f"; {target} keeps the previous capture"
    raise error


def rank_env(config: CaptureConfig, run_id: str) -> dict[str, str]:
    """The environment the launch starts with, which every rank inherits: this process's, then
    the config's ``env`` (which may not set tracekit's own variables: the config refuses them),
    then tracekit's own (the run's id, the supervisors' parent); ``OMP_NUM_THREADS`` is 1 unless
    set (accelerate's launch passes it on to the ranks)."""
    env = {**os.environ, **config.env, "PYTHONUNBUFFERED": "1", "TRACEKIT_CAPTURE": "1"}
    env.update({processes.RUN_ENV: run_id, PARENT_ENV: str(os.getpid())})
    env.setdefault("OMP_NUM_THREADS", "1")
    # a workload's file is imported from its folder, in the ranks as here (a module in the current
    # folder needs nothing: the ranks run ``python -m``, which looks there first)
    if names_file(config.workload) and (folder := workload_folder(config.workload)) is not None:
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([folder, *(p for p in paths if p != folder)])
    return env


def _launch(
    config: CaptureConfig,
    folder: Path,
    *,
    module: str = RUNNER,
    args: Sequence[str] = (),
    progress: Progress | None = None,
) -> _Outcome:
    """Start the ranks writing into ``folder`` and wait for them; stop every process of the run
    on timeout or interruption (and any left behind); tell ``progress`` where the ranks are."""
    config_file = folder / files.CONFIG
    files.write_json_atomic(config_file, to_dict(config))
    port = config.main_process_port or free_port()
    cmd = build_command(config, config_file, port=port, out_dir=folder, module=module, args=args)
    run_id = uuid.uuid4().hex
    env = rank_env(config, run_id)
    proc: subprocess.Popen[bytes] | None = None
    with (folder / files.LOG).open("wb") as log, processes.interrupts_raise(), processes.Orphans() as orphans:
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            _wait(proc, config, folder, progress)
            return _Outcome(returncode=proc.returncode)
        except subprocess.TimeoutExpired:
            return _Outcome(timed_out=True)
        except KeyboardInterrupt as exc:
            return _Outcome(interrupted_by=getattr(exc, "signum", signal.SIGINT))
        finally:
            if proc is not None:
                with processes.interrupts_ignored():
                    processes.stop(proc, run_id, orphans)


def _wait(proc: subprocess.Popen[bytes], config: CaptureConfig, folder: Path, progress: Progress | None) -> None:
    """Wait for the launcher (``subprocess.TimeoutExpired`` past the timeout), telling ``progress``
    where the slowest rank is."""
    if progress is None:
        proc.wait(timeout=config.timeout)
        return
    end = None if config.timeout is None else time.monotonic() + config.timeout
    total = config.warmup_steps + config.measured_steps
    while True:
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(proc.args, config.timeout or 0.0)
        try:
            proc.wait(timeout=PROGRESS_POLL_S if left is None else min(PROGRESS_POLL_S, left))
            return
        except subprocess.TimeoutExpired:
            states = ranks.read_states(folder, config.nproc)
            seen = [s.position for s in states if s.position is not None and not s.done]
            if not any(s.position is not None or s.done for s in states):
                # no rank has begun: the launcher imports what they share, or they import it
                seen = [ranks.Position("start")]
            if seen:
                slowest = min(seen, key=lambda p: p.key)
                progress(max(slowest.step, 0) if slowest.stage == "steps" else 0, total, slowest.describe())


def run_ranks(
    config: CaptureConfig, folder: Path, target: Path, *, module: str, args: Sequence[str] = (), kind: FolderKind
) -> None:
    """Run ``module`` on every rank (as a capture runs its ranks: same launcher, supervisors,
    timeout and clean-up) writing into the fresh ``folder``. When a rank did not finish, the
    folder is kept as ``<target>.tracekit-failed`` and the error names the rank at fault."""
    try:
        outcome = _launch(config, folder, module=module, args=args)
    except BaseException:
        with processes.interrupts_ignored():
            outdir.keep_failed(folder, target, kind)
        raise
    if outcome.ok and all(state.done for state in ranks.read_states(folder, config.nproc)):
        return
    with processes.interrupts_ignored():
        kept = outdir.keep_failed(folder, target, kind)
    raise _error(outcome, config, kept)


def _summary(folder: Path, config: CaptureConfig) -> CaptureSummary:
    summary_path = folder / files.SUMMARY
    if summary_path.exists():
        return load_capture_summary(summary_path.read_bytes(), source=str(summary_path))
    return write_summary(folder, config=to_dict(config))


def _error(outcome: _Outcome, config: CaptureConfig, folder: Path) -> TracekitError:
    """The one-line error of a run that did not succeed; ``folder`` holds what it left."""
    logs = folder / files.LOG
    if outcome.timed_out:
        states = ranks.read_states(folder, config.nproc)
        return CaptureTimeout(
            f"timed out after {config.timeout:g} s (the timeout setting): {ranks.hang(states)}; "
            f"every process of the run was stopped; logs: {logs}"
        )
    if outcome.interrupted_by is not None:
        error = CaptureInterrupted(
            f"interrupted by {signal.Signals(outcome.interrupted_by).name}: every process of the run was stopped; "
            f"logs: {logs}"
        )
        error.exit_code = 128 + outcome.interrupted_by
        return error
    return ranks.failure(ranks.read_states(folder, config.nproc), folder, outcome.returncode or 0)
