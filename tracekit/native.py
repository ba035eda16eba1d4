"""Whether tracekit's native parts run where they were built: the decoder
(``tracekit/readers/_kineto_columns.c``) and the re-timing (``tracekit/analyzers/_retime_core.c``).
``TRACEKIT_NATIVE=0`` turns both off (each then runs its Python path, with the same results): to
compare the two, or to rule one out."""

from __future__ import annotations

import os
from typing import Final

#: The environment variable, and the value that turns the native parts off.
VARIABLE: Final = "TRACEKIT_NATIVE"


def wanted() -> bool:
    """Whether the native parts may run (read from the environment when asked)."""
    return os.environ.get(VARIABLE, "1") != "0"
