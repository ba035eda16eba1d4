"""The machine's and the input's odd corners that once ended as internal errors (issue 47): a
closed stdout, a latin-1 terminal, a folder name that is not UTF-8, a 20,000-digit number, a
reader that runs out of memory. Each is a result or one line naming the input, never exit 3."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.process import ROOT, run_tracekit
from tests.conftest import SAMPLES

HEALTHY = SAMPLES / "captures" / "healthy"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_a_closed_stdout_still_writes_the_files_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    command = [sys.executable, "-m", "tracekit", "analyze", str(HEALTHY), "--no-cache", "--json", str(out)]
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), check=False)
    assert done.returncode == 0
    closed = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "_", *command], stderr=subprocess.PIPE, env=_env(), check=False, text=True
    )
    assert closed.returncode == 0, closed.stderr
    assert "internal error" not in closed.stderr
    assert json.loads(out.read_text())["schema"] == "tracekit.analysis"


def test_a_latin1_terminal_prints_the_answer(tmp_path: Path) -> None:
    env = {**_env(), "PYTHONIOENCODING": "latin-1"}
    command = [sys.executable, "-m", "tracekit", "analyze", str(HEALTHY), "--no-cache"]
    done = subprocess.run(command, capture_output=True, env=env, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tracekit verdict" in done.stdout.decode("latin-1")


@pytest.mark.skipif(sys.platform != "linux", reason="names of any bytes are a Linux file system's")
def test_a_folder_whose_name_is_not_utf8(tmp_path: Path) -> None:
    folder = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"bad\xffname")))
    folder.mkdir()
    (folder / "rank0.pt.trace.json.gz").write_bytes((HEALTHY / "rank0.pt.trace.json.gz").read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", os.fsencode(folder), "--no-cache"],
        capture_output=True,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"tracekit verdict" in done.stdout


def test_a_20000_digit_number_in_an_event_is_named_where_it_is(tmp_path: Path) -> None:
    """It was reported as 'a JSON document without a traceEvents list', which is there."""
    text = gzip.decompress((HEALTHY / "rank0.pt.trace.json.gz").read_bytes()).decode()
    start = text.index('"ts": ', text.index('"ph": "X"')) + len('"ts": ')
    end = text.index(",", start)
    path = tmp_path / "rank0.json"
    path.write_text(text[:start] + "9" * 20_000 + text[end:])
    done = run_tracekit("analyze", path, "--no-cache", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"tracekit: error: {path}: a number at $.traceEvents[")
    assert done.stderr.endswith("is out of any range a trace's values have\n")


def test_a_reader_out_of_memory_skips_the_file_not_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of gigabytes of spaces ran out of memory: that file's problem, named as such."""
    from tracekit.readers import parse

    def oom(*_args: object, **_kwargs: object) -> list[object]:
        raise MemoryError

    monkeypatch.setattr(parse, "read_file", oom)
    result = parse._parse(str(HEALTHY / "rank0.pt.trace.json.gz"), None, None, in_worker=False)
    assert result.error == "too large to read in this machine's memory (one value or the whole file)"
