"""The ``tracekit`` command end to end: outputs, exit codes, one-line errors."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.conftest import SAMPLES
from tests.factories import simple_step, write_kineto
from tests.robustness.runner import run_cli
from tracekit import __version__
from tracekit.results.analysis import SCHEMA

if TYPE_CHECKING:
    from pathlib import Path


def tracekit(*args: str | Path, env_code: str = "", process: bool = False) -> subprocess.CompletedProcess[str]:
    """``tracekit ARGS`` as on a pipe: in this process (click's runner: no interpreter to start),
    or, with ``env_code`` to run first or ``process``, in a child process."""
    if not env_code and not process:
        out = run_cli([str(a) for a in args], timeout=120, color=False)
        assert out.code is not None, f"tracekit {args} took over 120 s"
        return subprocess.CompletedProcess(list(args), out.code, out.stdout, out.stderr)
    code = f"{env_code}\nfrom tracekit.cli.main import main\nimport sys\nsys.argv=['tracekit', *sys.argv[1:]]\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def test_version_and_module_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "tracekit", "--version"], capture_output=True, text=True, check=True)
    assert __version__ in out.stdout


def test_analyze_writes_summary_and_versioned_json(tmp_path: Path) -> None:
    for r in range(2):
        write_kineto(tmp_path / f"rank{r}.json.gz", simple_step(offset=r * 3.0), rank=r)
    out = tmp_path / "out.json"
    result = tracekit("analyze", tmp_path, "--json", out, "--top", "1", "--full")
    assert result.returncode == 0, result.stderr
    assert "GPU time breakdown per rank" in result.stdout
    assert "Top 1 GPU kernels" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["schema"] == SCHEMA and doc["schema_version"].startswith("2.")
    assert [r["rank"] for r in doc["run"]["ranks"]] == [0, 1]
    assert list(doc)[:5] == ["schema", "schema_version", "tracekit_version", "verdict", "run"]
    rank0 = doc["gpu_breakdown"]["per_rank"][0]
    assert sum(rank0[f"{p}_pct"] for p in ("compute", "comm", "memory", "idle")) == pytest.approx(100)


def test_cache_options(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for r in range(2):
        write_kineto(folder / f"rank{r}.json.gz", simple_step(offset=r * 3.0), rank=r)
    cache = tmp_path / "cache"
    cold = tracekit("analyze", folder, "--cache-dir", cache)
    assert cold.returncode == 0, cold.stderr
    assert len(list((cache / "events").glob("*.parquet"))) == 2
    assert cold.stderr == ""  # no progress display when stderr is not a terminal
    warm = tracekit("analyze", folder, "--cache-dir", cache)
    bypass = tracekit("analyze", folder, "--cache-dir", tmp_path / "unused", "--no-cache")

    # the same report, but for the analysis time it states
    def report(result: subprocess.CompletedProcess[str]) -> list[str]:
        return [line for line in result.stdout.splitlines() if "analysis time" not in line]

    assert report(warm) == report(cold) == report(bypass)
    assert not (tmp_path / "unused").exists()
    assert "--no-cache" in tracekit("analyze", "--help").stdout


def test_analyze_runs_without_torch(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step())
    block = "import sys; sys.modules['torch'] = None; sys.modules['accelerate'] = None"
    result = tracekit("analyze", tmp_path, env_code=block)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tracekit verdict")


#: mtime=0: the same bytes in every process (pytest-xdist's workers must collect the same tests)
_TRUNCATED_GZIP = gzip.compress(json.dumps({"traceEvents": [{"ph": "X"}] * 99}).encode(), mtime=0)[:-30]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (_TRUNCATED_GZIP, "truncated or corrupt gzip"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated JSON"),
        (b'{"hello": 1}', "not a Kineto trace"),
    ],
    ids=["empty", "corrupt-gzip", "truncated-json", "not-kineto"],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(content)
    result = tracekit("analyze", path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and reason in lines[0]


def test_folder_without_traces_and_bad_options(tmp_path: Path) -> None:
    result = tracekit("analyze", tmp_path)
    assert result.returncode == 2 and "no trace files" in result.stderr and "Traceback" not in result.stderr
    write_kineto(tmp_path / "rank0.json", simple_step())
    result = tracekit("analyze", tmp_path, "--ranks", "x")
    assert result.returncode == 2 and "--ranks" in result.stderr
    result = tracekit("analyze", tmp_path, "--top", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_skipped_rank_is_named_and_the_rest_analyzed(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step())
    (tmp_path / "rank1.json").write_bytes(b'{"traceEvents": [')
    out = tmp_path / "r.json"
    result = tracekit("analyze", tmp_path, "--json", out)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout and "rank1.json" in result.stdout
    doc = json.loads(out.read_text())
    assert [s["path"].endswith("rank1.json") for s in doc["run"]["skipped"]] == [True]


def test_unwritable_json_is_an_error(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step())
    result = tracekit("analyze", tmp_path, "--json", tmp_path / "missing" / "x.json")
    assert result.returncode == 2 and "cannot write" in result.stderr


def test_committed_sample_analyzes(monkeypatch: pytest.MonkeyPatch) -> None:
    # the README's first command: the short answer (issue 46, item 3: it was 230 lines of tables)
    monkeypatch.setenv("COLUMNS", "100")
    result = tracekit("analyze", SAMPLES / "captures" / "straggler")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tracekit verdict") and len(lines) <= 40
    assert "what to do first (by gain per effort):" in lines
    firsts = [line for line in lines if line.startswith(("  1. ", "  2. ", "  3. ", "  4. "))]
    assert 1 <= len(firsts) <= 3 and "gain at least" in result.stdout  # the fixes with what each is worth
    assert "8 rank(s), world size 8, backend gloo" in result.stdout  # the facts line
    assert " ".join(" ".join(lines[-2:]).split()) == (
        "the whole report: --full prints every table here; --md FILE and --html FILE write the whole report; "
        "--annotated-trace FILE marks the findings on the trace (Perfetto)"
    )
    assert "┃" not in result.stdout  # no table
    # rank 5's slow phase is named as the phase table names it, without the tracekit.phase/ prefix
    assert "Rank 5: its forward takes" in result.stdout and "tracekit.phase/" not in result.stdout

    full = tracekit("analyze", SAMPLES / "captures" / "straggler", "--full")
    assert full.returncode == 0, full.stderr
    assert "ranks: 8 (0-7)" in full.stdout and "backend: gloo" in full.stdout
    assert "Phases (host time per step" in full.stdout and full.stdout.startswith("tracekit verdict")


@pytest.mark.real
def test_analyze_nsys_export(shared_traces: Path) -> None:
    result = tracekit("analyze", shared_traces / "nsys" / "nsysai-mfu-2gpu-before.sqlite", "--full")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "ranks: 2 (0-1)" in out and "backend: nccl" in out and "process order by GPU" in out
    assert "GPU time breakdown per rank" in out and "ncclDevKernel_SendRecv" in out and "FlashAttnFunc" in out


def test_comm_kernel_pattern_makes_a_kernel_communication(tmp_path: Path) -> None:
    trace = write_kineto(
        tmp_path / "rank0.json",
        [
            {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "ts": 1,
                "dur": 1,
                "pid": 1,
                "tid": 1,
                "args": {"correlation": 5},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "my_custom_allreduce",
                "ts": 10,
                "dur": 50,
                "pid": 0,
                "tid": 7,
                "args": {"correlation": 5, "device": 0, "stream": 7},
            },
        ],
        world_size=1,
    )
    out = tmp_path / "a.json"
    result = tracekit("analyze", trace, "--no-cache", "--comm-kernel", "custom_allreduce", "--json", out)
    assert result.returncode == 0, result.stderr
    assert [r["category"] for r in json.loads(out.read_text())["kernels"]["top"]] == ["collective"]
    bad = tracekit("analyze", trace, "--no-cache", "--comm-kernel", "(unclosed")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unclosed" in bad.stderr
