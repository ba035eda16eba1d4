"""What an Nsight Systems export says about itself: clock, schema, ranks, GPUs.

Everything here is a handful of rows (session start, export metadata, the recorded
environment and arguments of the profiled command, the GPU tables), read once per file.
Events are read in :mod:`tracekit.readers.nsys`.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeGuard

import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.input_warnings import InputWarning
from tracekit.model.run import RankFound
from tracekit.readers.columns import rows_frame
from tracekit.readers.hosts import clean_host
from tracekit.readers.plausible import MAX_NS
from tracekit.readers.ranks import is_rank, rank_from_name

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

#: Environment variables that name the rank of a process, most specific first. MPI
#: launchers set theirs per rank, as torchrun sets RANK.
RANK_ENV: Final = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_WANTED_ENV: Final = (*RANK_ENV, "LOCAL_RANK", "WORLD_SIZE")
_ENV_ITEM: Final = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)="?(.*?)"?$')
_RANK_ARG: Final = re.compile(r"(?:^|\s)--rank[= ](\d+)(?:\s|$)")
_LOCAL_RANK_ARG: Final = re.compile(r"(?:^|\s)--local[-_]rank[= ](\d+)(?:\s|$)")


#: Rows fetched from an export at a time.
PAGE_ROWS: Final = 100_000
#: SQLite virtual-machine steps between two checks of a statement's time limit.
PROGRESS_EVERY: Final = 100_000
#: A statement's time limit: this many seconds, plus one per :data:`LIMIT_BYTES_PER_S` of the file.
LIMIT_BASE_S: Final = 60.0
LIMIT_BYTES_PER_S: Final = 4 << 20


def query_limit_s(path: Path) -> float:
    """How long one statement on the export ``path`` may run: far more than scanning a table of
    a file of its size takes, far less than forever."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return LIMIT_BASE_S + size / LIMIT_BYTES_PER_S


def _not_plain(kind: object, sql: object) -> str | None:
    """What a ``sqlite_master`` entry is when it is not a plain table: "a view", "a virtual table"."""
    if kind == "view":
        return "a view"
    if isinstance(sql, str) and re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE\b", sql, re.IGNORECASE):
        return "a virtual table"
    return None


class Export:
    """A read-only connection to one export, with the tables and columns it has."""

    def __init__(self, path: Path, *, shown: str) -> None:
        self.shown = shown
        self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        self.limit_s = query_limit_s(path)
        self._deadline = float("inf")
        self.conn.set_progress_handler(self._past_deadline, PROGRESS_EVERY)
        try:
            rows = self.query("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view')")
        except TraceReadError as exc:
            self.conn.close()
            raise TraceReadError(f"not a readable SQLite database ({exc.reason})", path=shown) from None
        self.tables: frozenset[str] = frozenset(str(r[1]) for r in rows)
        #: tables tracekit will not read, and why: a view or a virtual table runs code of the file's choosing
        self._refused = {str(name): what for kind, name, sql in rows if (what := _not_plain(kind, sql)) is not None}
        self._columns: dict[str, frozenset[str]] = {}

    def _past_deadline(self) -> int:
        return int(time.monotonic() > self._deadline)

    def _plain(self, table: str) -> None:
        """Refuse ``table`` when the export defines it as a view or a virtual table."""
        if (what := self._refused.get(table)) is not None:
            raise TraceReadError(
                f"{table} is {what}, not a table: refused (an export's event tables are plain tables)", path=self.shown
            )

    def columns(self, table: str) -> frozenset[str]:
        """The columns of ``table``; empty when the export has no such table; an error when it is a view."""
        if table not in self.tables:
            return frozenset()
        self._plain(table)
        if table not in self._columns:
            info = self.query(f"PRAGMA table_info({table})")
            self._columns[table] = frozenset(str(r[1]) for r in info)
        return self._columns[table]

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[None]:
        """One statement, stopped by the progress handler past :attr:`limit_s`; errors name the file."""
        self._deadline = time.monotonic() + self.limit_s
        try:
            yield
        except sqlite3.OperationalError as exc:
            if time.monotonic() <= self._deadline or "interrupt" not in str(exc):
                raise TraceReadError(f"unexpected Nsight Systems export layout ({exc})", path=self.shown) from None
            raise TraceReadError(
                f"a query ran past {self.limit_s:.0f} s (the limit for a file of this size) and was stopped",
                path=self.shown,
            ) from None
        except sqlite3.Error as exc:
            raise TraceReadError(f"unexpected Nsight Systems export layout ({exc})", path=self.shown) from None
        finally:
            self._deadline = float("inf")

    def query(self, sql: str) -> list[tuple[object, ...]]:
        """All rows of ``sql``; a failure is a one-line error naming the file."""
        with self._bounded():
            return self.conn.execute(sql).fetchall()

    def frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """The rows of ``sql`` as a frame of ``schema`` (see :func:`~tracekit.readers.columns.rows_frame`),
        fetched :data:`PAGE_ROWS` at a time: a large table is never held as Python tuples whole."""
        frames = []
        with self._bounded():
            cursor = self.conn.execute(sql)
            while page := cursor.fetchmany(PAGE_ROWS):
                frames.append(rows_frame(page, schema))
        return pl.concat(frames, how="vertical", rechunk=True) if frames else rows_frame([], schema)

    @property
    def strings(self) -> str:
        """What to join names against: ``StringIds``, or an empty table when it is missing."""
        if "StringIds" in self.tables:
            self._plain("StringIds")
            return "StringIds"
        return "(SELECT NULL AS id, NULL AS value WHERE 0)"

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


@dataclass(frozen=True)
class ExportMeta:
    """The per-file facts of an export."""

    #: UTC epoch ns of the session start (event times are ns after it), when recorded.
    epoch_ns: int | None
    schema_version: str | None
    #: RANK, LOCAL_RANK, WORLD_SIZE, ... as recorded for the profiled command.
    env: dict[str, str] = field(default_factory=dict)
    #: The profiled command's arguments, in order.
    args: tuple[str, ...] = ()
    #: GPU id -> name (TARGET_INFO_GPU).
    gpu_names: dict[int, str] = field(default_factory=dict)
    #: GPU id -> total memory in bytes (TARGET_INFO_GPU.totalMemory).
    gpu_memory: dict[int, int] = field(default_factory=dict)
    #: (pid, CUDA device id) -> GPU id (TARGET_INFO_CUDA_DEVICE).
    cuda_devices: dict[tuple[int, int], int] = field(default_factory=dict)
    #: What the export records that cannot be right and was ignored.
    problems: tuple[InputWarning, ...] = ()
    #: The host the session ran on (TARGET_INFO_SYSTEM_ENV ``Hostname``): one for every process.
    host: str | None = None


def read_meta(db: Export) -> ExportMeta:
    """Session start, schema version, recorded environment and arguments, GPUs."""
    epoch = None
    problems: list[InputWarning] = []
    if "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
        rows = db.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME WHERE utcEpochNs IS NOT NULL")
        value = rows[0][0] if rows else None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_NS:
            epoch = value
        elif value is not None:
            problems.append(InputWarning(kind="bad_session_start", value=repr(str(value)[:40])))
    env = _environment(db)
    for var in (*RANK_ENV, "LOCAL_RANK", "WORLD_SIZE"):
        if var in env and _as_rank(env[var]) is None:
            problems.append(InputWarning(kind="bad_rank_env", key=var, value=repr(env[var][:40])))
    return ExportMeta(
        epoch_ns=epoch,
        problems=tuple(problems),
        schema_version=_schema_version(db),
        env=env,
        args=_arguments(db),
        gpu_names=_pairs(db, "TARGET_INFO_GPU", "id", "name"),
        gpu_memory=_gpu_memory(db),
        cuda_devices=_cuda_devices(db),
        host=_host(db),
    )


def _schema_version(db: Export) -> str | None:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if {"name", "value"} <= db.columns(table):
            rows = db.query(f"SELECT value FROM {table} WHERE name = 'EXPORT_SCHEMA_VERSION'")
            if rows:
                return f"nsys export {rows[0][0]}"
    return None


def _environment(db: Export) -> dict[str, str]:
    """Rank-related variables: the profiled command's own environment over the CLI's."""
    env: dict[str, str] = {}
    if {"name", "value"} <= db.columns("TARGET_INFO_SYSTEM_ENV"):
        for (value,) in db.query("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"):
            for item in str(value).split(";"):
                key, _, val = item.partition("=")
                if key in _WANTED_ENV:
                    env[key] = val
    if {"name", "value"} <= db.columns("META_DATA_CAPTURE"):
        rows = db.query("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE'")
        for (value,) in rows:
            match = _ENV_ITEM.match(str(value))
            if match and match[1] in _WANTED_ENV:
                env[match[1]] = match[2]
    return env


def _host(db: Export) -> str | None:
    if not {"name", "value"} <= db.columns("TARGET_INFO_SYSTEM_ENV"):
        return None
    rows = db.query("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1")
    return clean_host(rows[0][0]) if rows else None


def _arguments(db: Export) -> tuple[str, ...]:
    if not {"name", "value"} <= db.columns("META_DATA_CAPTURE"):
        return ()
    rows = db.query("SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ARGUMENT_%'")
    indexed = sorted((int(m[1]), str(v)) for n, v in rows if (m := re.search(r"ARGUMENT_(\d+)$", str(n))))
    return tuple(v for _, v in indexed)


def _pairs(db: Export, table: str, key: str, value: str) -> dict[int, str]:
    if not {key, value} <= db.columns(table):
        return {}
    rows = db.query(f"SELECT {key}, {value} FROM {table} WHERE {key} IS NOT NULL AND {value} IS NOT NULL")
    return {k: str(v) for k, v in rows if _is_int(k)}


def _gpu_memory(db: Export) -> dict[int, int]:
    if not {"id", "totalMemory"} <= db.columns("TARGET_INFO_GPU"):
        return {}
    rows = db.query("SELECT id, totalMemory FROM TARGET_INFO_GPU")
    return {g: m for g, m in rows if _is_int(g) and _is_int(m) and m > 0}


def _cuda_devices(db: Export) -> dict[tuple[int, int], int]:
    if not {"pid", "cudaId", "gpuId"} <= db.columns("TARGET_INFO_CUDA_DEVICE"):
        return {}
    rows = db.query("SELECT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE WHERE gpuId IS NOT NULL")
    return {(p, c): g for p, c, g in rows if _is_int(p) and _is_int(c) and _is_int(g)}


def _is_int(value: object) -> TypeGuard[int]:
    """Whether a SQLite value is an integer (a column may hold any type)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _as_rank(text: str | None) -> int | None:
    value = int(text) if text is not None and text.strip().isdigit() else None
    return value if is_rank(value) else None


def rank_hint(meta: ExportMeta, name: str) -> tuple[int, RankFound] | None:
    """The rank of a single-process export, and where it came from, if anything says.

    In order: a recorded rank variable (``RANK``, or an MPI launcher's), a ``--rank``
    argument, the file name (``rank3``, ``worker3``), ``LOCAL_RANK``, ``--local_rank``.
    """
    args = " ".join(meta.args)
    for var in RANK_ENV:
        if (rank := _as_rank(meta.env.get(var))) is not None:
            return rank, RankFound("env", key=var)
    if (match := _RANK_ARG.search(args)) and is_rank(int(match[1])):
        return int(match[1]), RankFound("argument", key="--rank")
    if (named := rank_from_name(name)) is not None:
        return named, RankFound("file_name")
    if (rank := _as_rank(meta.env.get("LOCAL_RANK"))) is not None:
        return rank, RankFound("env", key="LOCAL_RANK")
    if (match := _LOCAL_RANK_ARG.search(args)) and is_rank(int(match[1])):
        return int(match[1]), RankFound("argument", key="--local_rank")
    return None


def device_memory(meta: ExportMeta, pid: int | None, device_ids: list[int]) -> tuple[tuple[int, int], ...]:
    """(CUDA device id, total bytes) of the GPUs a process used, where the export records them."""
    out = []
    for device in device_ids:
        gpu = meta.cuda_devices.get((pid, device), device) if pid is not None else device
        if gpu in meta.gpu_memory:
            out.append((device, meta.gpu_memory[gpu]))
    return tuple(out)


def device_names(meta: ExportMeta, pid: int | None, device_ids: list[int]) -> tuple[str, ...]:
    """Names of the GPUs a process used (CUDA device ids), where the export records them."""
    names = []
    for device in device_ids:
        gpu = meta.cuda_devices.get((pid, device), device) if pid is not None else device
        if gpu in meta.gpu_names:
            names.append(meta.gpu_names[gpu])
        elif meta.cuda_devices:
            names.append(f"GPU {gpu}")
    return tuple(dict.fromkeys(names))
