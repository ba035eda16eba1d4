"""The local executor: started ahead of the command's imports, this process mapping beside its pool."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

from tracekit.executors import local
from tracekit.readers.formats import trace_suffixes
from tracekit.readers.parse import PARALLEL_MIN_BYTES


def test_the_pool_starts_early_only_where_a_pool_will_read() -> None:
    assert local.POOL_MIN_BYTES == PARALLEL_MIN_BYTES
    # its own copy of the formats' suffixes (importing the readers is what it starts ahead of)
    assert sorted(local._TRACE_SUFFIXES) == sorted(trace_suffixes())


def test_started_only_for_inputs_large_enough(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    (small / "rank0.json").write_text('{"traceEvents": []}')
    assert local.started([small], jobs=2, preload="json") is None
    big = tmp_path / "big"
    big.mkdir()
    # gzip records the size of its text: 70 MB of spaces compress to almost nothing
    (big / "rank0.json.gz").write_bytes(gzip.compress(b" " * (70 * 1024 * 1024), compresslevel=1))
    (big / "notes.txt").write_bytes(b"x")
    assert local.started([big], jobs=1, preload="json") is None  # one process: nothing to start
    assert local.started([big / "rank0.json.gz"], jobs=2, preload="json") is None  # one file: read in this process
    executor = local.started([big / "rank0.json.gz", tmp_path / "missing.json"], jobs=2, preload="json")
    assert executor is not None
    try:
        assert sorted(r for _, r in executor.map(abs, [-1, -2, -3])) == [1, 2, 3]
    finally:
        executor.close()


def test_importing_the_executor_does_not_import_the_readers() -> None:
    code = "import sys, tracekit.executors.local; print('polars' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _pid_of(item: tuple[str, int, int]) -> tuple[int, int]:
    """The item's number and the process that ran it; in the process ``parent``, once another
    process has run one (so that both take some, however slowly the other starts)."""
    folder, parent, x = item
    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while os.getpid() == parent and len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return x, os.getpid()


def test_this_process_maps_beside_the_pool(tmp_path: Path) -> None:
    """``jobs`` 2: this process and one spawned process take the items, each once."""
    executor = local.LocalExecutor(jobs=2)
    try:
        got = dict(executor.map(_pid_of, [(str(tmp_path), os.getpid(), x) for x in range(20)]))
        assert executor._pool is not None and executor._pool._max_workers == 1
    finally:
        executor.close()
    assert sorted(got) == list(range(20))
    assert all(got[i][0] == i for i in got)
    pids = {pid for _, pid in got.values()}
    assert os.getpid() in pids and len(pids) == 2


def _dies_elsewhere(item: tuple[int, int]) -> int:
    """``2 x``, in the process ``parent``; a pool's process dies on it."""
    parent, x = item
    if os.getpid() != parent:
        os._exit(1)
    return 2 * x


def test_items_whose_process_died_run_here() -> None:
    executor = local.LocalExecutor(jobs=3)
    try:
        got = dict(executor.map(_dies_elsewhere, [(os.getpid(), x) for x in range(6)]))
        assert executor._pool is None  # a broken pool is stopped
    finally:
        executor.close()
    assert got == {x: 2 * x for x in range(6)}


def test_a_started_pool_holds_a_process_less_than_jobs(tmp_path: Path) -> None:
    """This process is one of the ``jobs``: the pool started early spawns the others."""
    big = tmp_path / "big"
    big.mkdir()
    for r in range(2):
        (big / f"rank{r}.json.gz").write_bytes(gzip.compress(b" " * (40 * 1024 * 1024), compresslevel=1))
    executor = local.started([big], jobs=3, preload="json")
    assert executor is not None
    try:
        assert executor._pool is not None and executor._pool._max_workers == 2
    finally:
        executor.close()
