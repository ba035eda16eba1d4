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
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING, Final

from tracekit.capture.processes import TERM_GRACE_S

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType

#: Seconds between looks at the ranks.
POLL_S: Final = 0.05
_PASSED_ON: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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


def run(nproc: int, addr: str, port: int, args: Sequence[str]) -> int:
    """Start ``nproc`` ranks of ``python args``, wait for them; the exit status (see above)."""
    run_id = uuid.uuid4().hex
    ranks = [
        subprocess.Popen(
            [sys.executable, *args],
            env={**os.environ, **(rank_variables(r, nproc, addr, port, run_id) if nproc > 1 else {})},
        )
        for r in range(nproc)
    ]

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


def _signal_live(ranks: Sequence[subprocess.Popen[bytes]], signum: int) -> None:
    for p in ranks:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signum)


def main(argv: Sequence[str] | None = None) -> None:
    nproc, addr, port, *args = sys.argv[1:] if argv is None else argv
    sys.exit(run(int(nproc), addr, int(port), args))


if __name__ == "__main__":
    main()
