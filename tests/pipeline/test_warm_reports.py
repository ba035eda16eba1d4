"""``tracekit analyze`` cold, then warm (the map cache read, no worker started): every report the
same byte for byte but the time the analysis took; and the command line's warm-run hint."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES
from tracekit.cli import warm
from tracekit.readers.cache import CACHE_ENV, default_cache_dir

#: The lines and fields that say how long the analysis took (the only part a warm run changes).
TIMING = re.compile(rb'("analysis_seconds":\s*)[0-9.e+-]+|(analysis time[^0-9\n]*)[0-9.]+ s')


def _untimed(text: bytes) -> bytes:
    return TIMING.sub(lambda m: (m.group(1) or m.group(2)) + b"T", text)


def _reports(folder: Path, out: Path, cache: Path) -> dict[str, bytes]:
    out.mkdir()
    files = {fmt: out / f"a.{fmt}" for fmt in ("json", "md", "html")}
    flags = [x for fmt, path in files.items() for x in (f"--{fmt}", str(path))]
    done = run_tracekit("analyze", folder, *flags, "--cache-dir", cache, env={"COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    texts = {fmt: _untimed(path.read_bytes()) for fmt, path in files.items()}
    terminal = _untimed(done.stdout.encode())
    return texts | {"terminal": b"\n".join(line for line in terminal.splitlines() if not line.startswith(b"wrote "))}


@pytest.mark.parametrize("source", ["samples", "shared"])
def test_cold_and_warm_reports_are_the_same(source: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    folder = SAMPLES / "captures" / "straggler"
    if source == "shared":
        folder = request.getfixturevalue("kineto_dir") / "hta-sampled-2rank"
    cache = tmp_path / "cache"
    cold = _reports(folder, tmp_path / "cold", cache)
    assert list((cache / "maps").glob("*.msgpack")), "the cold run stored no map results"
    if source == "samples":  # a run with what-ifs (the shared one, sampled, has no verdict to re-time)
        assert list((cache / "whatifs").glob("*.msgpack")), "the cold run kept no re-timed gains"
    warm_run = _reports(folder, tmp_path / "warm", cache)
    for fmt in cold:
        assert warm_run[fmt] == cold[fmt], f"the warm {fmt} report differs from the cold one"
    assert re.search(rb"\"analysis_seconds\":\s*T", cold["json"])


def test_the_warm_hint_follows_the_files_and_the_options(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(SAMPLES / "captures" / "straggler", folder)
    options = {"cache_dir": tmp_path / "cache", "use_cache": True, "steps": None, "jobs": None}
    assert not warm.likely_warm([folder], options)
    warm.record([folder], options)
    assert warm.likely_warm([folder], options)
    assert not warm.likely_warm([folder], options | {"steps": "3-"})
    assert not warm.likely_warm([folder], options | {"jobs": 1})
    trace = folder / "rank0.pt.trace.json.gz"
    os.utime(trace, ns=(trace.stat().st_atime_ns, trace.stat().st_mtime_ns + 1))
    assert not warm.likely_warm([folder], options)
    assert not warm.likely_warm([folder], options | {"use_cache": False})


def test_the_hint_reads_the_cache_root_the_cache_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert warm.CACHE_ENV == CACHE_ENV
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "elsewhere"))
    assert warm.cache_root({}) == default_cache_dir()
    monkeypatch.delenv(CACHE_ENV)
    assert warm.cache_root({}) == default_cache_dir()
    assert warm.cache_root({"use_cache": False}) is None


def test_a_damaged_map_entry_is_one_warning_line(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = SAMPLES / "captures" / "straggler"
    assert run_tracekit("analyze", folder, "--cache-dir", cache).returncode == 0
    for entry in (cache / "maps").glob("*.msgpack"):
        entry.write_bytes(b"\x00garbage")
    done = run_tracekit("analyze", folder, "--cache-dir", cache)
    assert done.returncode == 0
    lines = [line for line in done.stderr.splitlines() if "map cache" in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tracekit: warning: the map cache entry ")
    assert "Traceback" not in done.stderr
