"""Damaged Nsight Systems SQLite exports: truncated, wrong tables, missing columns, empty tables, bad values.

The source is the smallest real export (``nsysai-mock-rtx3080.sqlite``: 2 kernels, 1 copy,
1 sync, 9 runtime calls), written as ``rank3.sqlite``. Files that cannot be read are also
mixed among the good ranks of the ``dlrm`` job (a skipped file never reaches the job checks);
files that can be read hold another job, so they run alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.robustness import builders as b
from tests.robustness.harness import Case

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.robustness.sources import Source

    Build = Callable[[Path, Source], Path]

_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_ALL_EVENTS = (_KERNEL, _RUNTIME, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
_SKIPPED = ("skipped",)
_DROPPED = ("warning", "skipped")
_TOLERATED = ("ok", "warning")


def _unreadable(name: str, build: Build, expect: tuple[str, ...] = _SKIPPED) -> Case:
    """A file that cannot be read: also mixed among the good ranks of the dlrm job."""
    return Case(name, build, expect, source="nsys", family="dlrm")


def _alone(name: str, build: Build, expect: tuple[str, ...]) -> Case:
    """A file that can be read (another job than the good ranks'): alone only."""
    return Case(name, build, expect, source="nsys", family="")


CASES: list[Case] = [
    _unreadable("nsys-empty", b.content(b"")),
    _unreadable("nsys-magic-only", b.stored(lambda d: d[:16])),
    _unreadable("nsys-trunc-100-bytes", b.stored(lambda d: d[:100])),
    _unreadable("nsys-trunc-first-page", b.stored(lambda d: d[:4096])),
    _unreadable("nsys-trunc-50pct", b.stored(b.cut(0.5)), (*_SKIPPED, "warning")),
    _unreadable("nsys-trunc-90pct", b.stored(b.cut(0.9)), (*_SKIPPED, "warning")),
    _unreadable("nsys-header-then-noise", b.stored(lambda d: d[:16] + bytes((i * 31) % 256 for i in range(8192)))),
    _unreadable("nsys-json-named-sqlite", b.content(b'{"traceEvents": []}')),
    _unreadable("nsys-wrong-tables", b.sqlite_new({"foo": (["a", "b"], [(1, 2)])})),
    _unreadable("nsys-no-tables", b.sqlite_new({})),
    _unreadable("nsys-all-event-tables-empty", b.sqlite_edit(*(f"DELETE FROM {t}" for t in _ALL_EVENTS))),
    # issue 33: an event table that is a view never returned (recursive) or aborted in the allocator (cartesian)
    _unreadable(
        "nsys-kernel-recursive-view",
        b.sqlite_edit(
            f"DROP TABLE {_KERNEL}",
            f"CREATE VIEW {_KERNEL} AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
            "SELECT i AS start, i + 1 AS end, 0 AS deviceId, i AS correlationId FROM n",
        ),
    ),
    _unreadable(
        "nsys-kernel-cartesian-view",
        b.sqlite_edit(
            f"ALTER TABLE {_RUNTIME} RENAME TO r0",
            f"CREATE VIEW {_RUNTIME} AS SELECT a.* FROM r0 a, r0 b, r0 c, r0 d, r0 e, r0 f, r0 g, r0 h, r0 i",
        ),
    ),
    _unreadable("nsys-rep-garbage", b.content(b"not a report", name="rank3.nsys-rep")),
    _alone("nsys-kernel-table-empty", b.sqlite_edit(f"DELETE FROM {_KERNEL}"), _TOLERATED),
    _alone("nsys-kernel-no-start", b.sqlite_edit(b.drop_column(_KERNEL, "start")), _DROPPED),
    _alone("nsys-kernel-no-end", b.sqlite_edit(b.drop_column(_KERNEL, "end")), _DROPPED),
    _alone(
        "nsys-kernel-no-name-columns",
        b.sqlite_edit(b.drop_column(_KERNEL, "demangledName"), b.drop_column(_KERNEL, "shortName")),
        _TOLERATED,
    ),
    _alone("nsys-runtime-no-correlation", b.sqlite_edit(b.drop_column(_RUNTIME, "correlationId")), _TOLERATED),
    _alone("nsys-no-string-ids", b.sqlite_edit("DROP TABLE StringIds"), _TOLERATED),
    _alone("nsys-kernel-start-null", b.sqlite_edit(b.loosen(_KERNEL), f"UPDATE {_KERNEL} SET start = NULL"), _DROPPED),
    _alone("nsys-kernel-start-text", b.sqlite_edit(b.loosen(_KERNEL), f"UPDATE {_KERNEL} SET start = 'abc'"), _DROPPED),
    _alone(
        "nsys-kernel-start-real",
        b.sqlite_edit(b.loosen(_KERNEL), f"UPDATE {_KERNEL} SET start = start + 0.5"),
        (*_TOLERATED, "skipped"),
    ),
    _alone(
        "nsys-kernel-end-before-start",
        b.sqlite_edit(b.loosen(_KERNEL), f"UPDATE {_KERNEL} SET end = start - 1000"),
        _DROPPED,
    ),
    _alone(
        "nsys-kernel-device-huge",
        b.sqlite_edit(b.loosen(_KERNEL), f"UPDATE {_KERNEL} SET deviceId = {2**40}"),
        (*_DROPPED, "ok"),
    ),
    _alone(
        "nsys-kernel-pid-null", b.sqlite_edit(b.loosen(_KERNEL), f"UPDATE {_KERNEL} SET globalPid = NULL"), _TOLERATED
    ),
    _alone(
        "nsys-string-blob", b.sqlite_edit(b.loosen("StringIds"), "UPDATE StringIds SET value = X'C3FF00E9'"), _TOLERATED
    ),
    _alone(
        "nsys-epoch-text",
        b.sqlite_edit(
            b.loosen("TARGET_INFO_SESSION_START_TIME"), "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 'abc'"
        ),
        _TOLERATED,
    ),
    _alone(
        "nsys-epoch-huge",
        b.sqlite_edit(
            b.loosen("TARGET_INFO_SESSION_START_TIME"),
            f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {2**63 - 1}",
        ),
        _DROPPED,
    ),
    _alone(
        "nsys-rank-env-huge",
        b.sqlite_edit(
            "INSERT INTO META_DATA_CAPTURE (name, value) "
            "VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', 'RANK=99999999999999999999')"
        ),
        _DROPPED,
    ),
]

GROUPS: dict[str, list[Case]] = {"Nsight Systems exports": CASES}
