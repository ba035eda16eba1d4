"""Special files: FIFOs, folders named like traces, symlink loops, devices, unreadable files, /dev/fd/N.

Each runs in a subprocess with a timeout and a memory limit (reading a FIFO without a writer
blocks forever; reading /dev/zero never ends). A special file given by name must be named in
one line (alone) or skipped with its name (beside good ranks), as the user wrote it, never as
what it resolves to; inside a folder it may instead be left out, since it is not a trace file.
"""

from __future__ import annotations

import os

from tests.robustness import builders as b
from tests.robustness.harness import Case


def _as_root() -> str | None:
    return "running as root, which reads files without read permission" if os.geteuid() == 0 else None


_LEFT_OUT = ("skipped", "ignored")

CASES: list[Case] = [
    Case("fifo-as-arg", b.fifo, ("skipped",), mixed_expect=("skipped", "error"), process=True, as_arg=True),
    Case("fifo-in-folder", b.fifo, ("skipped",), mixed_expect=_LEFT_OUT, process=True, only="mixed"),
    Case("dir-named-json", b.directory, ("error",), mixed_expect=("ignored",)),
    Case("symlink-loop", b.symlink_loop, ("error",), mixed_expect=_LEFT_OUT, process=True),
    Case(
        "symlink-loop-as-arg",
        b.symlink_loop,
        ("error",),
        mixed_expect=("skipped", "error"),
        process=True,
        as_arg=True,
        only="mixed",
    ),
    Case("dangling-symlink", b.symlink("missing.json"), ("error",), mixed_expect=_LEFT_OUT),
    Case(
        "dev-zero-as-arg",
        b.symlink("/dev/zero"),
        ("skipped",),
        mixed_expect=("skipped", "error"),
        process=True,
        as_arg=True,
    ),
    Case(
        "dev-zero-in-folder", b.symlink("/dev/zero"), ("skipped",), mixed_expect=_LEFT_OUT, process=True, only="mixed"
    ),
    Case("dev-null-symlink", b.symlink("/dev/null"), ("skipped",), mixed_expect=_LEFT_OUT, process=True),
    Case("read-error-eio", b.symlink("/proc/self/mem"), ("skipped",), process=True),
    Case("no-read-permission", b.unreadable, ("skipped",), skip_reason=_as_root),
    Case(
        "process-substitution",
        b.pristine,
        ("ok", "error"),
        mixed_expect=("ok", "skipped"),
        procsub=True,
        marker="/dev/fd/",
    ),
    Case(
        "process-substitution-gz",
        b.pristine,
        ("ok", "error"),
        mixed_expect=("ok", "skipped"),
        source="capture",
        procsub=True,
        marker="/dev/fd/",
    ),
]

GROUPS: dict[str, list[Case]] = {"Special files": CASES}
