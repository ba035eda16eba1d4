"""``python -m tracekit`` in a child process, with this checkout's tracekit imported wherever it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.conftest import SAMPLES

if TYPE_CHECKING:
    from pathlib import Path

#: The checkout's root: first on the child's path, so that it imports this tracekit from any folder.
ROOT = SAMPLES.parent


def run_tracekit(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m tracekit ARGS`` in ``cwd``; ``env`` adds to the environment (a ``PYTHONPATH``
    given comes first, then the checkout's)."""
    extra = dict(env or {})
    path = os.pathsep.join(p for p in (extra.pop("PYTHONPATH", ""), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "tracekit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env={**os.environ, **extra, "PYTHONPATH": path},
    )
