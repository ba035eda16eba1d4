"""Every check of tracekit's CUDA paths, on one GPU, in one run (``benchmarks/gpu_check.sh``).

``python -m benchmarks.gpu_check [--cpu] [--out DIR]`` runs, each through the ``tracekit``
command as a user would, and checks what each wrote:

1. ``healthy``: a 1-rank capture on CUDA with NCCL (``--backend nccl``: a process group of one,
   so DDP's gradient all-reduce runs through NCCL), then ``tracekit analyze``: kernels and phases
   in the trace. ``memory``: the same with the memory timeline and the allocator snapshot:
   device memory at phase boundaries, the peaks since the warm-up boundary, the timeline and
   the snapshot. ``small``: ``samples/configs/healthy.json`` as it is, microsecond kernels.
2. ``sync-ab``: the OpenTau issue's A/B (``--ab '' 'workload_args.sync_check=true' --repeats 3``),
   then ``tracekit compare --fail-if syncs:+0``, which must exit 1 with the sync found, its
   operator and its phase, and the step-time change with its interval.
3. ``gloo2-straggler``: 2 ranks sharing the GPU through gloo with CUDA tensors, rank 1 made a
   straggler: the collectives matched, rank 1 named.
4. ``sweep``: the sweep's OOM probe under a per-process memory fraction
   (``cuda_memory_fraction``) that brings a real CUDA ``OutOfMemoryError`` within a few
   doublings; ``data-bound-pinned``: a DataLoader-bound config with ``pin_memory`` and
   ``non_blocking`` copies, which must show as pinned, asynchronous host-to-device copies.
5. ``doctor``: ``tracekit doctor`` on the data-bound config, when the command exists.

``--cpu`` runs the same checks on CPU (``CUDA_VISIBLE_DEVICES=''``, gloo, small sizes, the
probe's OOM by ``--mem-budget-gb``) as a smoke test of the script itself: CI runs it so. The
results go to ``DIR`` (default ``$OUT``, else ``gpu-check``): ``gpu_check.md`` (what a person
reads: the device, wall time, each check with its figures, the A/B table), ``gpu_check.json``,
``gpu_check.log`` (every command and its output) and ``captures.tar.gz``: each check's capture
folder, named ``cuda-<gpu>-<check>`` (``cpu-<check>`` with ``--cpu``) to be committed under
``samples/captures/``, with its reports beside it. Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
CONFIGS: Final = ROOT / "samples" / "configs"
#: The whole run's limit (the issue's 8 minutes), each command's share of what is left.
DEADLINE_S: Final = 480.0
GIB: Final = 1 << 30


@dataclass(frozen=True)
class Sizes:
    """The workloads of one device: sized for a GPU, or small for the CPU smoke test."""

    backend: str
    #: the healthy MLP and the A/B: compute-bound on a GPU (about 210M parameters, batch 256)
    healthy: dict[str, str]
    #: 2 ranks through gloo: a smaller MLP (gloo moves gradients through the host)
    gloo2: dict[str, str]
    #: the sweep: a transformer whose activations grow with the batch
    sweep: dict[str, str]
    sweep_grid: str
    #: the straggler's injected delay (ms): on a GPU a few steps' worth of noise, on a loaded
    #: CPU machine more than the tens of ms its steps vary by (30 ms read 52 ms of waiting there)
    straggler_delay_ms: int
    #: the sweep's memory: a fraction of the GPU (GiB) or a budget on peak RSS (GiB)
    memory_cap_gib: float


#: How many times the straggler's delay the steps may vary (on CPU) before it is drowned in the
#: noise.
DROWNED: Final = 5
#: The straggler's injected delay on a GPU and on CPU (:attr:`Sizes.straggler_delay_ms`).
GPU_STRAGGLER_MS: Final = 30
CPU_STRAGGLER_MS: Final = 100

GPU: Final = Sizes(
    backend="nccl",
    healthy={
        "workload_args": json.dumps({"in_features": 1024, "hidden": 8192, "depth": 4}),
        "batch_size": "256",
        "num_workers": "4",
        "persistent_workers": "true",
        "pin_memory": "true",
    },
    gloo2={
        "workload_args": json.dumps(
            {
                "in_features": 1024,
                "hidden": 1024,
                "depth": 3,
                "straggler_rank": 1,
                "straggler_delay_ms": GPU_STRAGGLER_MS,
            }
        ),
        "batch_size": "256",
        "num_workers": "2",
        "pin_memory": "true",
    },
    sweep={
        "workload": "transformer",
        "workload_args": json.dumps({"vocab": 8192, "d_model": 512, "heads": 8, "layers": 4, "seq_len": 512}),
    },
    sweep_grid="batch_size=2,4",
    straggler_delay_ms=GPU_STRAGGLER_MS,
    memory_cap_gib=3.0,
)
CPU: Final = Sizes(
    backend="gloo",
    healthy={},
    gloo2={
        "workload_args": json.dumps({"straggler_rank": 1, "straggler_delay_ms": CPU_STRAGGLER_MS}),
        # steps enough that two or more are measured after the first, long one (gloo's set-up)
        "measured_steps": "6",
        "profiler.active": "5",
    },
    sweep={},
    sweep_grid="batch_size=8",
    straggler_delay_ms=CPU_STRAGGLER_MS,
    memory_cap_gib=0.01,  # below any process's RSS: the first cell is over it, the probe stops
)
STEPS: Final = {"warmup_steps": "2", "measured_steps": "4"}
#: The A/B's captures: more traced steps, a narrower interval
AB_STEPS: Final = {"measured_steps": "8", "profiler.active": "6"}


@dataclass
class Check:
    """One check's outcome: passed or not, what was measured, what failed."""

    name: str
    title: str
    passed: bool = False
    seconds: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None

    def expect(self, ok: bool, what: str) -> bool:
        """Record ``what`` as failed unless ``ok``."""
        if not ok:
            self.failures.append(what)
        return ok


class Runner:
    """Runs tracekit commands with a share of the time left, logging every command and its output."""

    def __init__(self, work: Path, log: Path, deadline: float, env: dict[str, str]) -> None:
        self.work, self.log_path, self.deadline, self.env = work, log, deadline, env
        self.log = log.open("a", encoding="utf-8")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def tracekit(self, *args: str | Path, limit: float = 240.0) -> subprocess.CompletedProcess[str]:
        """``python -m tracekit ARGS``; a command past its time is stopped (exit 124)."""
        cmd = [sys.executable, "-m", "tracekit", *map(str, args)]
        timeout = max(5.0, min(limit, self.left()))
        self.say(f"$ {' '.join(_quote(c) for c in cmd[1:])}   (limit {timeout:.0f} s)")
        start = time.monotonic()
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env=self.env, cwd=self.work, check=False
            )
        except subprocess.TimeoutExpired as exc:
            out = _text(exc.stdout) + _text(exc.stderr)
            done = subprocess.CompletedProcess(cmd, 124, out, f"stopped after {timeout:.0f} s")
        self.log.write(done.stdout + done.stderr)
        self.say(f"  -> exit {done.returncode} in {time.monotonic() - start:.1f} s")
        return done


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w./=:,+-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


def _flags(values: dict[str, str]) -> list[str]:
    return [f"--{k}={v}" for k, v in values.items()]


# -- reading what a capture wrote ---------------------------------------------------------


def trace_events(path: Path) -> list[dict[str, Any]]:
    """The events of one Kineto trace (``.json.gz``)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        events: list[dict[str, Any]] = json.load(f).get("traceEvents", [])
    return events


def trace_facts(path: Path) -> dict[str, Any]:
    """Counts of what one rank's trace holds: kernels (NCCL's among them), copies by name,
    tracekit's phases, and the blocking sync calls inside its ``h2d`` phases."""
    events = [e for e in trace_events(path) if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies: dict[str, int] = {}
    for e in events:
        if e.get("cat") == "gpu_memcpy":
            copies[e["name"]] = copies.get(e["name"], 0) + 1
    phases: dict[str, int] = {}
    for e in events:
        if str(e.get("name", "")).startswith("tracekit.phase/"):
            phases[e["name"]] = phases.get(e["name"], 0) + 1
    h2d = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("name") == "tracekit.phase/h2d"]
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    blocking = [
        e for e in runtime if re.search(r"Synchronize", e["name"]) and any(lo <= e["ts"] <= hi for lo, hi in h2d)
    ]
    copies_in_h2d = [e for e in runtime if "Memcpy" in e["name"] and any(lo <= e["ts"] <= hi for lo, hi in h2d)]
    return {
        "phase_gap_us_mean": _phase_gap_us(events),
        "kernels": len(kernels),
        "nccl_kernels": sum("nccl" in e["name"].lower() for e in kernels),
        "nccl_kernel_names": sorted({e["name"] for e in kernels if "nccl" in e["name"].lower()})[:3],
        "copies": copies,
        "phases": phases,
        "collective_ops": sorted({e["name"] for e in events if re.match(r"(nccl|gloo):", str(e.get("name", "")))}),
        "h2d_sync_calls": len(blocking),
        "h2d_copy_calls": len(copies_in_h2d),
        "h2d_copy_call_us_max": max((e.get("dur", 0) for e in copies_in_h2d), default=None),
        "capture_sync_ranges": sum(e.get("name") == "tracekit.capture/device_sync" for e in events),
    }


def _phase_gap_us(events: list[dict[str, Any]]) -> float | None:
    """Mean host time between one tracekit phase's end and the next one's start inside a step
    (tracekit's own bookkeeping: memory samples, progress), in microseconds."""
    phases = sorted(
        (e["ts"], e["ts"] + e.get("dur", 0))
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("tracekit.phase/")
    )
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(phases) if 0 <= b[0] - a[1] < 5_000]
    return round(sum(gaps) / len(gaps), 1) if gaps else None


def analysis(runner: Runner, folder: Path, check: Check) -> dict[str, Any] | None:
    """``tracekit analyze FOLDER --json --md`` beside the folder; its JSON, or None."""
    report = folder.parent / f"{folder.name}.analysis.json"
    done = runner.tracekit("analyze", folder, "--json", report, "--md", folder.parent / f"{folder.name}.analysis.md")
    if not check.expect(done.returncode == 0, f"analyze exited {done.returncode}: {_last(done)}"):
        return None
    result: dict[str, Any] = json.loads(report.read_text())
    primary = result["verdict"]["primary"]
    check.facts["verdict"] = f"{primary.get('bound') or primary.get('note')} ({_pct(primary.get('share_pct'))})"
    check.facts["verdict_headline"] = done.stdout.splitlines()[1] if len(done.stdout.splitlines()) > 1 else ""
    breakdown = result["gpu_breakdown"]["per_rank"]
    if breakdown:
        check.facts["gpu_breakdown_rank0"] = {
            k: round(v, 1) for k, v in breakdown[0].items() if k.endswith("_pct") and isinstance(v, (int, float))
        }
    return result


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _last(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return lines[-1] if lines else ""


# -- the checks ---------------------------------------------------------------------------


def capture(
    runner: Runner, config: str, out: Path, *flags: str, timeout: int = 180, limit: float = 240.0
) -> subprocess.CompletedProcess[str]:
    """``tracekit capture`` of ``samples/configs/CONFIG.json`` into ``out``, measured steps as every check's."""
    return runner.tracekit(
        "capture",
        "--config_path",
        CONFIGS / f"{config}.json",
        f"--out_dir={out}",
        f"--timeout={timeout}",
        *_flags(STEPS),
        *flags,
        limit=limit,
    )


def check_healthy(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """1 rank on the device through a process group of one (DDP: its all-reduce runs)."""
    out = runner.work / name
    done = capture(runner, "healthy", out, "--nproc=1", f"--backend={sizes.backend}", *_flags(sizes.healthy))
    if not check.expect(done.returncode == 0, f"capture exited {done.returncode}: {_last(done)}"):
        return
    summary = json.loads((out / "summary.json").read_text())
    env = summary["environment"]
    check.facts["environment"] = {k: env.get(k) for k in ("devices", "cuda", "backend", "distributed_type", "torch")}
    check.expect(env["backend"] == sizes.backend, f"backend {env['backend']}, not {sizes.backend}")
    check.expect(env["distributed_type"] in ("MULTI_GPU", "MULTI_CPU"), f"no DDP: {env['distributed_type']}")
    facts = trace_facts(out / "rank0.pt.trace.json.gz")
    check.facts["trace"] = facts
    wanted = {f"tracekit.phase/{p}" for p in ("dataload_wait", "h2d", "forward", "backward", "optim_step")}
    check.expect(wanted <= set(facts["phases"]), f"phases missing from the trace: {wanted - set(facts['phases'])}")
    check.expect(bool(facts["collective_ops"]), "no collective in the trace (DDP over a group of one)")
    check.facts["step_ms"] = round(summary["step"]["mean_ns"] / 1e6, 2)
    if cuda:
        check.expect(env["cuda"] is not None and "cpu" not in env["devices"], f"not on CUDA: {env['devices']}")
        check.expect(facts["kernels"] > 0, "no kernels in the trace")
        check.expect(facts["capture_sync_ranges"] > 0, "no tracekit.capture/device_sync range around the step-end sync")
    result = analysis(runner, out, check)
    if result is not None and cuda:
        check.expect(result["run"]["has_gpu"], "analyze found no GPU activity")
        # the capture's own step-end sync is no sync of the training (H200, 2026-11-27: 5.3%
        # "sync-bound" before the capture marked it)
        syncs = result["verdict"]["evidence"].get("sync_calls_per_step")
        check.expect(not syncs, f"{syncs} sync calls per step in a training that makes none")


def check_memory(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """The healthy capture with device memory at phase boundaries, the peaks since warm-up,
    the memory timeline and the allocator snapshot."""
    out = runner.work / name
    flags = ("--memory_timeline=true", "--memory_snapshot=true", *_flags(sizes.healthy))
    done = capture(runner, "healthy", out, "--nproc=1", f"--backend={sizes.backend}", *flags, timeout=240)
    if not check.expect(done.returncode == 0, f"capture exited {done.returncode}: {_last(done)}"):
        return
    phases = json.loads((out / "phases.rank0.json").read_text())
    memory = phases["memory"]
    check.facts["memory"] = {k: v for k, v in memory.items() if k.endswith("bytes") or k in ("device", "scope")}
    check.facts["notes"] = phases.get("notes")
    steps = phases["steps"]
    check.expect(bool(steps) and all(s.get("phase_memory") for s in steps), "no memory at phase boundaries")
    check.facts["phase_memory_step0"] = {k: v.get("delta") for k, v in (steps[0].get("phase_memory") or {}).items()}
    if cuda:
        check.expect(memory["device"] == "cuda", f"memory measured on {memory['device']}")
        samples = [m for s in steps for m in (s.get("memory_start") or {}, s.get("memory_end") or {})]
        samples += [v[edge] for s in steps for v in (s.get("phase_memory") or {}).values() for edge in ("start", "end")]
        boundary = max((m.get("allocated_bytes", 0) for m in samples), default=0)
        check.facts["largest_allocated_at_a_boundary"] = boundary
        check.expect(
            boundary <= memory["peak_allocated_bytes"] <= memory["peak_reserved_bytes"],
            "peaks inconsistent: allocated at a boundary <= peak allocated <= peak reserved does not hold",
        )
        snapshot = out / "memory_snapshot.rank0.pickle"
        if check.expect(snapshot.is_file(), "no allocator snapshot"):
            with snapshot.open("rb") as f:
                snap = pickle.load(f)  # the file this run just wrote
            traces = snap.get("device_traces") or [[]]
            check.facts["snapshot"] = {
                "segments": len(snap.get("segments", [])),
                "history_entries": sum(len(t) for t in traces),
                "bytes": snapshot.stat().st_size,
            }
            check.expect(check.facts["snapshot"]["history_entries"] > 0, "the snapshot recorded no history")
    timeline = out / "memory_timeline.rank0.raw.json.gz"
    if check.expect(timeline.is_file(), "no memory timeline"):
        with gzip.open(timeline, "rt") as f:
            rows = json.load(f)
        check.facts["memory_timeline_rows"] = len(rows)
        check.expect(len(rows) > 0, "the memory timeline is empty")
    check.facts["trace_phase_gap_us"] = trace_facts(out / "rank0.pt.trace.json.gz")["phase_gap_us_mean"]
    analysis(runner, out, check)


def check_small(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """``samples/configs/healthy.json`` as it is (a 0.7M-parameter MLP, batch 16) on the device:
    kernels of microseconds, so the host's launches set the pace."""
    out = runner.work / name
    done = capture(runner, "healthy", out, "--nproc=1", f"--backend={sizes.backend}")
    if not check.expect(done.returncode == 0, f"capture exited {done.returncode}: {_last(done)}"):
        return
    summary = json.loads((out / "summary.json").read_text())
    check.facts["step_ms"] = round(summary["step"]["mean_ns"] / 1e6, 2)
    check.facts["trace"] = {
        k: v for k, v in trace_facts(out / "rank0.pt.trace.json.gz").items() if k in ("kernels", "phase_gap_us_mean")
    }
    analysis(runner, out, check)


def check_sync_ab(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """The OpenTau issue's A/B: does one 1-byte device-to-host read per step cost anything?"""
    out = runner.work / name
    done = capture(
        runner,
        "healthy",
        out,
        "--nproc=1",
        f"--backend={sizes.backend}",
        *_flags(sizes.healthy),
        *_flags(AB_STEPS),
        "--ab",
        "",
        "workload_args.sync_check=true",
        "--repeats",
        # the CPU smoke test (CI) checks the plumbing and the count of syncs, which one run a
        # side already tells (a gate on syncs, not on time, takes one run a side)
        "3" if cuda else "1",
        timeout=120,
        limit=300,
    )
    if not check.expect(done.returncode == 0, f"A/B capture exited {done.returncode}: {_last(done)}"):
        return
    report = runner.work / f"{name}.compare.json"
    md = runner.work / f"{name}.compare.md"
    gate = runner.tracekit("compare", out, "--json", report, "--md", md, "--fail-if", "syncs:+0")
    check.facts["gate_exit"] = gate.returncode
    check.expect(gate.returncode == 1, f"--fail-if syncs:+0 exited {gate.returncode}, not 1: {_last(gate)}")
    if not report.is_file():
        check.failures.append("compare wrote no JSON")
        return
    result = json.loads(report.read_text())
    syncs = result.get("syncs") or {}
    check.facts["syncs"] = {k: syncs.get(k) for k in ("measure", "a_per_step", "b_per_step", "delta")}
    sources = [
        {"op": s["name"], "phase": s.get("phase"), "kind": s.get("sync_kind"), "b_per_step": s.get("b_count")}
        for s in syncs.get("sources", [])
    ]
    check.facts["sync_sources"] = sources
    check.expect(syncs.get("delta") is not None and syncs["delta"] >= 0.99, f"B does not add a sync per step: {syncs}")
    check.expect(any("forward" in str(s["phase"]) for s in sources), f"no sync source in the forward phase: {sources}")
    check.facts["step_time"] = _step_measure(result)
    check.facts["compare_md"] = md.name


def _step_measure(result: dict[str, Any]) -> dict[str, Any]:
    """The step time of a compare report: both sides' means, the change, its interval, the call."""
    step = result.get("step") or {}
    keep = ("a", "b", "delta", "delta_pct", "ci", "detectable", "n_a", "n_b", "change", "note")
    return {k: step.get(k) for k in keep}


def check_gloo2(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """2 ranks on one GPU through gloo with CUDA tensors; rank 1 is made a straggler."""
    out = runner.work / name
    done = capture(runner, "healthy", out, "--nproc=2", "--backend=gloo", *_flags(sizes.gloo2))
    if not check.expect(done.returncode == 0, f"capture exited {done.returncode}: {_last(done)}"):
        return
    for rank in (0, 1):
        facts = trace_facts(out / f"rank{rank}.pt.trace.json.gz")
        check.facts[f"trace_rank{rank}"] = {k: facts[k] for k in ("kernels", "collective_ops", "copies")}
        if cuda:
            check.expect(facts["kernels"] > 0, f"rank {rank}: no kernels")
    result = analysis(runner, out, check)
    if result is None:
        return
    collectives = result["collectives"]
    check.facts["collectives"] = {
        "count": collectives["count"],
        "match": collectives["match"],
        "ops": sorted({i["op"] for i in collectives["instances"]}),
        "complete": sum(bool(i.get("complete")) for i in collectives["instances"]),
    }
    check.expect(collectives["count"] > 0 and collectives["match"] == "complete", f"collectives: {check.facts}")
    stragglers = result["stragglers"]["stragglers"]
    check.facts["stragglers"] = [
        {k: s.get(k) for k in ("rank", "times_last", "instances", "cause", "phase", "cause_excess_ns")}
        for s in stragglers
    ]
    spread_ms = _step_spread_ms(result)
    check.facts["step_spread_ms"] = spread_ms
    delay = sizes.straggler_delay_ms
    if not cuda and not stragglers and spread_ms > DROWNED * delay:
        # on a loaded CPU machine the steps can vary by ten times the injected delay: then nothing
        # tells the straggler from the noise, and the check has nothing to assert (on the GPU it
        # always asserts)
        check.skipped = f"steps vary by {spread_ms:.0f} ms, over {DROWNED}x the {delay} ms delay"
        return
    check.expect(bool(stragglers) and stragglers[0]["rank"] == 1, f"rank 1 not named the straggler: {stragglers}")


def _step_spread_ms(result: dict[str, Any]) -> float:
    """How far the measured steps' durations (each the slowest rank's) lie apart, ms."""
    slowest: dict[int, int] = {}
    for row in result["steps"]["per_step"]:
        slowest[row["step"]] = max(slowest.get(row["step"], 0), int(row["duration_ns"]))
    return (max(slowest.values()) - min(slowest.values())) / 1e6 if slowest else 0.0


def check_sweep(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """The OOM probe: a real CUDA OutOfMemoryError under a per-process memory fraction."""
    out = runner.work / name
    cap: list[str]
    if cuda:
        import torch  # noqa: PLC0415 (after CUDA_VISIBLE_DEVICES is set)

        total = torch.cuda.get_device_properties(0).total_memory
        fraction = round(sizes.memory_cap_gib * GIB / total, 5)
        check.facts["cuda_memory_fraction"] = fraction
        check.facts["cap_gib"] = round(fraction * total / GIB, 2)
        cap = [f"--cuda_memory_fraction={fraction}"]
    else:
        cap = ["--mem-budget-gb", str(sizes.memory_cap_gib)]
    done = runner.tracekit(
        "sweep",
        "--config_path",
        CONFIGS / "healthy.json",
        "--nproc=1",
        "--grid",
        sizes.sweep_grid,
        "--probe-oom",
        "--no-trace",
        "--warmup_steps=1",
        "--measured_steps=2",
        "--cell-timeout",
        "90",
        f"--out_dir={out}",
        "--md",
        runner.work / f"{name}.md",
        "--json",
        runner.work / f"{name}.matrix.json",
        *cap,
        *_flags(sizes.sweep),
        limit=300,
    )
    if not check.expect(done.returncode == 0, f"sweep exited {done.returncode}: {_last(done)}"):
        return
    sweep = json.loads((out / "sweep.json").read_text())
    runs = [
        {
            "batch_size": r["batch_size"],
            "status": r["status"],
            "probe": r["probe"],
            "reason": (r.get("reason") or "")[:160],
        }
        for r in sweep["runs"]
    ]
    check.facts["runs"] = runs
    probes = sweep.get("probes") or []
    check.facts["probes"] = [{k: p.get(k) for k in ("tried", "last_fit", "first_oom", "stopped")} for p in probes]
    ooms = [r for r in runs if r["status"] == "oom"]
    check.expect(bool(ooms), "no capture ran out of memory")
    if cuda:
        check.expect(
            any("OutOfMemoryError" in r["reason"] or "out of memory" in r["reason"] for r in ooms),
            "no OOM was a CUDA OutOfMemoryError",
        )
        check.expect(bool(probes) and probes[0].get("first_oom") is not None, "the probe found no first OOM")
        check.expect(bool(probes) and probes[0].get("last_fit") is not None, "the probe found no last fit")
    check.facts["matrix_md"] = f"{name}.md"


def check_pinned(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """A DataLoader-bound config with pinned memory and non_blocking copies."""
    out = runner.work / name
    # more measured steps than the 2 workers x prefetch 2 batches made ahead while the profiler
    # starts: with 4 measured steps all could be ready, and the verdict depended on timing
    steps: tuple[str, ...] = ("--measured_steps=12", "--profiler.active=10")
    if not cuda:
        # on CPU the step's compute is milliseconds, not microseconds, and grows on a loaded
        # machine by far more than its share of the cores: beside the other tests in CI the
        # 512-wide model's step took 398 ms (its threads contending), against 20 ms a step of
        # batches from 2 workers at 40 ms each, and read compute-bound, rightly. A 64-wide
        # layer's step is about 10 ms here, 45 ms beside 4 busy loops, and more than half of
        # a 200 ms step (400 ms a batch from 2 workers) once in CI (stop 63's run: compute-bound,
        # rightly again). 800 ms a batch (50 ms a sample, 16 a batch; 400 ms a step from 2
        # workers) leaves the wait for data the step's larger part up to about 20 times the
        # step's unloaded compute; 8 traced steps (4 before them: the 2 workers' 4 batches made
        # ahead) keep the check to 5 s of batches
        args = {"hidden": 64, "depth": 1, "loader_delay_ms": 50}
        steps = ("--measured_steps=10", "--profiler.active=8", f"--workload_args={json.dumps(args)}")
    done = capture(runner, "data_bound", out, "--nproc=1", "--pin_memory=true", "--num_workers=2", *steps)
    if not check.expect(done.returncode == 0, f"capture exited {done.returncode}: {_last(done)}"):
        return
    facts = trace_facts(out / "rank0.pt.trace.json.gz")
    check.facts["trace"] = {k: facts[k] for k in ("copies", "h2d_sync_calls", "h2d_copy_calls", "h2d_copy_call_us_max")}
    if cuda:
        h2d = {k: v for k, v in facts["copies"].items() if "HtoD" in k}
        pinned = sum(v for k, v in h2d.items() if "Pinned" in k)
        check.expect(pinned > 0, f"no pinned host-to-device copy: {h2d}")
        check.expect(not any("Pageable" in k for k in h2d), f"pageable host-to-device copies: {h2d}")
        check.expect(facts["h2d_copy_calls"] > 0, "no copy call inside the h2d phases")
        check.expect(facts["h2d_sync_calls"] == 0, f"{facts['h2d_sync_calls']} sync calls inside the h2d phases")
    result = analysis(runner, out, check)
    if result is not None:
        primary = result["verdict"]["primary"]
        named = [primary.get("bound"), *primary.get("components", [])]
        check.expect("data-bound" in named, f"verdict {primary.get('bound')} {named[1:]}, data-bound not named")


def check_doctor(runner: Runner, sizes: Sizes, name: str, check: Check, cuda: bool) -> None:
    """``tracekit doctor`` on the data-bound config: the baseline reads data-bound, the loader's
    ceiling is measured, and the top knob (more DataLoader workers) is tried by A/B capture, its
    measured gain against the predicted one."""
    probe = runner.tracekit("doctor", "--help", limit=30)
    if probe.returncode != 0:
        check.skipped = "tracekit has no doctor command yet"
        return
    out = runner.work / name
    # the CPU smoke test (CI) keeps it short: one knob (more workers, which it checks), one
    # capture a side, the loader timed over 20 batches of 160 ms (tests/capture/test_doctor_e2e.py
    # runs the doctor itself)
    short = ("--trials=2",) if cuda else ("--trials=1", "--repeats=1", "--batches=20")
    done = runner.tracekit(
        "doctor",
        "--config_path",
        CONFIGS / "data_bound.json",
        "--nproc=1",
        f"--out_dir={out}",
        "--budget=4m",
        *short,
        f"--md={runner.work / f'{name}.md'}",
        limit=270,
    )
    check.expect(done.returncode == 0, f"doctor exited {done.returncode}: {_last(done)}")
    record_path = out / "doctor.json"
    if not check.expect(record_path.is_file(), "no doctor.json"):
        return
    record = json.loads(record_path.read_text())
    baseline = (record.get("baseline") or {}).get("verdict", {}).get("primary", {})
    check.facts["verdict"] = f"baseline {baseline.get('bound')} ({_pct(baseline.get('share_pct'))})"
    check.facts["baseline"] = {
        "device": (record.get("baseline") or {}).get("device"),
        "step_ms": round(((record.get("baseline") or {}).get("step_mean_ns") or 0) / 1e6, 2),
        "bound": baseline.get("bound"),
        "predicted": baseline.get("gain"),
    }
    check.facts["trials"] = [
        {
            "knob": t.get("overrides"),
            "status": (t.get("run") or {}).get("status"),
            "predicted_gain_pct": (t.get("predicted") or {}).get("gain_pct"),
            "measured": t.get("measured"),
            "agreement": t.get("agreement"),
            "after": (t.get("after") or {}).get("bound"),
        }
        for t in record.get("trials") or []
    ]
    check.expect(baseline.get("bound") == "data-bound", f"baseline verdict {baseline.get('bound')}, not data-bound")
    check.expect(record.get("loader") is not None, "no DataLoader ceiling measured")
    workers = [t for t in check.facts["trials"] if "num_workers" in (t["knob"] or {})]
    if check.expect(bool(workers), f"num_workers was not tried: {check.facts['trials']}"):
        measured = workers[0]["measured"] or {}
        check.expect(workers[0]["status"] == "ok" and bool(measured), f"the num_workers trial: {workers[0]}")
        if cuda:  # beside CI's other tests the CPU's interval is too wide to ask this of it
            check.expect((measured.get("low_pct") or 0) > 0, f"more workers not measured faster: {measured}")


CHECKS: Final = (
    ("healthy", "1-rank CUDA capture (NCCL), analyze", check_healthy),
    ("memory", "device memory per phase, peaks, timeline, snapshot", check_memory),
    ("small", "the sample config as it is: microsecond kernels", check_small),
    ("sync-ab", "the per-step sync A/B and its gate", check_sync_ab),
    ("gloo2-straggler", "2 ranks on one GPU through gloo, a straggler", check_gloo2),
    ("sweep", "the sweep's OOM probe under a memory fraction", check_sweep),
    ("data-bound-pinned", "pinned memory and non_blocking copies", check_pinned),
    ("doctor", "tracekit doctor on the data-bound config", check_doctor),
)


# -- the run --------------------------------------------------------------------------------


def device_name(cpu: bool) -> tuple[str, str]:
    """(a slug for folder names, the device in words)."""
    if cpu:
        return "cpu", "CPU (--cpu smoke test)"
    import torch  # noqa: PLC0415 (after CUDA_VISIBLE_DEVICES is set)

    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: torch sees no CUDA device (--cpu runs the smoke test on CPU)")
    words = torch.cuda.get_device_name(0)
    model = re.search(r"\b([A-Za-z]{1,3}\d{2,4}[A-Za-z]?)\b", words.replace("NVIDIA", ""))
    slug = model.group(1).lower() if model else re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")
    return f"cuda-{slug}", words


def environment(cpu: bool) -> dict[str, Any]:
    """Versions and the device, and nvidia-smi's view of it."""
    facts: dict[str, Any] = {"python": sys.version.split()[0]}
    with contextlib.suppress(Exception):
        import torch  # noqa: PLC0415

        facts["torch"] = str(torch.__version__)
        facts["cuda"] = torch.version.cuda
        if not cpu and torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            facts["gpu"] = props.name
            facts["gpu_memory_gib"] = round(props.total_memory / GIB, 1)
    with contextlib.suppress(Exception):
        from tracekit.readers import kineto_native  # noqa: PLC0415

        facts["native_decoder"] = kineto_native.ENABLED
    if not cpu and shutil.which("nvidia-smi"):
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        facts["nvidia_smi"] = smi.stdout.strip()
    return facts


def markdown(checks: list[Check], env: dict[str, Any], device: str, wall: float, work: Path) -> str:
    """What a person reads: the device, the wall time, each check and its figures, the A/B table."""
    lines = [
        "# tracekit GPU check",
        "",
        f"- device: {device}",
        f"- environment: {json.dumps(env)}",
        f"- wall time: {wall:.0f} s",
        "",
        "| check | result | s | what was found |",
        "| --- | --- | ---: | --- |",
    ]
    for c in checks:
        result = "skipped" if c.skipped else ("pass" if c.passed else "FAIL")
        found = c.skipped or "; ".join(c.failures) or c.facts.get("verdict", "")
        lines.append(f"| {c.name}: {c.title} | {result} | {c.seconds:.0f} | {found} |")
    for c in checks:
        lines += ["", f"## {c.name}", "", "```json", json.dumps(c.facts, indent=1, default=str)[:6000], "```"]
    for pattern, title in (
        ("*-sync-ab.compare.md", "The A/B report (tracekit compare --md)"),
        ("*-sweep.md", "The sweep (tracekit sweep --md)"),
        ("*-doctor.md", "The doctor (tracekit doctor --md)"),
    ):
        for path in sorted(work.glob(pattern)):
            lines += ["", f"## {title}", "", path.read_text()]
    return "\n".join(lines) + "\n"


def bundle(work: Path, slug: str, results: Path) -> str:
    """Every check's folders (the captures, their reports) in one ``captures.tar.gz``, named as
    samples (the device tool brings back 8 files at most)."""
    path = results / "captures.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for member in sorted(work.glob(f"{slug}-*")):
            tar.add(member, arcname=member.name)
    return f"{path.name} ({path.stat().st_size / 1e6:.1f} MB)"


def start_run(cpu: bool, out: Path, name: str, deadline: float) -> tuple[float, str, str, Runner, dict[str, Any]]:
    """A GPU script's start (``gpu_check``, ``gpu_calibration``): on CPU, CUDA hidden from it and its
    commands; its results folder, a work folder (``tracekit-NAME-*``, with the commands' cache)
    and the runner that logs to ``NAME.log`` (``-`` as ``_``) until ``deadline`` seconds from now.
    Returns the start, the device's slug and words, the runner and the environment's facts."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"] = ""
    start = time.monotonic()
    slug, device = device_name(cpu)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"tracekit-{name}-"))
    env["TRACEKIT_CACHE_DIR"] = str(work / "cache")
    runner = Runner(work, out / f"{name.replace('-', '_')}.log", start + deadline, env)
    return start, slug, device, runner, environment(cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on CPU as a smoke test of the script")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-check"))
    parser.add_argument("--only", action="append", choices=[c[0] for c in CHECKS], help="run only these checks")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds the whole run may take")
    args = parser.parse_args(argv)
    start, slug, device, runner, facts = start_run(args.cpu, args.out, "gpu-check", args.deadline)
    work = runner.work
    runner.say(f"tracekit GPU check on {device}: {json.dumps(facts)}; work folder {work}")
    sizes = CPU if args.cpu else GPU
    checks: list[Check] = []
    for name, title, fn in CHECKS:
        if args.only and name not in args.only:
            continue
        check = Check(name, title)
        checks.append(check)
        if runner.left() < 20:
            check.skipped = "no time left"
            continue
        runner.say(f"== {name}: {title}")
        clock = time.monotonic()
        try:
            fn(runner, sizes, f"{slug}-{name}", check, not args.cpu)
        except Exception as exc:  # one check's bug must not lose the others' results
            check.failures.append(f"{type(exc).__name__}: {exc}")
            runner.log.write(traceback.format_exc())
        check.seconds = time.monotonic() - clock
        check.passed = not check.failures and check.skipped is None
        runner.say(f"== {name}: {'skipped: ' + check.skipped if check.skipped else 'pass' if check.passed else 'FAIL'}")
        for failure in check.failures:
            runner.say(f"   {failure}")
    wall = time.monotonic() - start
    (args.out / "gpu_check.json").write_text(
        json.dumps(
            {
                "device": device,
                "slug": slug,
                "environment": facts,
                "wall_s": round(wall, 1),
                "checks": [vars(c) for c in checks],
            },
            indent=1,
            default=str,
        )
    )
    (args.out / "gpu_check.md").write_text(markdown(checks, facts, device, wall, work))
    runner.say(f"wrote {bundle(work, slug, args.out)}")
    runner.say(
        f"done in {wall:.0f} s: {sum(c.passed for c in checks)} passed, "
        f"{sum(bool(c.failures) for c in checks)} failed, {sum(c.skipped is not None for c in checks)} skipped"
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(c.passed or c.skipped for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
