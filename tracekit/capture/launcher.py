"""Start N ranks of the runner through accelerate's launcher (torchrun as fallback).

``capture(config)`` is the whole ``tracekit capture``: check the config, start the ranks,
and return the summary. A rank that fails stops the run with its rank number and the
last lines of its error (:mod:`tracekit.capture.ranks`); the traces of ranks that finished
stay in ``out_dir``.
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

from tracekit.capture import files, ranks
from tracekit.capture.config import CaptureConfig, to_dict
from tracekit.capture.ranks import CaptureError
from tracekit.capture.summary import write_summary
from tracekit.capture.supervisor import PARENT_ENV
from tracekit.capture.workloads import resolve
from tracekit.errors import InputError
from tracekit.results.capture import load_capture_summary

if TYPE_CHECKING:
    from tracekit.results.capture import CaptureSummary

LOG = files.LOG

__all__ = ["CaptureError", "build_command", "capture", "check_nsys", "free_port"]


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
    own = ("rank*.pt.trace.json.gz", "phases.rank*.json", files.SUMMARY)
    for pattern in (*own, ".rank*.error.txt", ".rank*.done", ".rank*.exit", ".rank*.progress"):
        for old in out_dir.glob(pattern):
            old.unlink()


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
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRACEKIT_CAPTURE": "1", PARENT_ENV: str(os.getpid())}
    env.setdefault("OMP_NUM_THREADS", "1")
    with (out_dir / LOG).open("w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    states = ranks.read_states(out_dir, config.nproc)
    if proc.returncode != 0 or not all(state.done for state in states):
        raise ranks.failure(states, out_dir, proc.returncode)
    summary_path = out_dir / files.SUMMARY
    if summary_path.exists():
        return load_capture_summary(summary_path.read_bytes(), source=str(summary_path))
    return write_summary(out_dir, config=to_dict(config))
