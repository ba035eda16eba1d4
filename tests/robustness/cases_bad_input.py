"""Commands on input no tracekit run writes: one line naming the file (or flag) and the field, exit 2.

Each case builds its input by hand in an empty folder (a copy of the sample sweep with one field
of ``sweep.json`` changed, a folder of repeated captures with a run emptied or of another config)
and returns the command line, or gives a sweep a grid axis that a flag of the same command fixes.
``code`` 0 cases are legitimate input that must render without a word on stderr (no numpy
warning). No case starts a rank. Run by ``test_commands.py``, each case alone.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
SWEEP = REPO / "samples" / "captures" / "cuda-h200-sweep"
CAPTURE = REPO / "samples" / "captures" / "healthy"


@dataclass(frozen=True)
class BadInputCase:
    """``build(folder)`` returns a command line; it exits ``code``: 2 with one line on stderr
    holding every one of ``needles``, or 0 with nothing on stderr."""

    name: str
    build: Callable[[Path], list[str]]
    needles: tuple[str, ...] = ()
    code: int = 2


def _report(edit: Callable[[dict[str, Any]], object]) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        sweep = Path(shutil.copytree(SWEEP, folder / "sweep"))
        data = json.loads((sweep / "sweep.json").read_bytes())
        edit(data)
        (sweep / "sweep.json").write_text(json.dumps(data))
        return ["sweep", "--report", str(sweep)]

    return build


def _cell(data: dict[str, Any], cell: str) -> dict[str, Any]:
    return next(r for r in data["runs"] if r["cell"] == cell and not r["probe"])


def _repeats(folder: Path, edit: Callable[[Path], object]) -> list[str]:
    """``compare A B``, A a folder of repeats (run1, run2) that ``edit`` breaks."""
    for name in ("run1", "run2"):
        shutil.copytree(CAPTURE, folder / "a" / name)
    edit(folder / "a")
    return ["compare", str(folder / "a"), str(CAPTURE)]


def _empty_run2(side: Path) -> None:
    shutil.rmtree(side / "run2")
    (side / "run2").mkdir()


def _other_config(side: Path) -> None:
    summary = side / "run2" / "summary.json"
    data = json.loads(summary.read_bytes())
    data["config"]["batch_size"] = 8
    summary.write_text(json.dumps(data))


def _config(data: bytes) -> Callable[[Path], list[str]]:
    """``capture`` with a config file holding ``data`` (refused before any rank starts)."""

    def build(folder: Path) -> list[str]:
        (folder / "cfg.json").write_bytes(data)
        return ["capture", "--config_path", str(folder / "cfg.json"), "--out_dir", str(folder / "out")]

    return build


def _trace(edit: Callable[[str], str], name: str = "rank0.json") -> Callable[[Path], list[str]]:
    """``analyze`` of rank 0 of the sample capture as plain JSON, its text changed by ``edit``."""

    def build(folder: Path) -> list[str]:
        import gzip

        text = gzip.decompress((CAPTURE / "rank0.pt.trace.json.gz").read_bytes()).decode()
        (folder / name).write_text(edit(text))
        return ["analyze", str(folder / name), "--no-cache"]

    return build


def _step_number(text: str) -> str:
    return text.replace('"ProfilerStep#', '"ProfilerStep#1844674407370955161')


CASES: list[BadInputCase] = [
    BadInputCase(
        "sweep-report-batch-size-0",
        _report(lambda d: d["runs"][0].update(batch_size=0)),
        ("sweep.json", "runs[0].batch_size is 0"),
    ),
    BadInputCase("sweep-report-empty-grid", _report(lambda d: d.update(grid=[])), ("sweep.json", "field grid")),
    BadInputCase(
        "sweep-report-values-of-another-axis",
        _report(lambda d: _cell(d, "batch_size=4").update(values={"nproc": "4"})),
        ("sweep.json", "runs[1].values"),
    ),
    BadInputCase(
        "sweep-report-cells-not-the-grid",
        _report(lambda d: d.update(grid=[{"key": "nproc", "values": ["2", "4"]}])),
        ("sweep.json", "field cells"),
    ),
    BadInputCase(
        "sweep-report-zero-step-time",
        _report(lambda d: _cell(d, "batch_size=4").update(step_ns=[0, 5_000_000], step_mean_ns=2_500_000.0)),
        code=0,
    ),
    BadInputCase(
        "compare-repeats-empty-run",
        lambda f: _repeats(f, _empty_run2),
        ("a/run2", "an empty run beside the repeats run1"),
    ),
    BadInputCase(
        "compare-repeats-different-configs",
        lambda f: _repeats(f, _other_config),
        ("runs run1 and run2", "different configs: batch_size (16 vs 8)"),
    ),
    BadInputCase(
        "sweep-grid-trace-with-no-trace",
        lambda f: ["sweep", "--grid", "trace=true,false", "--no-trace", "--nproc=1", "--out_dir", str(f / "sw")],
        ("--grid trace", "--no-trace"),
    ),
    BadInputCase(
        "sweep-grid-timeout-with-cell-timeout",
        lambda f: ["sweep", "--grid", "timeout=5,10", "--cell-timeout", "3", "--nproc=1", "--out_dir", str(f / "sw")],
        ("--grid timeout", "--cell-timeout"),
    ),
    BadInputCase("config-not-utf8", _config('{"out_dir": "caf\xe9"}'.encode("latin-1")), ("cfg.json", "not UTF-8")),
    BadInputCase(
        "config-nested-5000-deep",
        _config(b'{"workload_args": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"),
        ("cfg.json", "nests deeper"),
    ),
    BadInputCase(
        "config-batch-size-10e30",
        _config(b'{"batch_size": 1000000000000000000000000000000}'),
        ("batch_size", "at most 2,147,483,647"),
    ),
    BadInputCase("config-max-grad-norm-negative", _config(b'{"max_grad_norm": -1}'), ("max_grad_norm", "above 0")),
    BadInputCase(
        "compare-noise-threshold-nan",
        lambda f: ["compare", str(CAPTURE), str(CAPTURE), "--noise-threshold", "nan"],
        ("--noise-threshold", "not a finite number"),
    ),
    BadInputCase(
        "trace-nested-200000-deep",
        _trace(lambda t: t.replace("{", '{"x": ' + "[" * 200_000 + "]" * 200_000 + ",", 1)),
        ("rank0.json", "nests deeper"),
    ),
    BadInputCase("trace-step-numbers-beyond-64-bits", _trace(_step_number), code=0),
]
