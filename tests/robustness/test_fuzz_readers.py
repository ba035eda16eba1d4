"""Property-based fuzz of the Kineto and Nsight Systems readers (hypothesis).

Whatever a file holds, reading it either gives rank traces whose events follow the schema of
``tracekit/model/schema.py`` (every column and dtype, no null start or end, end >= start, so
no negative duration) and whose counters follow ``tracekit/model/counters.py``, or raises
:class:`tracekit.errors.TracekitError`; never another exception.

* Kineto: JSON documents whose events hold arbitrary JSON values (any type, huge integers,
  NaN and Infinity literals, nesting) in every field the reader decodes, plausible values
  most of the time, gzipped or not; and the same through ``load_run`` (rank assignment).
* Nsight Systems: SQLite files with the tables the reader queries (kernels, copies, sets,
  syncs, runtime calls, NVTX, strings, session start, memory, capture metadata, GPUs),
  each with some of its columns and rows of any SQLite value.

Profiles: by default (CI) each test tries 50 examples, derandomized so that a run is
reproducible, and reports a failure as found, unshrunk (``ci``); ``TRACEKIT_FUZZ=long``
tries 5,000 random ones per test and shrinks what fails to a minimal example::

    TRACEKIT_FUZZ=long python3 -m pytest tests/robustness/test_fuzz_readers.py
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.robustness.known_failures import KNOWN
from tracekit.errors import TracekitError
from tracekit.model.counters import COUNTER_SCHEMA
from tracekit.model.schema import SCHEMA
from tracekit.readers import load_run, read_file

settings.register_profile(
    "ci",
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    # no shrinking: a failure is reported as found, in a second instead of half a minute
    phases=[Phase.explicit, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile("long" if os.environ.get("TRACEKIT_FUZZ") == "long" else "ci")


def _known(test: str) -> list[pytest.MarkDecorator]:
    reason = KNOWN.get(test)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


# --------------------------------------------------------------------------- checks


def assert_valid(traces: list[Any]) -> None:
    """Every rank trace has events and counters of the schema, and intervals that make sense."""
    assert traces, "a reader returned no rank trace without an error"
    for trace in traces:
        events: pl.DataFrame = trace.events
        assert dict(events.schema) == SCHEMA, f"event columns {dict(events.schema)}"
        assert events["start_ns"].null_count() == 0, "an event without a start"
        assert events["end_ns"].null_count() == 0, "an event without an end"
        assert events["kind"].null_count() == 0, "an event without a kind"
        assert (events["end_ns"] >= events["start_ns"]).all(), "an event that ends before it starts"
        assert dict(trace.counters.schema) == COUNTER_SCHEMA, f"counter columns {dict(trace.counters.schema)}"


def read_checked(path: Path) -> None:
    """Read ``path``: valid traces, or a TracekitError (anything else fails the test)."""
    try:
        traces = read_file(path)
    except TracekitError as exc:
        message = exc.message
    else:
        assert_valid(traces)
        return
    assert message.strip() and "\n" not in message, f"not a one-line message: {message!r}"


# --------------------------------------------------------------------------- Kineto

_BIG_INTS = st.sampled_from([2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30])
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    _BIG_INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["NaN", "Infinity", "-1", "1e400", "", "stream 7", "Spans"]),
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _field(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Plausible values most of the time, any JSON value otherwise."""
    return st.one_of(plausible, plausible, plausible, JSON_VALUE)


_TIMES = st.one_of(st.floats(0, 2e15), st.integers(0, 2**53), st.floats(-1e6, 1e6))
_SMALL = st.integers(-2, 12)
_NAMES = st.one_of(
    st.sampled_from(
        [
            "ProfilerStep#1",
            "ProfilerStep#2",
            "[memory]",
            "ncclDevKernel_AllReduce_Sum_f32",
            "aten::mm",
            "cudaLaunchKernel",
            "tracekit.phase/forward",
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "Optimizer.step#SGD.step",
            "c10d::allreduce_",
            "Memcpy HtoD (Pageable -> Device)",
        ]
    ),
    st.text(max_size=10),
)
_ARG_INTS = (
    "External id",
    "external id",
    "correlation",
    "device",
    "stream",
    "bytes",
    "In msg nelems",
    "Group size",
    "Seq",
    "Device Type",
    "Device Id",
    "Addr",
    "Bytes",
    "Total Allocated",
    "Total Reserved",
)
ARGS = st.fixed_dictionaries(
    {},
    optional={
        **{k: _field(st.integers(-1, 2**40)) for k in _ARG_INTS},
        "Collective name": _field(st.sampled_from(["allreduce", "all_to_all", "broadcast"])),
        "Process Group Name": _field(st.sampled_from(["0", "1", "default_pg"])),
    },
)
EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": _field(st.sampled_from(["X", "X", "X", "i", "I", "B", "E", "M", "s", "f", "C"])),
        "cat": _field(
            st.sampled_from(
                [
                    "kernel",
                    "cpu_op",
                    "user_annotation",
                    "gpu_user_annotation",
                    "cuda_runtime",
                    "cuda_driver",
                    "gpu_memcpy",
                    "gpu_memset",
                    "cuda_sync",
                    "python_function",
                    "cpu_instant_event",
                    "Trace",
                    "Kernel",
                    "Operator",
                ]
            )
        ),
        "name": _field(_NAMES),
        "pid": _field(_SMALL),
        "tid": _field(_SMALL),
        "ts": _field(_TIMES),
        "dur": _field(st.one_of(st.floats(0, 1e9), st.integers(-5, 10**6))),
        "args": _field(ARGS),
    },
)
INFO = st.fixed_dictionaries(
    {},
    optional={
        "rank": _field(st.one_of(st.integers(0, 7), st.integers(-2, 10**13), _BIG_INTS)),
        "world_size": _field(st.one_of(st.just(8), st.integers(-1, 10**13), _BIG_INTS)),
        "backend": _field(st.sampled_from(["nccl", "gloo"])),
        "pg_config": JSON_VALUE,
    },
)
KINETO_DOC = st.one_of(
    st.builds(
        lambda events, info: {"traceEvents": events, "distributedInfo": info}, st.lists(EVENT, max_size=25), INFO
    ),
    st.builds(
        lambda events: {"traceEvents": events}, st.lists(st.one_of(EVENT, EVENT, EVENT, JSON_VALUE), max_size=10)
    ),
    st.lists(EVENT, max_size=10),
    JSON_VALUE,
)


def _write_kineto(folder: Path, document: Any, zipped: bool) -> Path:
    data = json.dumps(document).encode()  # NaN and Infinity are written as such: not JSON
    path = folder / ("rank5.json.gz" if zipped else "rank5.json")
    path.write_bytes(gzip.compress(data, 1) if zipped else data)
    return path


#: Documents whose ``distributedInfo`` says anything at all about the rank and world size.
RANKED_DOC = st.builds(
    lambda events, rank, world: {"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": world}},
    st.lists(EVENT, max_size=8),
    st.one_of(st.integers(0, 7), st.integers(-(2**70), 2**70), _BIG_INTS, JSON_VALUE),
    st.one_of(st.just(8), st.integers(-(2**70), 2**70), _BIG_INTS, JSON_VALUE),
)


@pytest.mark.parametrize("level", [pytest.param("reader", marks=_known("fuzz-kineto-reader"))])
@PROFILE
@given(document=KINETO_DOC, zipped=st.booleans())
def test_fuzz_kineto(level: str, document: Any, zipped: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="tracekit-fuzz-") as folder:
        read_checked(_write_kineto(Path(folder), document, zipped))


@pytest.mark.parametrize("level", [pytest.param("run", marks=_known("fuzz-kineto-run"))])
@PROFILE
@given(document=RANKED_DOC)
def test_fuzz_kineto_run(level: str, document: Any) -> None:
    """Through ``load_run``: the rank a file claims is taken, refused in one line, or the file skipped."""
    with tempfile.TemporaryDirectory(prefix="tracekit-fuzz-") as folder:
        path = _write_kineto(Path(folder), document, zipped=False)
        try:
            run = load_run([path], use_cache=False)
        except TracekitError as exc:
            message = exc.message
        else:
            events = run.events
            assert dict(events.schema) == SCHEMA
            assert events["start_ns"].null_count() == 0 and (events["end_ns"] >= events["start_ns"]).all()
            assert events["rank"].null_count() == 0
            return
        assert "\n" not in message, f"not a one-line message: {message!r}"


# --------------------------------------------------------------------------- Nsight Systems

_SQL_INT = st.integers(-(2**63), 2**63 - 1)
SQL_VALUE = st.one_of(
    st.none(),
    st.integers(-5, 2**40),
    _SQL_INT,
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=6),
)


def _sql(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(plausible, plausible, plausible, SQL_VALUE)


_NS = st.integers(0, 10**10)
_GID = st.sampled_from([(100 << 24) | 100, (101 << 24) | 101, (1 << 48) | (100 << 24), 0])
_ID = st.integers(0, 6)
#: Table -> column -> plausible values (the columns the reader queries).
NSYS_TABLES: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": {
        "start": _NS,
        "end": _NS,
        "deviceId": st.integers(0, 3),
        "streamId": st.integers(0, 30),
        "correlationId": _ID,
        "globalPid": _GID,
        "demangledName": _ID,
        "shortName": _ID,
    },
    "CUPTI_ACTIVITY_KIND_MEMCPY": {
        "start": _NS,
        "end": _NS,
        "deviceId": st.integers(0, 3),
        "streamId": st.integers(0, 30),
        "correlationId": _ID,
        "globalPid": _GID,
        "copyKind": st.integers(0, 14),
        "bytes": st.integers(0, 2**40),
        "srcKind": st.integers(0, 8),
        "dstKind": st.integers(0, 8),
    },
    "CUPTI_ACTIVITY_KIND_MEMSET": {
        "start": _NS,
        "end": _NS,
        "deviceId": st.integers(0, 3),
        "streamId": st.integers(0, 30),
        "correlationId": _ID,
        "globalPid": _GID,
        "bytes": st.integers(0, 2**30),
    },
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": {
        "start": _NS,
        "end": _NS,
        "deviceId": st.integers(0, 3),
        "streamId": st.integers(0, 30),
        "correlationId": _ID,
        "globalPid": _GID,
        "syncType": st.integers(0, 5),
    },
    "CUPTI_ACTIVITY_KIND_RUNTIME": {
        "start": _NS,
        "end": _NS,
        "eventClass": st.sampled_from([0, 1, 67]),
        "globalTid": _GID,
        "correlationId": _ID,
        "nameId": _ID,
    },
    "NVTX_EVENTS": {
        "start": _NS,
        "end": st.one_of(st.none(), _NS),
        "eventType": st.sampled_from([34, 59, 60, 65, 70, 71, 75, 39]),
        "text": st.one_of(st.none(), _NAMES),
        "textId": _ID,
        "domainId": st.integers(0, 3),
        "globalTid": _GID,
    },
    "StringIds": {"id": _ID, "value": _NAMES},
    "TARGET_INFO_SESSION_START_TIME": {"utcEpochNs": st.integers(0, 2 * 10**18)},
    "CUDA_GPU_MEMORY_USAGE_EVENTS": {
        "start": _NS,
        "globalPid": _GID,
        "deviceId": st.integers(0, 3),
        "address": st.integers(0, 2**48),
        "bytes": st.integers(0, 2**34),
        "memKind": st.integers(0, 8),
        "memoryOperationType": st.integers(0, 1),
    },
    "META_DATA_CAPTURE": {
        "name": st.sampled_from(["PROCESS_0:ENVIRONMENT_VARIABLE", "PROCESS_0:ARGUMENT_1", "PROCESS_0:ARGUMENT_x"]),
        "value": st.sampled_from(["RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=8", "--rank 2", "RANK=99999999999999999999"]),
    },
    "TARGET_INFO_SYSTEM_ENV": {"name": st.just("DeviceEnvironment"), "value": st.just("RANK=1;WORLD_SIZE=2")},
    "META_DATA_EXPORT": {"name": st.just("EXPORT_SCHEMA_VERSION"), "value": st.text(max_size=5)},
    "TARGET_INFO_GPU": {"id": st.integers(0, 3), "name": st.text(max_size=8)},
    "TARGET_INFO_CUDA_DEVICE": {"pid": st.integers(0, 200), "cudaId": st.integers(0, 3), "gpuId": st.integers(0, 3)},
}


@st.composite
def nsys_tables(draw: st.DrawFn) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Some of the tables, each with some of its columns (most of the time all) and a few rows."""
    tables = {}
    for table in sorted(draw(st.sets(st.sampled_from(sorted(NSYS_TABLES)), min_size=1))):
        spec = NSYS_TABLES[table]
        names = list(spec)
        if draw(st.integers(0, 4)) == 0:
            names = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
        rows = draw(st.lists(st.tuples(*(_sql(spec[c]) for c in names)), max_size=6))
        tables[table] = (names, rows)
    return tables


def _write_nsys(path: Path, tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        for table, (names, rows) in tables.items():
            db.execute(f"CREATE TABLE {table} ({', '.join(names)})")
            db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' for _ in names)})", rows)


@pytest.mark.parametrize("level", [pytest.param("reader", marks=_known("fuzz-nsys-reader"))])
@PROFILE
@given(tables=nsys_tables())
def test_fuzz_nsys(level: str, tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]) -> None:
    with tempfile.TemporaryDirectory(prefix="tracekit-fuzz-") as folder:
        path = Path(folder) / "rank2.sqlite"
        _write_nsys(path, tables)
        read_checked(path)
