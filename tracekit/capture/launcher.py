"""Start N ranks of the runner through accelerate's launcher (torchrun as fallback).

``capture(config)`` is the whole ``tracekit capture``: check the config, start the ranks,
and return the summary. A rank that fails stops the run with its rank number and the
last lines of its error; the traces of ranks that finished stay in ``out_dir``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.capture import files
from tracekit.capture.config import CaptureConfig, to_dict
from tracekit.capture.summary import write_summary
from tracekit.capture.workloads import resolve
from tracekit.errors import InputError, TracekitError
from tracekit.results.capture import load_capture_summary

if TYPE_CHECKING:
    from tracekit.results.capture import CaptureSummary

LOG = "capture.log"
ERROR_TAIL_LINES = 3


class CaptureError(TracekitError):
    """A rank of the capture crashed while training."""

    exit_code = 1


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


def build_command(config: CaptureConfig, config_file: Path, *, port: int, launcher: str | None = None) -> list[str]:
    """The command that starts every rank (``launcher``: "accelerate" or "torchrun")."""
    if launcher is None:
        launcher = "accelerate" if importlib.util.find_spec("accelerate") else "torchrun"
    target = ["-m", "tracekit.capture.runner", str(config_file)]
    if launcher == "accelerate":
        if config.accelerate_config:
            setup = ["--config_file", config.accelerate_config]
        else:
            setup = ["--num_machines", "1", "--mixed_precision", config.mixed_precision, "--dynamo_backend", "no"]
            setup += ["--multi_gpu"] if config.nproc > 1 else []
        cmd = [sys.executable, "-m", "accelerate.commands.launch", *setup]
        cmd += ["--num_processes", str(config.nproc), "--main_process_port", str(port), *target]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(config.nproc)]
        cmd += ["--master_addr", "127.0.0.1", "--master_port", str(port), *target]
    return [*nsys_prefix(Path(config.out_dir)), *cmd] if config.nsys else cmd


def check_nsys(config: CaptureConfig) -> None:
    """``--nsys`` needs the nsys command and a GPU."""
    if not config.nsys:
        return
    if shutil.which("nsys") is None:
        raise InputError("--nsys needs Nsight Systems: no `nsys` on PATH")
    import torch

    if not torch.cuda.is_available():
        raise InputError("--nsys needs a CUDA GPU: torch sees none")


def _clean(out_dir: Path) -> None:
    for pattern in ("rank*.pt.trace.json.gz", "phases.rank*.json", ".rank*.error.txt", files.SUMMARY):
        for old in out_dir.glob(pattern):
            old.unlink()


def _failure(out_dir: Path, returncode: int) -> TracekitError:
    # the first rank to fail is the cause; the others fail after it (a peer closed the connection)
    errors = sorted(out_dir.glob(".rank*.error.txt"), key=lambda p: p.stat().st_mtime_ns)
    if errors:
        texts = {int(p.name[5:].split(".")[0]): p.read_text(encoding="utf-8") for p in errors}
        first_rank, text = next(iter(texts.items()))
        headline = text.splitlines()[0] if text else "failed"
        others = ",".join(str(r) for r in texts if r != first_rank)
        same = all(t.splitlines()[0] == headline for t in texts.values() if t)
        if same and "tracekit.errors.InputError" in text:
            return InputError(headline)
        body = [line.strip() for line in text.splitlines()[1:] if line.strip() and not line.startswith("Traceback")]
        tail = " | ".join(body[-ERROR_TAIL_LINES:])
        also = f" (then rank(s) {others} failed too)" if others else ""
        where = out_dir / files.error_name(first_rank)
        return CaptureError(
            f"rank {first_rank} failed first{also}: {headline}; last lines: {tail} (all of it: {where})"
        )
    log = out_dir / LOG
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
    tail = " | ".join(line.strip() for line in lines[-ERROR_TAIL_LINES:] if line.strip())
    return CaptureError(f"the launcher exited with code {returncode}; last lines of {log}: {tail}")


def capture(config: CaptureConfig) -> CaptureSummary:
    """Run the capture described by ``config``; returns the summary written to summary.json."""
    check_nsys(config)
    resolve(config.workload)  # an import error fails here, before N ranks start
    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean(out_dir)
    config_file = out_dir / "capture_config.json"
    files.write_json_atomic(config_file, to_dict(config))
    cmd = build_command(config, config_file, port=config.main_process_port or free_port())
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRACEKIT_CAPTURE": "1"}
    env.setdefault("OMP_NUM_THREADS", "1")
    with (out_dir / LOG).open("w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0 or any(out_dir.glob(".rank*.error.txt")):
        raise _failure(out_dir, proc.returncode)
    summary_path = out_dir / files.SUMMARY
    if summary_path.exists():
        return load_capture_summary(summary_path.read_bytes(), source=str(summary_path))
    return write_summary(out_dir, config=to_dict(config))
