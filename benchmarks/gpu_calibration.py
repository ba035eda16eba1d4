"""Every predicted gain against the measured one, on one GPU (``benchmarks/gpu_calibration.sh``).

``python -m benchmarks.gpu_calibration [--cpu] [--out DIR]`` runs, for each case, an A/B
capture (``tracekit capture --ab A B --repeats N``: A B A B ..., interleaved, one rank): A
carries a bottleneck, B is the same step with its fix. The predicted gain is A's: ``tracekit
analyze --json`` of each A run, the finding the fix addresses (its re-timed gain, and its share
of the ledger beside it; where the fix addresses two findings and the verdict re-timed them
together, their joint gain). The measured gain is ``tracekit compare``'s: the step's change
with its 95% interval. Judged by ``tracekit doctor``'s own rule (as
:mod:`benchmarks.gains_calibration` does): *as predicted* when the interval excludes zero and
holds the gain or the measured gain is within 25% of it.

=========  =========================================  =========================================
case       A                                          B
=========  =========================================  =========================================
data       ``num_workers=0``, 10 ms a sample          ``num_workers`` the doctor chooses: this
                                                      case is ``tracekit doctor`` end to end
transfer   pageable host batches (32 MiB)             ``pin_memory`` + ``non_blocking``
sync       a ``.item()`` in the forward               none
launch     many small ops, eager                      CUDA graphs (``make_graphed_callables``)
compute    fp32                                       bf16 autocast
optimizer  AdamW's for-loop step, 384 small tensors   ``fused=True``
memory     a growing scratch buffer (fragmenting)     ``expandable_segments:True`` (peak
                                                      reserved memory, not time)
=========  =========================================  =========================================

Where no finding predicts a fix (bf16 makes compute itself faster: no re-timing of the trace
predicts that), the table says so and the measured change is reported as not predicted. Then,
time allowing, one ``torch.compile`` capture of the launch case's model (a sample the project
lacks), and whether ``nsys`` is here (the Nsight path has run only on others' exports).

``--cpu`` runs every case small on CPU (gloo, one capture a side): the script's smoke test, in
CI. Results go to ``DIR`` (default ``$OUT``, else ``gpu-calibration``): ``gpu_calibration.md``
(the table), ``gpu_calibration.json``, ``gpu_calibration.log`` and ``captures.tar.gz`` (each
case's A/B folder, named ``cuda-<gpu>-cal-<case>``, with the first run of each side's trace and
every run's summary; the doctor's folder; the compile capture), rewritten after every case so
that a run stopped at its limit still brings back what it finished. Exit status: 0 when every
case ran, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tarfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from benchmarks.gains_calibration import _verdict, step_gain
from tracekit.results.vocab import MemoryNote

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

from benchmarks.gpu_check import CONFIGS, ROOT, Runner, _flags, _last, start_run

#: The whole run's limit (the issue's 8 minutes); what each stage needs at least to start.
DEADLINE_S: Final = 480.0
CASE_MIN_S: Final = 75.0
DOCTOR_MIN_S: Final = 110.0
COMPILE_MIN_S: Final = 60.0
#: Time kept for the analyses and the report after the last capture.
ANALYSIS_S: Final = 45.0
WORKLOADS: Final = ROOT / "benchmarks" / "gpu_workloads" / "calibration.py"
#: The A/B captures' steps: as gpu_check's A/B (warm-up 3: a graph is recorded in the first step)
STEPS: Final = {"warmup_steps": "3", "measured_steps": "8", "profiler.active": "6"}
CPU_STEPS: Final = {"warmup_steps": "2", "measured_steps": "4", "profiler.active": "3"}
#: The healthy GPU model of gpu_check (210M parameters, 13 ms a step on an H200, compute-bound)
BIG: Final = {
    "workload_args": json.dumps({"in_features": 1024, "hidden": 8192, "depth": 4}),
    "batch_size": "256",
    "num_workers": "4",
    "persistent_workers": "true",
    "pin_memory": "true",
}


def _workload(name: str) -> str:
    return f"{WORKLOADS}:{name}"


@dataclass(frozen=True)
class Case:
    """One A/B: the bottleneck (A), its fix (B), the findings whose gain predicts the fix."""

    name: str
    a_words: str
    b_words: str
    a: str
    b: str
    #: the findings (BoundKind values) the fix addresses; () when none predicts it
    bounds: tuple[str, ...]
    gpu: dict[str, str]
    cpu: dict[str, str]
    #: what is measured: the step's time, or the peak of reserved device memory
    measure: str = "step"
    #: B on CPU, where the fix needs a GPU (A against itself: the plumbing alone)
    cpu_b: str | None = None
    why_unpredicted: str = ""


CASES: Final = (
    Case(
        "launch",
        "many small ops (16 x Linear+LayerNorm+GELU, width 256, batch 64), eager",
        "the same under CUDA graphs (`make_graphed_callables`)",
        "",
        "workload_args.graphs=true",
        ("launch-bound",),
        {"workload": _workload("launch"), "batch_size": "64", "workload_args": "{}"},
        {"workload": _workload("launch"), "batch_size": "8", "workload_args": json.dumps({"depth": 4, "width": 32})},
        cpu_b="",
    ),
    Case(
        "optimizer",
        "AdamW's for-loop step over 384 small tensors",
        "`optimizer_impl=fused` (AdamW(fused=True))",
        "",
        "optimizer_impl=fused",
        ("launch-bound",),
        {"workload": _workload("many_params"), "batch_size": "64", "workload_args": "{}"},
        {
            "workload": _workload("many_params"),
            "batch_size": "8",
            "workload_args": json.dumps({"width": 64, "tensors": 64}),
        },
    ),
    Case(
        "transfer",
        "pageable batches of 32 MiB, blocking copies",
        "`pin_memory=true` (pinned, `non_blocking`)",
        "pin_memory=false",
        "pin_memory=true",
        ("transfer-bound", "sync-bound"),
        {"workload": _workload("transfer"), "batch_size": "256", "num_workers": "2", "workload_args": "{}"},
        {
            "workload": _workload("transfer"),
            "batch_size": "16",
            "num_workers": "1",
            "workload_args": json.dumps({"features": 1024}),
        },
    ),
    Case(
        "memory",
        "a scratch buffer 64 MiB larger every forward (from 256 MiB)",
        "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`",
        "",
        "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        ("fragmentation",),
        {
            "workload": _workload("fragment"),
            "batch_size": "64",
            "profiler.profile_memory": "true",
            "workload_args": "{}",
        },
        {
            "workload": _workload("fragment"),
            "batch_size": "8",
            "profiler.profile_memory": "true",
            "workload_args": json.dumps({"width": 64, "base_mb": 1, "grow_mb": 1}),
        },
        measure="reserved",
    ),
    Case(
        "compute",
        "fp32, the 210M-parameter MLP (batch 256)",
        "`mixed_precision=bf16` (autocast)",
        "",
        "mixed_precision=bf16",
        (),
        BIG,
        {"workload_args": json.dumps({"hidden": 64, "depth": 2}), "batch_size": "8"},
        why_unpredicted="no re-timing of a trace makes compute itself faster: bf16's gain is not predicted",
    ),
    Case(
        "sync",
        "a `.item()` in every forward (the 210M-parameter MLP)",
        "none",
        "workload_args.host_sync=true",
        "",
        ("sync-bound",),
        BIG,
        {"workload_args": json.dumps({"hidden": 64, "depth": 2}), "batch_size": "8"},
    ),
)


@dataclass
class Row:
    """One case's outcome: what ran, the prediction, the measurement, the agreement."""

    case: str
    a: str
    b: str
    status: str = "not run"
    seconds: float = 0.0
    capture_s: list[float] = field(default_factory=list)
    predicted: dict[str, Any] = field(default_factory=dict)
    measured: dict[str, Any] = field(default_factory=dict)
    judged: dict[str, Any] = field(default_factory=dict)
    after: str | None = None
    note: str = ""
    #: where each capture's time went: the mean over the case's runs of the rank's age (s) at each
    #: mark of its timeline (``phases.rank0.json``'s ``timeline_s``)
    timeline_s: dict[str, float] = field(default_factory=dict)


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _runs(side: Path) -> list[Path]:
    return sorted(p for p in side.iterdir() if p.is_dir() and p.name.startswith("run")) or [side]


def _analyze(runner: Runner, run: Path) -> dict[str, Any] | None:
    """``tracekit analyze RUN --json --md`` beside the run; its JSON, or None."""
    report = run.parent / f"{run.name}.analysis.json"
    done = runner.tracekit("analyze", run, "--json", report, "--md", run.parent / f"{run.name}.analysis.md", limit=90)
    return _json(report) if done.returncode == 0 and report.is_file() else None


def _finding(result: dict[str, Any], bounds: tuple[str, ...]) -> dict[str, Any]:
    """The gain and share of the findings in ``bounds`` in one analysis: the largest gain among
    them, or their joint gain where the verdict re-timed two of them together."""
    verdict = result["verdict"]
    found = [g for g in verdict.get("gains", []) if g["bound"] in bounds]
    joint = verdict.get("joint") or {}
    both = len(found) > 1 and set(joint.get("bounds", [])) <= set(bounds) and len(joint.get("bounds", [])) > 1
    best = max(found, key=lambda g: g.get("gain_pct") or 0.0, default=None)
    gain = joint["gain_pct"] if both else (best or {}).get("gain_pct")
    return {
        "bound": "+".join(joint["bounds"]) if both else (best or {}).get("bound"),
        "gain_pct": 0.0 if gain is None else float(gain),
        "share_pct": float(sum(g["share_pct"] for g in found)),
        "limits": sorted({lim for g in found for lim in g.get("limits", [])}),
        "primary": verdict["primary"].get("bound") or verdict["primary"].get("note"),
        "step_ms": round(found[0]["step_ns"] / 1e6, 3) if found else None,
    }


def _memory_gap(result: dict[str, Any]) -> dict[str, Any]:
    """The fragmentation the analysis finds: reserved minus allocated at the peak, as a share of reserved."""
    rows = [r for r in result["memory"]["per_device"] if r.get("device_type") == "cuda"] or result["memory"][
        "per_device"
    ]
    if not rows:
        return {"bound": None, "gain_pct": 0.0, "share_pct": 0.0, "gap_bytes": None}
    row = max(rows, key=lambda r: r.get("peak_reserved_bytes") or 0)
    gap, reserved = row.get("gap_at_peak_bytes"), row.get("peak_reserved_bytes")
    pct = 100.0 * gap / reserved if gap and reserved else 0.0
    # the analysis's own finding (its threshold), by the vocabulary's name ("memory-fragmentation")
    noted = any(f["note"] == MemoryNote.FRAGMENTATION for f in result["memory"].get("findings", []))
    return {
        "bound": "fragmentation" if noted else None,
        "gain_pct": round(pct, 2),
        "share_pct": round(pct, 2),
        "gap_bytes": gap,
        "peak_reserved_bytes": reserved,
        "primary": result["verdict"]["primary"].get("bound"),
    }


def _predicted(runner: Runner, case: Case, out: Path) -> dict[str, Any]:
    """A's prediction in each A run, and its mean."""
    per_run = []
    for run in _runs(out / "a"):
        result = _analyze(runner, run)
        if result is None:
            continue
        per_run.append(_memory_gap(result) if case.measure == "reserved" else _finding(result, case.bounds))
    if not per_run:
        return {}
    return {
        "bound": per_run[0]["bound"],
        "gain_pct": round(statistics.fmean(p["gain_pct"] for p in per_run), 2),
        "share_pct": round(statistics.fmean(p["share_pct"] for p in per_run), 2),
        "per_run_gain_pct": [round(p["gain_pct"], 2) for p in per_run],
        "per_run": per_run,
    }


def _measured_step(runner: Runner, out: Path) -> dict[str, Any]:
    """B against A: the step's change as a gain (positive: B faster), with its 95% interval."""
    report = out.parent / f"{out.name}.compare.json"
    runner.tracekit("compare", out, "--json", report, "--md", out.parent / f"{out.name}.compare.md", limit=120)
    if not report.is_file():
        return {}
    return step_gain(_json(report)["step"], digits=3)


def _measured_reserved(out: Path) -> dict[str, Any]:
    """B against A: the peak of reserved device memory over the measured steps (each run's
    summary), its drop as a share of A's; the interval is the runs' range of that drop."""
    sides: dict[str, list[int]] = {}
    for side in ("a", "b"):
        values = []
        for run in _runs(out / side):
            memory = _json(run / "summary.json")["per_rank"][0].get("memory") or {}
            if memory.get("peak_reserved_bytes") is not None:
                values.append(int(memory["peak_reserved_bytes"]))
        sides[side] = values
    if not sides["a"] or not sides["b"]:
        return {"note": "no device memory measured (CPU)"}
    a, b = statistics.fmean(sides["a"]), statistics.fmean(sides["b"])
    drops = [100.0 * (x - y) / a for x in sides["a"] for y in sides["b"]]
    return {
        "a_mib": round(a / 2**20, 1),
        "b_mib": round(b / 2**20, 1),
        "gain_pct": round(100.0 * (a - b) / a, 2),
        "ci_pct": [round(min(drops), 2), round(max(drops), 2)],
        "change": "smaller" if b < a else "same",
    }


def _after(runner: Runner, out: Path) -> str | None:
    """The verdict of B's first run (the fixed step)."""
    result = _analyze(runner, _runs(out / "b")[0])
    if result is None:
        return None
    primary = result["verdict"]["primary"]
    share = primary.get("share_pct")
    return f"{primary.get('bound') or primary.get('note')}" + (f" ({share:.1f}%)" if share is not None else "")


def _capture(
    runner: Runner, out: Path, *flags: str, cpu: bool, timeout: int, limit: float
) -> subprocess.CompletedProcess[str]:
    """``tracekit capture`` of ``healthy.json`` on one rank into ``out``, the cases' steps, ``flags`` after."""
    steps = _flags(CPU_STEPS if cpu else STEPS)
    args = ("--config_path", CONFIGS / "healthy.json", f"--out_dir={out}", "--nproc=1", f"--timeout={timeout}")
    return runner.tracekit("capture", *args, *steps, *flags, limit=limit)


def run_case(runner: Runner, case: Case, slug: str, row: Row, *, cpu: bool) -> None:
    out = runner.work / f"{slug}-cal-{case.name}"
    sizes = case.cpu if cpu else case.gpu
    b = case.b if not cpu or case.cpu_b is None else case.cpu_b
    if cpu and case.cpu_b is not None:
        row.note = "the fix needs a GPU: on CPU, A against itself (the plumbing alone)"
    sides = ("--ab", case.a, b, "--repeats", "1" if cpu else "3")
    done = _capture(runner, out, *_flags(sizes), *sides, cpu=cpu, timeout=120, limit=330)
    if done.returncode != 0:
        row.status = f"capture failed ({done.returncode}): {_last(done)}"
        return
    ab = _json(out / "ab.json")
    row.capture_s = [round(o["seconds"], 1) for o in ab["order"]]
    row.timeline_s = _timeline([*_runs(out / "a"), *_runs(out / "b")])
    row.status = "captured"


def _timeline(runs: list[Path]) -> dict[str, float]:
    """The mean over ``runs`` of rank 0's age at each mark of its timeline (marks all share)."""
    lines = [_json(run / "phases.rank0.json").get("timeline_s") or {} for run in runs]
    marks = [m for m in (lines[0] if lines else {}) if all(m in line for line in lines)]
    return {m: round(statistics.fmean(line[m] for line in lines), 2) for m in marks}


def judge_case(runner: Runner, case: Case, slug: str, row: Row) -> None:
    """The analyses of a captured case: A's prediction, B against A, B's verdict."""
    out = runner.work / f"{slug}-cal-{case.name}"
    row.predicted = _predicted(runner, case, out)
    row.measured = _measured_reserved(out) if case.measure == "reserved" else _measured_step(runner, out)
    row.after = _after(runner, out)
    predicts = bool(case.bounds) and bool(row.predicted.get("bound"))
    if row.measured.get("note") and row.predicted:  # nothing this device can measure (CPU: no device memory)
        row.status, row.note, row.judged = "ok", str(row.measured["note"]), {"agreement": None}
        return
    if not row.measured.get("ci_pct") or not row.predicted:
        row.status = "analysis failed" if not row.predicted else "no measurement"
        row.judged = {"agreement": None}
        return
    row.judged = _verdict(row.predicted, row.measured, predicts=predicts)
    notes = [row.note] if row.note else []
    if not case.bounds:
        notes.append(case.why_unpredicted)
    elif not predicts:
        notes.append(f"A's analysis found no {' or '.join(case.bounds)}: no gain predicted")
    row.note = "; ".join(notes)
    row.status = "ok"


def run_doctor(runner: Runner, slug: str, row: Row, *, cpu: bool) -> None:
    """The data case: ``tracekit doctor`` on the data-bound config, end to end: its baseline,
    the DataLoader's ceiling, its num_workers trial (A/B, 3 a side), predicted against measured."""
    out = runner.work / f"{slug}-doctor"
    short = ("--trials=1", "--repeats=1", "--batches=20") if cpu else ("--trials=1", "--repeats=3", "--batches=30")
    done = runner.tracekit(
        "doctor",
        "--config_path",
        CONFIGS / "data_bound.json",
        "--nproc=1",
        f"--out={out}",
        "--budget=3m",
        *short,
        f"--md={runner.work / f'{slug}-doctor.md'}",
        limit=200,
    )
    record_path = out / "doctor.json"
    if not record_path.is_file():
        row.status = f"doctor failed ({done.returncode}): {_last(done)}"
        return
    record = _json(record_path)
    trials = [t for t in record.get("trials") or [] if "num_workers" in (t.get("overrides") or {})]
    if not trials or not trials[0].get("measured"):
        row.status = f"the doctor tried no num_workers ({done.returncode}): {_last(done)}"
        return
    trial = trials[0]
    row.b = f"`num_workers={trial['overrides']['num_workers']}` (the doctor's trial)"
    predicted, measured = trial.get("predicted") or {}, trial["measured"]
    row.predicted = {
        "bound": predicted.get("bound"),
        # the names since analysis 2.9 (expected_pct and up_to_pct before)
        "gain_pct": round(predicted.get("gain_pct", predicted.get("expected_pct")) or 0.0, 2),
        "share_pct": round(predicted.get("share_pct", predicted.get("up_to_pct")) or 0.0, 2),
        "limits": predicted.get("limits"),
    }
    row.measured = {
        "a_ms": round(measured["a"] / 1e6, 3),
        "b_ms": round(measured["b"] / 1e6, 3),
        "gain_pct": measured["gain_pct"],
        "ci_pct": [measured["low_pct"], measured["high_pct"]],
        "change": measured["change"],
    }
    row.judged = _verdict(row.predicted, row.measured, predicts=bool(predicted))
    row.judged["doctor_agreement"] = trial.get("agreement")
    row.after = (trial.get("after") or {}).get("bound")
    row.status = "ok"


def run_compile(runner: Runner, slug: str, *, cpu: bool) -> dict[str, Any]:
    """One capture of the launch case's model under ``torch.compile`` (a sample), and its verdict."""
    out = runner.work / f"{slug}-compile"
    args = {"compile": True} if not cpu else {"compile": True, "depth": 2, "width": 32}
    flags = (f"--workload={_workload('launch')}", f"--workload_args={json.dumps(args)}", "--batch_size=64")
    done = _capture(runner, out, *flags, cpu=cpu, timeout=150, limit=170)
    if done.returncode != 0:
        return {"status": f"capture failed ({done.returncode}): {_last(done)}"}
    summary = _json(out / "summary.json")
    result = _analyze(runner, out)
    verdict = None if result is None else result["verdict"]["primary"]
    return {
        "status": "ok",
        "step_ms": round(summary["step"]["mean_ns"] / 1e6, 3),
        "verdict": None if verdict is None else verdict.get("bound") or verdict.get("note"),
    }


def compile_sample(runner: Runner, slug: str, extra: dict[str, Any], *, cpu: bool) -> None:
    """The torch.compile sample, where there is time for it."""
    if runner.left() < COMPILE_MIN_S + ANALYSIS_S:
        extra["compile"] = {"status": "not run: no time left"}
        return
    runner.say("== compile")
    try:
        extra["compile"] = run_compile(runner, slug, cpu=cpu)
    except Exception as exc:
        extra["compile"] = {"status": f"{type(exc).__name__}: {exc}"}
    runner.say(f"== compile: {extra['compile']}")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _predicted_words(row: Row, case_bounds: tuple[str, ...], measure: str) -> str:
    p = row.predicted
    if not p:
        return "-"
    if measure == "reserved":
        gap = (p.get("per_run") or [{}])[0].get("gap_bytes")
        return f"{_pct(p['gain_pct'])} of reserved" + (f" ({gap / 2**20:.0f} MiB gap at the peak)" if gap else "")
    if not case_bounds:
        return "none: no finding predicts it"
    if not p.get("bound"):
        return f"0 (no {' or '.join(case_bounds)} finding)"
    return f"{p['bound']} {_pct(p['gain_pct'])} ({_pct(p['share_pct'])})"


def _measured_words(row: Row) -> str:
    m = row.measured
    if not m.get("ci_pct"):
        return str(m.get("note", "-"))
    low, high = m["ci_pct"]
    unit = f"{m['a_mib']:.0f} -> {m['b_mib']:.0f} MiB" if "a_mib" in m else f"{m['a_ms']:.2f} -> {m['b_ms']:.2f} ms"
    return f"{_pct(m['gain_pct'])} [{low:.1f}, {high:.1f}] ({unit})"


def markdown(rows: list[Row], extra: dict[str, Any], env: dict[str, Any], device: str, wall: float) -> str:
    lines = [
        "# tracekit GPU calibration: predicted against measured",
        "",
        f"- device: {device}",
        f"- environment: {json.dumps(env)}",
        f"- wall time: {wall:.0f} s",
        "",
        "| case | A | B | predicted: gain (share) | measured [95%] | agreement | B reads |",
        "| --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    bounds = {c.name: (c.bounds, c.measure) for c in CASES}
    for row in rows:
        case_bounds, measure = bounds.get(row.case, (("data-bound",), "step"))
        agreement = row.judged.get("agreement") or row.status
        if row.note:
            agreement += f" ({row.note})"
        lines.append(
            f"| {row.case} | {row.a} | {row.b} | {_predicted_words(row, case_bounds, measure)} | "
            f"{_measured_words(row)} | {agreement} | {row.after or '-'} |"
        )
    timed = [r for r in rows if r.timeline_s]
    if timed:
        marks = list(timed[0].timeline_s)
        lines += [
            "",
            "Where each capture's time went: rank 0's process age (s) at each mark, the mean over the case's captures",
            "",
            "| case | " + " | ".join(marks) + " |",
            "| --- |" + " ---: |" * len(marks),
        ]
        lines += [f"| {r.case} | " + " | ".join(f"{r.timeline_s.get(m, 0):.2f}" for m in marks) + " |" for r in timed]
    lines += ["", "```json", json.dumps(extra, indent=1, default=str), "```"]
    return "\n".join(lines) + "\n"


def bundle(work: Path, slug: str, results: Path) -> None:
    """The cases' folders in one ``captures.tar.gz``: every summary, ab.json and report, and the
    trace of the first run of each side (the others' traces stay behind: the 16 MiB a file)."""
    path = results / "captures.tar.gz"
    tmp = results / ".captures.tar.gz.tmp"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = info.name.split("/")
        later = any(p.startswith("run") and not (p == "run1" or p.startswith("run1.")) for p in parts)
        if later and (".pt.trace.json" in info.name or ".analysis." in info.name):
            return None
        if "memory_snapshot" in info.name or info.name.endswith(".pickle"):
            return None
        return info

    with tarfile.open(tmp, "w:gz") as tar:
        for member in sorted(work.glob(f"{slug}-*")):
            tar.add(member, arcname=member.name, filter=keep)
    tmp.replace(path)


def capture_all(
    runner: Runner,
    slug: str,
    wanted: set[str],
    *,
    rows: list[Row],
    extra: dict[str, Any],
    write: Callable[[], None],
    cpu: bool,
) -> list[tuple[Case, Row]]:
    """Every wanted case captured in turn while there is time (the report rewritten after each);
    the cases captured, for :func:`judge_all`."""
    # what round 1 (stop 46) measured on a GPU last: data (the doctor) and sync
    order: list[tuple[str, Case | None]] = [(c.name, c) for c in CASES[:5]]
    order += [("compile", None), ("data", None), (CASES[5].name, CASES[5])]
    captured: list[tuple[Case, Row]] = []
    for name, case in order:
        if name not in wanted:
            continue
        if name == "compile":
            compile_sample(runner, slug, extra, cpu=cpu)
            write()
            continue
        row = Row(name, case.a_words if case else "`num_workers=0`, 10 ms a sample (data_bound.json)", "")
        row.b = case.b_words if case else "`num_workers` from the doctor"
        rows.append(row)
        need = (CASE_MIN_S if case else DOCTOR_MIN_S) + ANALYSIS_S
        if runner.left() < need:
            row.status = "not run: no time left"
            continue
        runner.say(f"== {name}")
        clock = time.monotonic()
        try:
            if case is None:
                run_doctor(runner, slug, row, cpu=cpu)
            else:
                run_case(runner, case, slug, row, cpu=cpu)
                if row.status == "captured":
                    captured.append((case, row))
        except Exception as exc:  # one case's bug must not lose the others
            row.status = f"{type(exc).__name__}: {exc}"
            runner.log.write(traceback.format_exc())
        row.seconds = round(time.monotonic() - clock, 1)
        runner.say(f"== {name}: {row.status} in {row.seconds:.0f} s")
        write()
    return captured


def judge_all(runner: Runner, slug: str, captured: list[tuple[Case, Row]]) -> None:
    """The captured cases' analyses, side by side (CPU work: after the captures, so as not to
    slow them), with the time they need past the deadline."""
    runner.deadline = max(runner.deadline, time.monotonic() + ANALYSIS_S)

    def judge(item: tuple[Case, Row]) -> None:
        case, row = item
        try:
            judge_case(runner, case, slug, row)
        except Exception as exc:
            row.status = f"analysis: {type(exc).__name__}: {exc}"
            runner.log.write(traceback.format_exc())

    with ThreadPoolExecutor(max_workers=max(1, min(len(captured), (os.cpu_count() or 2) // 2))) as pool:
        list(pool.map(judge, captured))


def repredict(results: Path) -> None:
    """Today's model on each case's committed first A run, into ``results``' ``repredicted_run1``
    (what ``tests/analyzers/test_gpu_calibration_samples.py`` holds the model to)."""
    import msgspec  # noqa: PLC0415

    from tracekit.analyzers import run_analysis  # noqa: PLC0415
    from tracekit.readers import load_run  # noqa: PLC0415

    doc = _json(results)
    slug = doc.get("slug", "cuda-h200")
    by_name = {c.name: c for c in CASES}
    for row in doc["cases"]:
        case = by_name.get(row["case"])
        sample = ROOT / "samples" / "captures" / f"{slug}-cal-{row['case']}-a"
        if case is None or not case.bounds or not sample.is_dir():
            continue
        # the prediction as the run made it (:func:`_finding`), of the analysis as its JSON holds it
        analysis = msgspec.to_builtins(run_analysis(load_run([sample], use_cache=False)).analysis)
        found = _memory_gap(analysis) if case.measure == "reserved" else _finding(analysis, case.bounds)
        if found["bound"] is None:
            row.pop("repredicted_run1", None)
            continue
        row["repredicted_run1"] = {
            "sample": sample.name,
            "bound": found["bound"],
            "gain_pct": round(found["gain_pct"], 2),
            "share_pct": round(found["share_pct"], 2),
        }
        measured = row["measured"].get("gain_pct")
        print(f"{row['case']}: {found['bound']} {found['gain_pct']:.2f}% (measured {measured}%)")
    results.write_text(json.dumps(doc, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on CPU as a smoke test of the script")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-calibration"))
    names = ["data", *(c.name for c in CASES), "compile"]
    parser.add_argument("--only", action="append", choices=names, help="run only these cases")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds the whole run may take")
    parser.add_argument(
        "--repredict",
        type=Path,
        metavar="RESULTS",
        help="capture nothing: today's model on each case's committed first A run "
        "(samples/captures/cuda-<gpu>-cal-<case>-a), written into RESULTS' repredicted_run1",
    )
    args = parser.parse_args(argv)
    if args.repredict is not None:
        repredict(args.repredict)
        return 0
    start, slug, device, runner, facts = start_run(args.cpu, args.out, "gpu-calibration", args.deadline)
    work = runner.work
    facts["nsys"] = shutil.which("nsys") or "not on the PATH: no Nsight Systems capture"
    runner.say(f"tracekit GPU calibration on {device}: {json.dumps(facts)}; work folder {work}")
    # on CPU the compile capture is left out unless asked for (inductor's C++ build: minutes on 2 cores)
    wanted = set(args.only or (names if not args.cpu else [n for n in names if n != "compile"]))
    rows: list[Row] = []
    extra: dict[str, Any] = {}

    def write() -> None:
        wall = time.monotonic() - start
        doc = {
            "device": device,
            "slug": slug,
            "environment": facts,
            "wall_s": round(wall, 1),
            "cases": [vars(r) for r in rows],
            **extra,
        }
        (args.out / "gpu_calibration.json").write_text(json.dumps(doc, indent=1, default=str))
        (args.out / "gpu_calibration.md").write_text(markdown(rows, extra, facts, device, wall))
        bundle(work, slug, args.out)

    captured = capture_all(runner, slug, wanted, rows=rows, extra=extra, write=write, cpu=args.cpu)
    judge_all(runner, slug, captured)
    write()
    failed = [r for r in rows if r.status != "ok"]
    for r in rows:
        runner.say(f"{r.case}: {r.status}; {r.judged.get('agreement')}")
    runner.say(f"done in {time.monotonic() - start:.0f} s: {len(rows) - len(failed)} of {len(rows)} cases ran")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
