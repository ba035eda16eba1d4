"""The local executor started ahead of the command's imports."""

from __future__ import annotations

import gzip
import subprocess
import sys
from typing import TYPE_CHECKING

from tracekit.executors import local
from tracekit.readers.formats import trace_suffixes
from tracekit.readers.parse import PARALLEL_MIN_BYTES

if TYPE_CHECKING:
    from pathlib import Path


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
