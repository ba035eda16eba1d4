"""The longest idle intervals list what can be read: no "0.00 ms" rows (issue 46, item 8: 70 rows,
mostly back-to-back launches 0.00 ms apart), at most 20, and the caption says what is not listed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conftest import analysis_of
from tracekit.reports.finding_times import IDLE_ROWS, idle_longest

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.real


def test_no_row_reads_zero_and_the_rest_are_counted(kineto_dir: Path) -> None:
    a = analysis_of([kineto_dir / "tracelens-mi300-resnet-actckpt"]).analysis
    assert a.idle_causes is not None
    found = a.idle_causes.longest
    short = [i for i in found if i.length_ns < 10_000]
    assert len(found) == 50 and len(short) > 25  # most of the 50 longest are back-to-back launches
    for limit in (None, 16):
        table = idle_longest(a, limit)
        assert 0 < len(table.rows) <= IDLE_ROWS
        assert all(row[3] != "0.00" for row in table.rows)
        assert f"{len(found) - len(table.rows)} shorter one(s) not listed" in table.caption
