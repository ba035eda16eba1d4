"""tracekit's launcher of a capture's ranks on this machine: what torchrun does on one node,
without importing torch.

``python -m tracekit.capture.spawn NPROC ADDR PORT ARGS...`` starts NPROC processes
``python ARGS...``, each with the variables torchrun gives a rank (:func:`rank_variables`), and
waits for them. One rank gets none: it runs as under accelerate's launcher of one process, with
no process group unless the capture names a backend (the runner then makes a group of one).
When one rank fails, the others get SIGTERM (SIGKILL after
:data:`~tracekit.capture.processes.TERM_GRACE_S`): they would wait for it in their next
collective until the capture's timeout. It exits 0 when every rank did, else as the first rank
that failed (128 + the signal that killed it). SIGTERM, SIGINT and SIGHUP are passed on to the
ranks.

Why not torchrun: its agent imports torch, 2.7 s of every capture on a 2-core machine, and
takes about a second more to exit; the ranks import torch anyway. It does nothing else a capture
uses: no restarts (a capture that fails is reported, not retried), no rendezvous across nodes.
Its store is the one difference the ranks see: rank 0 serves the rendezvous at ADDR:PORT
(``init_process_group``'s ``env://``), as under accelerate's launcher; torchrun's
agent served it and said so with ``TORCHELASTIC_USE_AGENT_STORE=True``.

Each rank is a fork of this process (where ARGS are ``-m MODULE ...`` or ``-c CODE ...``, as the
capture's are), which runs ARGS as ``python ARGS`` would. ``--preload torch,accelerate,torch._dynamo``
(the launcher's, for two ranks or more) imports those modules here first, once: every rank has them
without importing them again: they were most of what a rank of a small capture costs (the
healthy sample's 8 ranks on a 2-core machine, in turns: 7-9 s of CPU and 6-7 s wall forked,
27-30 s and 15-16 s each a process of its own). Nothing here touches a GPU, so the ranks fork before CUDA starts, as a
DataLoader's workers do; Nsight Systems follows them (``--trace-fork-before-exec``).
``TRACEKIT_SPAWN_FORK=0`` starts each rank as a process of its own instead (``python ARGS``).
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import os
import runpy
import signal
import subprocess
import sys
import time
import uuid
import warnings
from typing import TYPE_CHECKING, Final, NoReturn, Protocol

from tracekit.capture import files
from tracekit.capture.processes import TERM_GRACE_S

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType

#: Seconds between looks at the ranks.
POLL_S: Final = 0.05
_PASSED_ON: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: "0": each rank a process of its own (``python ARGS``), not a fork of the launcher.
FORK_ENV: Final = "TRACEKIT_SPAWN_FORK"


def rank_variables(rank: int, nproc: int, addr: str, port: int, run_id: str) -> dict[str, str]:
    """The variables torchrun (``torch.distributed.run``, one node, no restarts) sets for
    ``rank`` of ``nproc``, with ``run_id`` as its ``TORCHELASTIC_RUN_ID``."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(nproc),
        "ROLE_NAME": "default",
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


def exit_status(code: int) -> int:
    """A child's ``returncode`` as a shell reports it: a signal's death is 128 + the signal."""
    return 128 - code if code < 0 else code


class _Rank(Protocol):
    """What the launcher asks of a rank's process (a :class:`subprocess.Popen`'s)."""

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...


class _Forked:
    """A rank forked from this process, as :class:`subprocess.Popen` shows one: ``returncode``
    is None while it runs, then its exit code, or minus the signal that ended it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # reaped meanwhile: by this poll called from the signal handler (which set the
                # code), or elsewhere, whose status is lost (Popen says 0 then, and so does this)
                if self.returncode is None:
                    self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


def in_this_interpreter(args: Sequence[str]) -> Callable[[], None] | None:
    """What runs ``python ARGS`` in this interpreter (``-m MODULE ...`` and ``-c CODE ...``, with
    ``sys.argv`` as Python sets it); None for any other ARGS (an option of the interpreter first,
    a script: only a new interpreter does as it would)."""
    if len(args) < 2 or args[0] not in ("-m", "-c"):
        return None
    what, rest = args[1], list(args[2:])
    if args[0] == "-m":

        def module() -> None:
            sys.argv = [what, *rest]  # runpy makes the first the module's file, as python -m does
            runpy.run_module(what, run_name="__main__", alter_sys=True)

        return module

    def code() -> None:
        sys.argv = ["-c", *rest]
        exec(compile(what, "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})

    return code


def preload(modules: Sequence[str]) -> None:
    """Import ``modules`` here, for every forked rank; one that fails to import is left to the
    ranks, which then fail on it themselves and say why."""
    for name in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _fork(env: dict[str, str], body: Callable[[], None]) -> _Forked:
    """Fork a rank that runs ``body`` with ``env`` added to its environment, and ends as Python
    ends after a program: its exception printed and exit 1, ``sys.exit``'s status, its threads
    joined and its ``atexit`` functions run. Its age counts from this process's start
    (:func:`~tracekit.capture.files.process_age`).

    Python 3.12 and later warn at a fork from a process of several threads; numpy's import leaves
    one more here (OpenBLAS's server, which its own fork handlers restart in the child), and no
    lock of this process is held by it: the warning would be every capture's log's noise."""
    age = files.process_age()
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _as_rank(env, body, age)
    return _Forked(pid)


def _as_rank(env: dict[str, str], body: Callable[[], None], age: float | None) -> NoReturn:
    """The forked rank: the exception ``body`` raises, if any, goes up to the interpreter, which
    ends this process as it ends any program (no handler above this one catches it)."""
    os.environ.update(env)
    files.forked_at(age)
    body()
    sys.exit(0)


def run(nproc: int, addr: str, port: int, args: Sequence[str], *, modules: Sequence[str] = ()) -> int:
    """Start ``nproc`` ranks of ``python args`` (forks, after ``modules`` are imported, where
    :func:`in_this_interpreter` runs ``args``), wait for them; the exit status (see above)."""
    run_id = uuid.uuid4().hex
    body = in_this_interpreter(args) if hasattr(os, "fork") and os.environ.get(FORK_ENV) != "0" else None
    if body is not None:
        preload(modules)
    ranks: list[_Rank] = []
    for r in range(nproc):
        env = rank_variables(r, nproc, addr, port, run_id) if nproc > 1 else {}
        if body is not None:
            ranks.append(_fork(env, body))
        else:
            ranks.append(subprocess.Popen([sys.executable, *args], env={**os.environ, **env}))

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        _signal_live(ranks, signum)

    for sig in _PASSED_ON:
        signal.signal(sig, pass_on)
    first_failed: int | None = None
    kill_at: float | None = None  # SIGKILL for those still there, once the first failure's grace is over
    while any(p.returncode is None for p in ranks):
        time.sleep(POLL_S)
        for p in ranks:
            if p.returncode is None and p.poll() is not None and p.returncode != 0 and first_failed is None:
                first_failed = p.returncode
                kill_at = time.monotonic() + TERM_GRACE_S
                _signal_live(ranks, signal.SIGTERM)
        if kill_at is not None and time.monotonic() > kill_at:
            kill_at = None
            _signal_live(ranks, signal.SIGKILL)
    return 0 if first_failed is None else exit_status(first_failed)


def _signal_live(ranks: Sequence[_Rank], signum: int) -> None:
    for p in ranks:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signum)


def main(argv: Sequence[str] | None = None) -> None:
    """``[--preload MODULE,MODULE] NPROC ADDR PORT ARGS...``"""
    words = list(sys.argv[1:] if argv is None else argv)
    modules: list[str] = []
    if words[:1] == ["--preload"]:
        modules = [m for m in words[1].split(",") if m]
        words = words[2:]
    nproc, addr, port, *args = words
    sys.exit(run(int(nproc), addr, int(port), args, modules=modules))


if __name__ == "__main__":
    main()
