"""Fixtures of the reader tests."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail a test that blocks (on a FIFO, on an endless device) instead of hanging the run."""

    def hung(signum: int, frame: object) -> None:
        pytest.fail("blocked for 20 s")  # not an OSError, which a reader would take for a bad file

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
