"""Commands that write, pointed at their own inputs: every output over an input is refused up front.

Each case builds, in an empty folder, the inputs a command reads (a config, a capture, a sweep,
a doctor folder) and returns the command line with an output that is one of them, under some
spelling (the same path, a symbolic link, a hard link, a path inside the folder the command
writes). Expected: exit 2, one line on stderr naming the output and the flag, no traceback, and
every input byte-for-byte as it was. The refusal comes before anything runs, so no case starts
a rank. Run by ``test_commands.py``, each case alone.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
#: A finished sweep that tracekit captured (cells/<cell>/summary.json, sweep.json).
SWEEP = REPO / "samples" / "captures" / "cuda-h200-sweep"
#: A finished capture (traces, summary.json).
CAPTURE = REPO / "samples" / "captures" / "healthy"
_CONFIG = {"workload": "mlp", "nproc": 1, "batch_size": 4, "warmup_steps": 2, "measured_steps": 3}


@dataclass(frozen=True)
class CommandCase:
    """A command line (``build(folder)`` returns it) that must be refused, naming ``needles``."""

    name: str
    build: Callable[[Path], list[str]]
    needles: tuple[str, ...]


def _config(folder: Path, name: str = "config.json") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_CONFIG))
    return path


def _copy(source: Path, folder: Path, name: str) -> Path:
    return Path(shutil.copytree(source, folder / name, symlinks=True))


def _cell_summary(sweep: Path) -> Path:
    return sorted(sweep.glob("cells/*/summary.json"))[0]


def _link(target: Path, link: Path, *, hard: bool = False) -> Path:
    if hard:
        os.link(target, link)
    else:
        link.symlink_to(target)
    return link


def _sweep_report_json(folder: Path) -> list[str]:
    sweep = _copy(SWEEP, folder, "sweep")
    return ["sweep", "--report", str(sweep), "--json", str(_cell_summary(sweep))]


def _sweep_report_md_link(folder: Path) -> list[str]:
    sweep = _copy(SWEEP, folder, "sweep")
    return ["sweep", "--report", str(sweep), "--md", str(_link(sweep / "sweep.json", folder / "report.md"))]


def _sweep_json_config(folder: Path) -> list[str]:
    config = _config(folder)
    out = ["--out_dir", str(folder / "sw")]
    return ["sweep", "--config_path", str(config), "--grid", "batch_size=2,4", *out, "--json", str(config)]


def _sweep_json_own_record(folder: Path) -> list[str]:
    sweep = _copy(SWEEP, folder, "sweep")
    args = ["--grid", "batch_size=2,4", "--out_dir", str(sweep), "--resume"]
    return ["sweep", "--config_path", str(_config(folder)), *args, "--json", str(sweep / "sweep.json")]


def _sweep_md_cell_hardlink(folder: Path) -> list[str]:
    sweep = _copy(SWEEP, folder, "sweep")
    link = _link(_cell_summary(sweep), folder / "cell.md", hard=True)
    return ["sweep", "--report", str(sweep), "--md", str(link)]


def _dataloader_capture_summary(folder: Path) -> list[str]:
    capture = _copy(CAPTURE, folder, "capture")
    args = ["--config_path", str(_config(folder)), "--out_dir", str(folder / "elsewhere")]
    return ["dataloader", *args, "--capture", str(capture), "--json", str(capture / "summary.json")]


def _dataloader_capture_trace_link(folder: Path) -> list[str]:
    capture = _copy(CAPTURE, folder, "capture")
    trace = sorted(capture.glob("rank*.pt.trace.json*"))[0]
    link = _link(trace, folder / "out.md")
    args = ["--config_path", str(_config(folder)), "--out_dir", str(folder / "elsewhere")]
    return ["dataloader", *args, "--capture", str(capture), "--md", str(link)]


def _dataloader_default_capture(folder: Path) -> list[str]:
    capture = _copy(CAPTURE, folder, "capture")
    args = ["--config_path", str(_config(folder)), "--out_dir", str(capture)]
    return ["dataloader", *args, "--md", str(capture / "summary.json")]


def _dataloader_json_config(folder: Path) -> list[str]:
    config = _config(folder)
    return ["dataloader", "--config_path", str(config), "--out_dir", str(folder / "o"), "--json", str(config)]


def _audit_config_link(folder: Path) -> list[str]:
    config = _config(folder)
    return ["audit-params", "--config_path", str(config), "--md", str(_link(config, folder / "audit.md"))]


def _doctor_own_record(folder: Path) -> list[str]:
    config = _config(folder)
    out = folder / "doc"
    return ["doctor", "--config_path", str(config), "--out", str(out), "--json", str(out / "doctor.json")]


def _doctor_json_config(folder: Path) -> list[str]:
    config = _config(folder)
    return ["doctor", "--config_path", str(config), "--out", str(folder / "doc"), "--json", str(config)]


def _capture_config_in_out_dir(folder: Path) -> list[str]:
    capture = _copy(CAPTURE, folder, "capture")
    config = _config(capture, "capture_config.json")
    return ["capture", "--config_path", str(config), "--out_dir", str(capture)]


def _compare_json_repeat_summary(folder: Path) -> list[str]:
    a, b = _copy(CAPTURE, folder, "a/run1"), _copy(CAPTURE, folder, "b")
    _copy(CAPTURE, folder, "a/run2")
    return ["compare", str(folder / "a"), str(b), "--json", str(a / "summary.json")]


CASES: list[CommandCase] = [
    CommandCase("sweep-report-json-over-cell-summary", _sweep_report_json, ("--json", "--report", "summary.json")),
    CommandCase("sweep-report-md-symlink-to-sweep-json", _sweep_report_md_link, ("--md", "--report", "sweep.json")),
    CommandCase("sweep-report-md-hardlink-to-cell-summary", _sweep_md_cell_hardlink, ("--md", "--report")),
    CommandCase("sweep-json-over-config", _sweep_json_config, ("--json", "--config_path")),
    CommandCase("sweep-json-over-own-sweep-json", _sweep_json_own_record, ("--json", "--out_dir", "sweep.json")),
    CommandCase("dataloader-json-over-capture-summary", _dataloader_capture_summary, ("--json", "--capture")),
    CommandCase("dataloader-md-symlink-to-capture-trace", _dataloader_capture_trace_link, ("--md", "--capture")),
    CommandCase("dataloader-md-over-out-dir-summary", _dataloader_default_capture, ("--md", "--out_dir")),
    CommandCase("dataloader-json-over-config", _dataloader_json_config, ("--json", "--config_path")),
    CommandCase("audit-params-md-symlink-to-config", _audit_config_link, ("--md", "--config_path")),
    CommandCase("doctor-json-over-own-doctor-json", _doctor_own_record, ("--json", "--out", "doctor.json")),
    CommandCase("doctor-json-over-config", _doctor_json_config, ("--json", "--config_path")),
    CommandCase("capture-config-inside-out-dir", _capture_config_in_out_dir, ("--config_path", "--out_dir")),
    CommandCase("compare-json-over-repeat-summary", _compare_json_repeat_summary, ("--json", "summary.json")),
]
